// PlanSweep: validate, solve the shapes (PlanShapes: once per MoE point, once for the dense
// model, once per dense size), expand the grid (ExpandGrid) by copying them into one run each
// (MakeRun), then plan identical runs once (MergeIdenticalRuns); a 300-run grid plans in
// milliseconds.
#include "core/planner.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/accounting.h"
#include "core/efficiency_leverage.h"
#include "core/field_violation.h"
#include "core/gpu_sizing.h"
#include "core/grid.h"
#include "core/hyperparameters.h"
#include "core/planner_sharing.h"
#include "core/run_spec_defaults.h"
#include "core/shape_solver.h"
#include "core/status_macros.h"
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
  if (!accounting.ok()) {  // a violation to collect, not an early return
    violations.push_back({path, std::string(accounting.status().message())});
    return std::nullopt;
  }
  if (model->target_params() > 0) {
    accounting->set_params_error(double(accounting->params()) / double(model->target_params()) - 1);
  }
  return PlannedModel{std::move(label), *model, *std::move(accounting)};
}

bool NeedsDense(const SweepSpec& spec, const std::vector<parity::v1::DataVariant>& variants) {
  if (!spec.baselines().empty() || !spec.grid().dense_sizes().empty()) return true;
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

absl::Status Invalid(const SweepSpec& spec, const char* what,
                     const std::vector<FieldViolation>& violations) {
  return InvalidArgumentWithViolations(
      absl::StrCat("sweep '", spec.name(), "' ", what, ": ", violations.size(), " problem(s)"),
      violations);
}

// The solved models of a sweep: one per MoE point (grid order; `moe_points[i]` is the index of
// moe[i]'s point), the dense model if needed, and one per dense size (grid order).
struct PlannedShapes {
  std::vector<PlannedModel> moe;
  std::vector<int> moe_points;
  std::optional<PlannedModel> dense;
  std::vector<PlannedModel> frontier;
};

// The backbone, then each MoE point's shape on its own backbone (the sweep's, with the point's
// layout, shared expert and balance laid over it). Every point aims at the sweep backbone's
// target N, so an ablation changes the shape, never N. `backbone_target` is 0 when there is no
// MoE point or the backbone cannot be resolved.
void PlanMoePoints(const SweepSpec& spec, std::optional<ModelSpec>& backbone,
                   uint64_t& backbone_target, PlannedShapes& shapes,
                   std::vector<FieldViolation>& violations) {
  if (spec.grid().moe().empty()) return;
  absl::StatusOr<ModelSpec> resolved = ResolveBackbone(spec.moe());
  if (!resolved.ok()) {
    violations.push_back({"moe", std::string(resolved.status().message())});
    return;
  }
  backbone = *resolved;
  backbone_target = BackboneTargetParams(*backbone);
  const uint32_t seq = spec.training().sequence_length();
  for (int i = 0; i < spec.grid().moe_size(); ++i) {
    const auto& point = spec.grid().moe(i);
    const std::string path = absl::StrCat("grid.moe[", i, "]");
    absl::StatusOr<ModelSpec> point_backbone = ResolveBackbone(MoePointBackbone(spec.moe(), point));
    if (!point_backbone.ok()) {
      violations.push_back({path, std::string(point_backbone.status().message())});
      continue;
    }
    std::optional<PlannedModel> planned =
        Plan(SolveMoePoint(*point_backbone, point, backbone_target), MoePointLabel(point), seq,
             path, violations);
    if (planned) {
      shapes.moe.push_back(*std::move(planned));
      shapes.moe_points.push_back(i);
    }
  }
}

// A solved N outside the tolerance of its target is a violation at `path`.
void CheckTolerance(const PlannedModel& model, uint64_t target, const std::string& path,
                    std::vector<FieldViolation>& violations) {
  if (target == 0 || std::fabs(model.accounting.params_error()) <= ParamTolerance(model.model)) {
    return;
  }
  violations.push_back(
      {path, absl::StrFormat("N = %s is %.1f%% from the target N = %s (tolerance %g%%)",
                             CompactNumber(double(model.accounting.params())),
                             model.accounting.params_error() * 100, CompactNumber(double(target)),
                             ParamTolerance(model.model) * 100)});
}

// The dense model, aimed at dense.target_params, else the backbone's N, else the first MoE
// point's N; a solved N outside the tolerance of that target is a violation.
std::optional<PlannedModel> PlanDense(const SweepSpec& spec, const ModelSpec* backbone,
                                      uint64_t backbone_target,
                                      const std::vector<PlannedModel>& moe_models,
                                      std::vector<FieldViolation>& violations) {
  uint64_t target = spec.dense().target_params();
  if (target == 0) target = backbone_target;
  if (target == 0 && !moe_models.empty()) target = moe_models.front().accounting.params();
  std::optional<PlannedModel> dense = Plan(SolveDense(spec.dense(), backbone, target), "dense",
                                           spec.training().sequence_length(), "dense", violations);
  if (dense) CheckTolerance(*dense, target, "dense", violations);
  return dense;
}

// The dense spec of one size of the frontier: SweepSpec.dense with its width and depth freed (or
// set to the size's explicit ones); an explicit D_ffn becomes its ratio α, an explicit shape's
// D_m/L its ζ, so every size keeps the dense model's proportions.
ModelSpec DenseSizeSpec(const ModelSpec& dense, const parity::v1::DenseSize& size) {
  ModelSpec m = dense;
  if (m.head_dim() == 0 && m.num_heads() > 0 && m.d_model() > 0) {
    m.set_head_dim(m.d_model() / m.num_heads());
  }
  if (m.ffn_hidden() > 0 && m.d_model() > 0) m.set_ffn_ratio(double(m.ffn_hidden()) / m.d_model());
  if (m.aspect_ratio() == 0 && m.d_model() > 0 && m.num_layers() > 0) {
    m.set_aspect_ratio(double(m.d_model()) / m.num_layers());
  }
  m.clear_ffn_hidden();
  m.clear_num_heads();
  m.set_d_model(size.d_model());
  m.set_num_layers(size.num_layers());
  if (size.d_model() > 0 && m.head_dim() > 0) m.set_num_heads(size.d_model() / m.head_dim());
  m.clear_target_params();
  return m;
}

// Each dense size: its target N (a multiple of the dense model's, or its own), solved like the
// dense model and held to the tolerance of its own target.
void PlanFrontier(const SweepSpec& spec, const ModelSpec* backbone, PlannedShapes& shapes,
                  std::vector<FieldViolation>& violations) {
  const uint64_t dense_n = shapes.dense ? shapes.dense->accounting.params() : 0;
  const uint64_t dense_target = shapes.dense && shapes.dense->model.target_params() > 0
                                    ? shapes.dense->model.target_params()
                                    : dense_n;
  for (int i = 0; i < spec.grid().dense_sizes_size(); ++i) {
    const auto& size = spec.grid().dense_sizes(i);
    const std::string path = absl::StrCat("grid.dense_sizes[", i, "]");
    uint64_t target = size.target_params();
    if (size.params_multiple() > 0) {
      target = static_cast<uint64_t>(std::llround(size.params_multiple() * double(dense_target)));
    }
    std::optional<PlannedModel> planned =
        Plan(SolveDense(DenseSizeSpec(spec.dense(), size), backbone, target), DenseSizeLabel(size),
             spec.training().sequence_length(), path, violations);
    if (!planned) continue;
    CheckTolerance(*planned, target, path, violations);
    shapes.frontier.push_back(*std::move(planned));
  }
}

PlannedShapes PlanShapes(const SweepSpec& spec,
                         const std::vector<parity::v1::DataVariant>& variants,
                         std::vector<FieldViolation>& violations) {
  PlannedShapes shapes;
  std::optional<ModelSpec> backbone;
  uint64_t backbone_target = 0;
  PlanMoePoints(spec, backbone, backbone_target, shapes, violations);
  if (NeedsDense(spec, variants)) {
    shapes.dense =
        PlanDense(spec, backbone ? &*backbone : nullptr, backbone_target, shapes.moe, violations);
    if (shapes.dense) PlanFrontier(spec, backbone ? &*backbone : nullptr, shapes, violations);
  }
  return shapes;
}

// One model row of a budget and data variant: an MoE point, a dense baseline spending
// `multiple`·C (with its own data policy when `reuse` is set), or a dense size of the frontier.
struct Row {
  const PlannedModel* planned;
  parity::v1::RunRole role;
  std::string label;
  double multiple;
  const parity::v1::MoePoint* point = nullptr;                       // MoE rows: the grid point
  parity::v1::ReuseMode reuse = parity::v1::REUSE_MODE_UNSPECIFIED;  // baselines: the override
};

std::vector<Row> RowsOf(const SweepSpec& spec, const PlannedShapes& shapes) {
  std::vector<Row> rows;
  for (size_t i = 0; i < shapes.moe.size(); ++i) {
    const PlannedModel& m = shapes.moe[i];
    rows.push_back({&m, parity::v1::RUN_ROLE_MOE, absl::StrCat("moe-", m.label), 1.0,
                    &spec.grid().moe(shapes.moe_points[i])});
  }
  for (const auto& baseline : spec.baselines()) {
    rows.push_back({&*shapes.dense, parity::v1::RUN_ROLE_DENSE_BASELINE, BaselineLabel(baseline),
                    baseline.compute_multiple(), nullptr, baseline.reuse()});
  }
  for (const PlannedModel& m : shapes.frontier) {
    rows.push_back({&m, parity::v1::RUN_ROLE_DENSE_FRONTIER, absl::StrCat("dense-", m.label), 1.0});
  }
  return rows;
}

// The data variant a row's runs use: the cell's, or a baseline's own policy over it (unique:
// D̂ = D; strict: the variant's D̂, by default the dense 1C D). The name stays the cell's, so the
// run sits in the group it is the baseline of.
parity::v1::DataVariant RowVariant(const parity::v1::DataVariant& variant, const Row& row) {
  if (row.reuse == parity::v1::REUSE_MODE_UNSPECIFIED || row.reuse == variant.reuse()) {
    return variant;
  }
  parity::v1::DataVariant v;
  v.set_name(variant.name());
  v.set_reuse(row.reuse);
  if (row.reuse == parity::v1::REUSE_MODE_STRICT) v.set_unique_tokens(variant.unique_tokens());
  return v;
}

// Strict reuse's default D̂: what the 1C dense run of `compute` actually consumes (whole
// batches). 0 when the sweep has no dense model.
uint64_t DenseOneCTokens(const SweepSpec& spec, const std::optional<PlannedModel>& dense,
                         double compute) {
  if (!dense) return 0;
  const uint64_t tokens = TokensFor(compute, dense->accounting.flops_per_token());
  parity::v1::TrainingSpec training = spec.training();
  parity::v1::ResourceRequest resources = spec.resources();
  FillResourceDefaults(resources);
  if (!ResolveTraining(training, dense->accounting.active_params(), tokens, RanksOf(resources))
           .ok()) {
    return tokens;
  }
  return training.steps() * training.batch_tokens();
}

// What one row's runs share within a budget and data variant.
struct Cell {
  const SweepSpec& spec;
  const std::string& budget_label;
  const parity::v1::DataVariant& variant;
  uint64_t tokens;  // D the compute buys
  uint64_t unique;  // D̂ as planned (data.unique_tokens)
};

// D̂ of a row's runs before the batch rounds D: fixed for strict reuse, D/epochs for loose.
uint64_t PlannedUniqueTokens(const parity::v1::DataVariant& variant, uint64_t tokens,
                             uint64_t dense_1c_tokens) {
  switch (variant.reuse()) {
    case parity::v1::REUSE_MODE_STRICT:
      return variant.unique_tokens() > 0 ? variant.unique_tokens() : dense_1c_tokens;
    case parity::v1::REUSE_MODE_LOOSE:
      return std::max<uint64_t>(1, std::llround(double(tokens) / variant.epochs()));
    default:
      return tokens;
  }
}

// D̂ of what the engine consumes (whole steps): loose reuse keeps its epochs, unique reuse sees
// every consumed token once, strict keeps the planned D̂.
uint64_t ConsumedUniqueTokens(const parity::v1::DataVariant& variant, uint64_t consumed,
                              uint64_t unique) {
  switch (variant.reuse()) {
    case parity::v1::REUSE_MODE_STRICT:
      return unique;
    case parity::v1::REUSE_MODE_LOOSE:
      return std::max<uint64_t>(1, std::llround(double(consumed) / variant.epochs()));
    default:
      return consumed;
  }
}

// The ablation values an MoE point sets, for the analysis to group by: only those the point
// itself sets, so an r_a sweep is not split by its solved K.
void SetAblationKeys(const parity::v1::MoePoint& p,
                     google::protobuf::Map<std::string, std::string>& point) {
  if (p.top_k() > 0 && p.target_activation_rate() > 0) point["top_k"] = absl::StrCat(p.top_k());
  if (p.granularity() > 0) point["granularity"] = absl::StrFormat("%g", p.granularity());
  if (p.layout() != parity::v1::MOE_LAYOUT_UNSPECIFIED) point["layout"] = LayoutName(p.layout());
  if (p.shared_expert_hidden() > 0) {
    point["shared_expert_hidden"] = absl::StrCat(p.shared_expert_hidden());
  }
  if (p.balance() != parity::v1::BALANCE_METHOD_UNSPECIFIED)
    point["balance"] = BalanceName(p.balance());
}

void SetGridPoint(const Cell& cell, const Row& row, uint64_t seed,
                  const HyperparameterSetting& setting, RunSpec& run) {
  auto& point = *run.mutable_grid_point();
  if (row.role == parity::v1::RUN_ROLE_MOE) {
    point["moe"] = row.planned->label;
    if (row.point != nullptr) SetAblationKeys(*row.point, point);
  } else if (row.role == parity::v1::RUN_ROLE_DENSE_FRONTIER) {
    point["dense_size"] = row.planned->label;
  } else {
    point["baseline"] = row.label;
    if (row.reuse != parity::v1::REUSE_MODE_UNSPECIFIED)
      point["baseline_data"] = ReuseName(row.reuse);
  }
  point["compute"] = cell.budget_label;
  point["data"] = cell.variant.name();
  point["seed"] = absl::StrCat(seed);
  for (const auto& [field, value] : setting) point[field] = absl::StrFormat("%g", value);
}

// One fully resolved run; the status of ResolveTraining when its training cannot be completed.
absl::StatusOr<RunSpec> MakeRun(const Cell& cell, const Row& row, uint64_t seed,
                                const HyperparameterSetting& setting) {
  const SweepSpec& spec = cell.spec;
  RunSpec run;
  run.set_name(absl::StrCat(row.label, "-", cell.budget_label, "-", cell.variant.name(), "-s", seed,
                            SettingLabel(setting)));
  run.set_role(row.role);
  run.set_sweep_name(spec.name());
  *run.mutable_model() = row.planned->model;
  Accounting& acc = *run.mutable_accounting() = row.planned->accounting;
  auto& training = *run.mutable_training() = spec.training();
  training.set_seed(seed);
  for (const auto& [field, value] : setting) {
    (void)SetTrainingField(training, field, value);  // checked by validation
  }
  parity::v1::ResourceRequest& resources = *run.mutable_resources() = spec.resources();
  FillResourceDefaults(resources);  // a gang's batch is resolved for its ranks
  PARITY_RETURN_IF_ERROR(
      ResolveTraining(training, acc.active_params(), cell.tokens, RanksOf(resources)));
  // D is what the engine consumes: whole steps of batch_tokens.
  const uint64_t consumed = training.steps() * training.batch_tokens();
  SetTokens(consumed, ConsumedUniqueTokens(cell.variant, consumed, cell.unique), acc);
  auto& data = *run.mutable_data() = spec.data();
  data.set_reuse(cell.variant.reuse());
  data.set_unique_tokens(cell.unique);
  data.set_epochs(acc.epochs());
  FillDataDefaults(data);
  run.set_compute_budget(cell.budget_label);
  run.set_compute_multiple(row.multiple);
  run.set_data_variant(cell.variant.name());
  SetGridPoint(cell, row, seed, setting, run);
  if (row.role == parity::v1::RUN_ROLE_MOE) {
    run.set_predicted_efficiency_leverage(PredictedEfficiencyLeverage(
        acc.expert_activation_ratio(), acc.granularity(), acc.compute_flops()));
  }
  run.mutable_labels()->insert(spec.labels().begin(), spec.labels().end());
  return run;
}

// A run whose training could not be resolved: the field its message starts with
// ("training.batch_tokens: …"), else "training".
FieldViolation TrainingViolation(const absl::Status& status) {
  const std::string message(status.message());
  const size_t colon = message.find(": ");
  if (absl::StartsWith(message, "training.") && colon != std::string::npos &&
      message.find(' ') > colon) {
    return {message.substr(0, colon), message.substr(colon + 2)};
  }
  return {"training", message};
}

// Budgets × data variants × rows × seeds × settings, in that nesting order. A row whose budget
// buys no token, a run whose training cannot be resolved and a duplicate name are violations.
std::vector<RunSpec> ExpandGrid(const SweepSpec& spec, const PlannedShapes& shapes,
                                const std::vector<parity::v1::DataVariant>& variants,
                                std::vector<FieldViolation>& violations) {
  const std::vector<HyperparameterSetting> settings = HyperparameterSettingsOf(spec.grid());
  std::vector<uint64_t> seeds(spec.grid().seeds().begin(), spec.grid().seeds().end());
  if (seeds.empty()) seeds.push_back(spec.training().seed());
  const std::vector<Row> rows = RowsOf(spec, shapes);
  std::vector<RunSpec> runs;
  runs.reserve(ExpectedRunCount(spec));
  absl::flat_hash_set<std::string> names;
  for (int b = 0; b < spec.grid().compute_size(); ++b) {
    const auto& budget = spec.grid().compute(b);
    const std::string budget_label = BudgetLabel(budget, b);
    const double compute = budget.compute_flops() > 0 ? budget.compute_flops()
                                                      : shapes.dense->accounting.flops_per_token() *
                                                            double(budget.dense_tokens());
    const uint64_t dense_1c_tokens = DenseOneCTokens(spec, shapes.dense, compute);
    for (const auto& variant : variants) {
      for (const Row& row : rows) {
        const double row_compute = compute * row.multiple;
        const double flops_per_token = row.planned->accounting.flops_per_token();
        const uint64_t tokens = TokensFor(row_compute, flops_per_token);
        if (tokens == 0) {
          violations.push_back({absl::StrCat("grid.compute[", b, "]"),
                                absl::StrFormat("%g FLOPs buys no token of %s (M = %g FLOPs/token)",
                                                compute, row.label, flops_per_token)});
          continue;
        }
        const parity::v1::DataVariant row_variant = RowVariant(variant, row);
        const Cell cell{spec, budget_label, row_variant, tokens,
                        PlannedUniqueTokens(row_variant, tokens, dense_1c_tokens)};
        for (uint64_t seed : seeds) {
          for (const HyperparameterSetting& setting : settings) {
            absl::StatusOr<RunSpec> run = MakeRun(cell, row, seed, setting);
            if (!run.ok()) {
              // Every run of a sweep shares its batch rule: say a refusal once, not per run.
              FieldViolation violation = TrainingViolation(run.status());
              const auto same = [&](const FieldViolation& v) {
                return v.field == violation.field && v.description == violation.description;
              };
              if (std::none_of(violations.begin(), violations.end(), same)) {
                violations.push_back(std::move(violation));
              }
            } else if (!CheckCudaShapes(*run, violations) || !SizeRunForGpu(*run, violations)) {
              // the violation names the shape or resources.gpu_memory_budget_bytes
            } else if (!names.insert(run->name()).second) {
              violations.push_back({"grid", absl::StrCat("run name '", run->name(),
                                                         "' is produced twice; give the axes "
                                                         "distinct labels")});
            } else {
              ShareBatchAmongRanks(*run);
              runs.push_back(*std::move(run));
            }
          }
        }
      }
    }
  }
  return runs;
}

}  // namespace

absl::StatusOr<std::vector<RunSpec>> PlanSweep(const SweepSpec& spec) {
  std::vector<FieldViolation> violations = ValidateSweepSpec(spec);
  if (!violations.empty()) return Invalid(spec, "is invalid", violations);
  const std::vector<parity::v1::DataVariant> variants = DataVariantsOf(spec);
  const PlannedShapes shapes = PlanShapes(spec, variants, violations);
  if (!violations.empty()) return Invalid(spec, "cannot be planned", violations);
  std::vector<RunSpec> runs = ExpandGrid(spec, shapes, variants, violations);
  if (!violations.empty()) return Invalid(spec, "cannot be planned", violations);
  MergeIdenticalRuns(runs);
  return runs;
}

}  // namespace parity::core
