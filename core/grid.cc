// Grid expansion helpers. Labels are short and stable because run names are built from them and
// users grep results tables by them.
#include "core/grid.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"

namespace parity::core {

using parity::v1::DataVariant;
using parity::v1::SweepSpec;

std::string CompactNumber(double value) {
  const double magnitude = std::fabs(value);
  const struct {
    double scale;
    const char* suffix;
  } kUnits[] = {{1e12, "T"}, {1e9, "B"}, {1e6, "M"}, {1e3, "K"}};
  for (const auto& unit : kUnits) {
    if (magnitude >= unit.scale) return absl::StrFormat("%.4g%s", value / unit.scale, unit.suffix);
  }
  return absl::StrFormat("%.4g", value);
}

std::vector<DataVariant> DataVariantsOf(const SweepSpec& spec) {
  const auto& base = spec.data();
  std::vector<DataVariant> variants;
  auto merge = [&](const DataVariant* over) {
    DataVariant v;
    v.set_reuse(base.reuse());
    v.set_unique_tokens(base.unique_tokens());
    v.set_epochs(base.epochs());
    if (over != nullptr) {
      v.set_name(over->name());
      if (over->reuse() != parity::v1::REUSE_MODE_UNSPECIFIED) v.set_reuse(over->reuse());
      if (over->unique_tokens() != 0) v.set_unique_tokens(over->unique_tokens());
      if (over->epochs() != 0) v.set_epochs(over->epochs());
    }
    if (v.reuse() == parity::v1::REUSE_MODE_UNSPECIFIED) v.set_reuse(parity::v1::REUSE_MODE_UNIQUE);
    if (v.name().empty()) {
      switch (v.reuse()) {
        case parity::v1::REUSE_MODE_STRICT:
          v.set_name(v.unique_tokens() == 0
                         ? "strict"
                         : absl::StrCat("strict", CompactNumber(v.unique_tokens())));
          break;
        case parity::v1::REUSE_MODE_LOOSE:
          v.set_name(absl::StrCat("loose", CompactNumber(v.epochs()), "ep"));
          break;
        default:
          v.set_name("unique");
      }
    }
    variants.push_back(std::move(v));
  };
  if (spec.grid().data().empty()) {
    merge(nullptr);
  } else {
    for (const DataVariant& over : spec.grid().data()) merge(&over);
  }
  return variants;
}

std::vector<HyperparameterSetting> HyperparameterSettingsOf(const parity::v1::Grid& grid) {
  std::vector<HyperparameterSetting> settings(1);
  for (const auto& axis : grid.hyperparameters()) {
    if (axis.values().empty()) continue;
    std::vector<HyperparameterSetting> next;
    next.reserve(settings.size() * axis.values_size());
    for (const HyperparameterSetting& s : settings) {
      for (double value : axis.values()) {
        HyperparameterSetting extended = s;
        extended.emplace_back(axis.field(), value);
        next.push_back(std::move(extended));
      }
    }
    settings = std::move(next);
  }
  return settings;
}

absl::Status SetTrainingField(parity::v1::TrainingSpec& training, const std::string& name,
                              double value) {
  using google::protobuf::FieldDescriptor;
  const FieldDescriptor* field = training.GetDescriptor()->FindFieldByName(name);
  if (field == nullptr || field->is_repeated()) {
    return absl::InvalidArgumentError(absl::StrCat("'", name, "' is not a TrainingSpec field"));
  }
  const auto* reflection = training.GetReflection();
  const bool integral = std::floor(value) == value;
  switch (field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_DOUBLE:
      reflection->SetDouble(&training, field, value);
      return absl::OkStatus();
    case FieldDescriptor::CPPTYPE_UINT32:
      if (!integral || value < 0 || value > std::numeric_limits<uint32_t>::max()) break;
      reflection->SetUInt32(&training, field, static_cast<uint32_t>(value));
      return absl::OkStatus();
    case FieldDescriptor::CPPTYPE_UINT64:
      if (!integral || value < 0 || value > 1.8e19) break;
      reflection->SetUInt64(&training, field, static_cast<uint64_t>(value));
      return absl::OkStatus();
    default:
      return absl::InvalidArgumentError(absl::StrCat("'", name, "' is not a numeric field"));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("value ", value, " does not fit '", name, "' (a non-negative integer)"));
}

std::string MoePointLabel(const parity::v1::MoePoint& p) {
  if (!p.name().empty()) return p.name();
  if (p.target_activation_rate() > 0) {
    return absl::StrFormat("ra%g", std::round(p.target_activation_rate() * 1000.0) / 10.0);
  }
  return absl::StrCat("e", p.num_experts(), "k", p.top_k(), "de", p.expert_hidden());
}

std::string BudgetLabel(const parity::v1::ComputeBudget& budget, int index) {
  return budget.name().empty() ? absl::StrCat("C", index + 1) : budget.name();
}

std::string BaselineLabel(const parity::v1::DenseBaseline& baseline) {
  if (!baseline.name().empty()) return baseline.name();
  return absl::StrFormat("dense-%gC", baseline.compute_multiple());
}

std::string SettingLabel(const HyperparameterSetting& setting) {
  std::string label;
  for (const auto& [field, value] : setting) {
    std::string short_name = field;
    if (field == "learning_rate") short_name = "lr";
    if (field == "batch_tokens") short_name = "bs";
    if (field == "weight_decay") short_name = "wd";
    if (field == "warmup_steps") short_name = "wu";
    absl::StrAppend(&label, "-", short_name, absl::StrFormat("%g", value));
  }
  return label;
}

uint64_t ExpectedRunCount(const SweepSpec& spec) {
  const auto& grid = spec.grid();
  double settings = 1;
  for (const auto& axis : grid.hyperparameters()) settings *= std::max(1, axis.values_size());
  const double per_model = double(grid.compute_size()) * std::max(1, grid.data_size()) *
                           std::max(1, grid.seeds_size()) * settings;
  const double runs = per_model * (grid.moe_size() + spec.baselines_size());
  return runs >= 1.8e19 ? std::numeric_limits<uint64_t>::max() : static_cast<uint64_t>(runs);
}

}  // namespace parity::core
