// Grid expansion helpers. Labels are short and stable because run names are built from them and
// users grep results tables by them.
#include "core/grid.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/spec_names.h"
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

// The spec's own spellings (core/spec_names.h), so grid points read as the YAML was written.
std::string LayoutName(parity::v1::MoeLayout layout) {
  return EnumYamlName(*parity::v1::MoeLayout_descriptor(), layout);
}

std::string BalanceName(parity::v1::BalanceMethod balance) {
  return EnumYamlName(*parity::v1::BalanceMethod_descriptor(), balance);
}

std::string ReuseName(parity::v1::ReuseMode reuse) {
  return EnumYamlName(*parity::v1::ReuseMode_descriptor(), reuse);
}

std::string MoePointLabel(const parity::v1::MoePoint& p) {
  if (!p.name().empty()) return p.name();
  std::string label;
  if (p.target_activation_rate() > 0) {
    label = absl::StrFormat("ra%g", std::round(p.target_activation_rate() * 1000.0) / 10.0);
    if (p.top_k() > 0) absl::StrAppend(&label, "-k", p.top_k());
  } else {
    label = absl::StrCat("e", p.num_experts(), "k", p.top_k(), "de", p.expert_hidden());
  }
  if (p.layout() == parity::v1::MOE_LAYOUT_ONE_DENSE_SHARED_EXPERT)
    absl::StrAppend(&label, "-1dse");
  if (p.layout() == parity::v1::MOE_LAYOUT_ALL_MOE) absl::StrAppend(&label, "-allmoe");
  if (p.layout() == parity::v1::MOE_LAYOUT_INTERLEAVED) absl::StrAppend(&label, "-interleaved");
  if (p.shared_expert_hidden() > 0) absl::StrAppend(&label, "-se", p.shared_expert_hidden());
  if (p.balance() == parity::v1::BALANCE_METHOD_AUX_LOSS) absl::StrAppend(&label, "-aux");
  if (p.balance() == parity::v1::BALANCE_METHOD_LOSS_FREE) absl::StrAppend(&label, "-lossfree");
  if (p.balance() == parity::v1::BALANCE_METHOD_NONE) absl::StrAppend(&label, "-nobalance");
  return label;
}

parity::v1::ModelSpec MoePointBackbone(const parity::v1::ModelSpec& backbone,
                                       const parity::v1::MoePoint& point) {
  parity::v1::ModelSpec m = backbone;
  auto* moe = m.mutable_moe();
  if (point.layout() != parity::v1::MOE_LAYOUT_UNSPECIFIED) {
    moe->set_layout(point.layout());
    if (point.layout() == parity::v1::MOE_LAYOUT_ONE_DENSE_SHARED_EXPERT) {
      moe->set_shared_expert_hidden(0);
    }
  }
  if (point.shared_expert_hidden() > 0) moe->set_shared_expert_hidden(point.shared_expert_hidden());
  if (point.balance() != parity::v1::BALANCE_METHOD_UNSPECIFIED) {
    moe->mutable_router()->set_balance(point.balance());
  }
  return m;
}

std::string BudgetLabel(const parity::v1::ComputeBudget& budget, int index) {
  return budget.name().empty() ? absl::StrCat("C", index + 1) : budget.name();
}

std::string BaselineLabel(const parity::v1::DenseBaseline& baseline) {
  if (!baseline.name().empty()) return baseline.name();
  std::string label = absl::StrFormat("dense-%gC", baseline.compute_multiple());
  if (baseline.reuse() != parity::v1::REUSE_MODE_UNSPECIFIED) {
    absl::StrAppend(&label, "-", ReuseName(baseline.reuse()));
  }
  return label;
}

std::string DenseSizeLabel(const parity::v1::DenseSize& size) {
  if (!size.name().empty()) return size.name();
  if (size.params_multiple() > 0) return absl::StrFormat("n%g", size.params_multiple());
  if (size.target_params() > 0)
    return absl::StrCat("n", CompactNumber(double(size.target_params())));
  return absl::StrCat("d", size.d_model(), "l", size.num_layers());
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
  const double runs =
      per_model * (grid.moe_size() + spec.baselines_size() + grid.dense_sizes_size());
  return runs >= 1.8e19 ? std::numeric_limits<uint64_t>::max() : static_cast<uint64_t>(runs);
}

}  // namespace parity::core
