// PlanSweep. Shapes are solved once per MoE point and once for the dense model, then the grid is
// expanded by copying them; a 300-run grid plans in milliseconds.
#include "core/planner.h"

#include <cmath>
#include <optional>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/accounting.h"
#include "core/efficiency_leverage.h"
#include "core/field_violation.h"
#include "core/gpu_sizing.h"
#include "core/grid.h"
#include "core/hyperparameters.h"
#include "core/shape_solver.h"
#include "core/validation.h"

namespace parity::core {
namespace {

using parity::v1::Accounting;
using parity::v1::ModelSpec;
using parity::v1::RunSpec;
using parity::v1::SweepSpec;

// A solved model and its accounting (token fields still 0).
struct PlannedModel {
  std::string label;
  ModelSpec model;
  Accounting accounting;
};

std::optional<PlannedModel> Plan(const absl::StatusOr<ModelSpec>& model, std::string label,
                                 uint32_t sequence_length, const std::string& path,
                                 std::vector<FieldViolation>& violations) {
  if (!model.ok()) {
    violations.push_back({path, std::string(model.status().message())});
    return std::nullopt;
  }
  absl::StatusOr<Accounting> accounting = ComputeAccounting(*model, sequence_length);
  if (!accounting.ok()) {
    violations.push_back({path, std::string(accounting.status().message())});
    return std::nullopt;
  }
  if (model->target_params() > 0) {
    accounting->set_params_error(double(accounting->params()) / double(model->target_params()) - 1);
  }
  return PlannedModel{std::move(label), *model, *std::move(accounting)};
}

bool NeedsDense(const SweepSpec& spec, const std::vector<parity::v1::DataVariant>& variants) {
  if (!spec.baselines().empty()) return true;
  for (const auto& b : spec.grid().compute()) {
    if (b.dense_tokens() > 0) return true;
  }
  for (const auto& v : variants) {
    if (v.reuse() == parity::v1::REUSE_MODE_STRICT && v.unique_tokens() == 0) return true;
  }
  return false;
}

uint64_t TokensFor(double compute, double flops_per_token) {
  return static_cast<uint64_t>(std::llround(compute / flops_per_token));
}

}  // namespace

absl::StatusOr<std::vector<RunSpec>> PlanSweep(const SweepSpec& spec) {
  std::vector<FieldViolation> violations = ValidateSweepSpec(spec);
  if (!violations.empty()) {
    return InvalidArgumentWithViolations(
        absl::StrCat("sweep '", spec.name(), "' is invalid: ", violations.size(), " problem(s)"),
        violations);
  }
  const uint32_t seq = spec.training().sequence_length();
  const std::vector<parity::v1::DataVariant> variants = DataVariantsOf(spec);

  // Shapes.
  std::optional<ModelSpec> backbone;
  uint64_t backbone_target = 0;
  std::vector<PlannedModel> moe_models;
  if (!spec.grid().moe().empty()) {
    absl::StatusOr<ModelSpec> resolved = ResolveBackbone(spec.moe());
    if (!resolved.ok()) {
      violations.push_back({"moe", std::string(resolved.status().message())});
    } else {
      backbone = *resolved;
      backbone_target = BackboneTargetParams(*backbone);
      for (int i = 0; i < spec.grid().moe_size(); ++i) {
        const auto& point = spec.grid().moe(i);
        std::optional<PlannedModel> planned =
            Plan(SolveMoePoint(*backbone, point, backbone_target), MoePointLabel(point), seq,
                 absl::StrCat("grid.moe[", i, "]"), violations);
        if (planned) moe_models.push_back(*std::move(planned));
      }
    }
  }
  std::optional<PlannedModel> dense;
  if (NeedsDense(spec, variants)) {
    uint64_t target = spec.dense().target_params();
    if (target == 0) target = backbone_target;
    if (target == 0 && !moe_models.empty()) target = moe_models.front().accounting.params();
    dense = Plan(SolveDense(spec.dense(), backbone ? &*backbone : nullptr, target), "dense", seq,
                 "dense", violations);
    if (dense && target > 0 &&
        std::fabs(dense->accounting.params_error()) > ParamTolerance(dense->model)) {
      violations.push_back(
          {"dense",
           absl::StrFormat("N = %s is %.1f%% from the target N = %s (tolerance %g%%)",
                           CompactNumber(double(dense->accounting.params())),
                           dense->accounting.params_error() * 100, CompactNumber(double(target)),
                           ParamTolerance(dense->model) * 100)});
    }
  }
  if (!violations.empty()) {
    return InvalidArgumentWithViolations(
        absl::StrCat("sweep '", spec.name(), "' cannot be planned: ", violations.size(),
                     " problem(s)"),
        violations);
  }

  // Grid expansion.
  const std::vector<HyperparameterSetting> settings = HyperparameterSettingsOf(spec.grid());
  std::vector<uint64_t> seeds(spec.grid().seeds().begin(), spec.grid().seeds().end());
  if (seeds.empty()) seeds.push_back(spec.training().seed());
  std::vector<RunSpec> runs;
  runs.reserve(ExpectedRunCount(spec));
  absl::flat_hash_set<std::string> names;

  for (int b = 0; b < spec.grid().compute_size(); ++b) {
    const auto& budget = spec.grid().compute(b);
    const std::string budget_label = BudgetLabel(budget, b);
    const double compute = budget.compute_flops() > 0 ? budget.compute_flops()
                                                      : dense->accounting.flops_per_token() *
                                                            double(budget.dense_tokens());
    // Strict reuse's default D̂ is what the 1C dense run actually consumes (whole batches).
    uint64_t dense_1c_tokens = 0;
    if (dense) {
      dense_1c_tokens = TokensFor(compute, dense->accounting.flops_per_token());
      parity::v1::TrainingSpec dense_training = spec.training();
      if (ResolveTraining(dense_training, dense->accounting.active_params(), dense_1c_tokens)
              .ok()) {
        dense_1c_tokens = dense_training.steps() * dense_training.batch_tokens();
      }
    }
    for (const auto& variant : variants) {
      // One entry per model row of this budget and variant: MoE points, then baselines.
      struct Row {
        const PlannedModel* planned;
        parity::v1::RunRole role;
        std::string label;
        double multiple;
      };
      std::vector<Row> rows;
      for (const PlannedModel& m : moe_models) {
        rows.push_back({&m, parity::v1::RUN_ROLE_MOE, absl::StrCat("moe-", m.label), 1.0});
      }
      for (const auto& baseline : spec.baselines()) {
        rows.push_back({&*dense, parity::v1::RUN_ROLE_DENSE_BASELINE, BaselineLabel(baseline),
                        baseline.compute_multiple()});
      }
      for (const Row& row : rows) {
        const Accounting& base = row.planned->accounting;
        const uint64_t tokens = TokensFor(compute * row.multiple, base.flops_per_token());
        if (tokens == 0) {
          violations.push_back({absl::StrCat("grid.compute[", b, "]"),
                                absl::StrFormat("%g FLOPs buys no token of %s (M = %g FLOPs/token)",
                                                compute, row.label, base.flops_per_token())});
          continue;
        }
        uint64_t unique = tokens;
        if (variant.reuse() == parity::v1::REUSE_MODE_STRICT) {
          unique = variant.unique_tokens() > 0 ? variant.unique_tokens() : dense_1c_tokens;
        } else if (variant.reuse() == parity::v1::REUSE_MODE_LOOSE) {
          unique = std::max<uint64_t>(1, std::llround(double(tokens) / variant.epochs()));
        }
        for (uint64_t seed : seeds) {
          for (const HyperparameterSetting& setting : settings) {
            RunSpec run;
            run.set_name(absl::StrCat(row.label, "-", budget_label, "-", variant.name(), "-s", seed,
                                      SettingLabel(setting)));
            run.set_role(row.role);
            run.set_sweep_name(spec.name());
            *run.mutable_model() = row.planned->model;
            Accounting& acc = *run.mutable_accounting() = base;
            auto& training = *run.mutable_training() = spec.training();
            training.set_seed(seed);
            for (const auto& [field, value] : setting) {
              (void)SetTrainingField(training, field, value);  // checked by validation
            }
            if (absl::Status s = ResolveTraining(training, acc.active_params(), tokens); !s.ok()) {
              violations.push_back({"training", std::string(s.message())});
              continue;
            }
            // D is what the engine consumes: whole steps of batch_tokens.
            const uint64_t consumed = training.steps() * training.batch_tokens();
            uint64_t consumed_unique = unique;
            if (variant.reuse() == parity::v1::REUSE_MODE_LOOSE) {
              consumed_unique =
                  std::max<uint64_t>(1, std::llround(double(consumed) / variant.epochs()));
            } else if (variant.reuse() != parity::v1::REUSE_MODE_STRICT) {
              consumed_unique = consumed;
            }
            SetTokens(consumed, consumed_unique, acc);
            auto& data = *run.mutable_data() = spec.data();
            data.set_reuse(variant.reuse());
            data.set_unique_tokens(unique);
            data.set_epochs(acc.epochs());
            if (data.validation_fraction() == 0) data.set_validation_fraction(0.01);
            run.set_compute_budget(budget_label);
            run.set_compute_multiple(row.multiple);
            run.set_data_variant(variant.name());
            auto& point = *run.mutable_grid_point();
            if (row.role == parity::v1::RUN_ROLE_MOE) {
              point["moe"] = row.planned->label;
            } else {
              point["baseline"] = row.label;
            }
            point["compute"] = budget_label;
            point["data"] = variant.name();
            point["seed"] = absl::StrCat(seed);
            for (const auto& [field, value] : setting) point[field] = absl::StrFormat("%g", value);
            if (row.role == parity::v1::RUN_ROLE_MOE) {
              run.set_predicted_efficiency_leverage(PredictedEfficiencyLeverage(
                  acc.expert_activation_ratio(), acc.granularity(), acc.compute_flops()));
            }
            *run.mutable_resources() = spec.resources();
            if (!SizeRunForGpu(run, violations)) continue;
            run.mutable_labels()->insert(spec.labels().begin(), spec.labels().end());
            if (!names.insert(run.name()).second) {
              violations.push_back({"grid", absl::StrCat("run name '", run.name(),
                                                         "' is produced twice; give the axes "
                                                         "distinct labels")});
              continue;
            }
            runs.push_back(std::move(run));
          }
        }
      }
    }
  }
  if (!violations.empty()) {
    return InvalidArgumentWithViolations(
        absl::StrCat("sweep '", spec.name(), "' cannot be planned: ", violations.size(),
                     " problem(s)"),
        violations);
  }
  return runs;
}

}  // namespace parity::core
