#include "export/export_schema.h"

#include <cmath>
#include <limits>
#include <set>
#include <tuple>

#include "absl/strings/str_replace.h"
#include "core/eval_sets.h"
#include "core/failure_remedy.h"
#include "core/model_layout.h"
#include "core/spec_names.h"
#include "fmt/format.h"

namespace parity::exports {

using parity::v1::ResultRow;
using parity::v1::Run;

// Helpers, named rather than anonymous: ExportBuilder::Plans (a member of a class in the header)
// holds their types.
namespace detail {

// What a cell getter sees: the result row, its run (may be null) and whether it finished.
struct RowContext {
  const ResultRow& row;
  const Run* run;
  bool finished;
};

using Getter = Cell (*)(const RowContext&);

struct FixedColumn {
  Column column;
  Getter get;  // nullptr: a family placeholder, expanded by BuildExportTable
};

constexpr ColumnType kS = ColumnType::kString;
constexpr ColumnType kI = ColumnType::kInt64;
constexpr ColumnType kD = ColumnType::kDouble;

// The family placeholders, as DocumentedColumns() names them.
constexpr char kGridFamily[] = "grid.<axis>";
constexpr char kFinalSetFamily[] = "final_bpc.<set>";
constexpr char kDeltaFamily[] = "delta_bpc_vs_dense_<m>c";
constexpr char kDeltaSetFamily[] = "delta_bpc_vs_dense_<m>c.<set>";

Cell Text(const std::string& s) { return s; }
Cell OptText(const std::string& s) { return s.empty() ? Cell() : Cell(s); }
// uint64 proto fields: every real count fits int64; a seed past 2^63 keeps its bits (two's
// complement), which a reader can undo.
Cell Int(uint64_t v) { return static_cast<int64_t>(v); }
Cell Double(double v) { return std::isfinite(v) ? Cell(v) : Cell(); }
// A proto double whose 0 means "not set" (the proto has no presence for it).
Cell Positive(double v) { return std::isfinite(v) && v > 0 ? Cell(v) : Cell(); }
Cell Enum(const google::protobuf::EnumDescriptor& type, int number) {
  if (number == 0) return {};  // UNSPECIFIED
  return core::EnumYamlName(type, number);
}

const parity::v1::TrainingSpec* Training(const RowContext& c) {
  return c.run == nullptr ? nullptr : &c.run->spec().training();
}

#define PARITY_TRAINING(expr)                        \
  [](const RowContext& c) -> Cell {                  \
    const parity::v1::TrainingSpec* t = Training(c); \
    return t == nullptr ? Cell() : (expr);           \
  }

const std::vector<FixedColumn>& Fixed() {
  static const auto* columns = new std::vector<FixedColumn>{
      {{"sweep_id", kS, "", "Sweep id (UUID)."},
       [](const RowContext& c) { return Text(c.row.sweep_id()); }},
      {{"run_id", kS, "", "Run id (UUID); `parity` commands take a unique prefix of it."},
       [](const RowContext& c) { return Text(c.row.run_id()); }},
      {{"run_name", kS, "", "Run name, unique within the sweep (grid point, budget, seed)."},
       [](const RowContext& c) { return Text(c.row.name()); }},
      {{"role", kS, "", "moe, dense_baseline or dense_frontier."},
       [](const RowContext& c) { return Enum(*parity::v1::RunRole_descriptor(), c.row.role()); }},
      {{"layout", kS, "",
        "MoE layout as the spec spells it (dense, 1dense+SE, all-moe, interleaved)."},
       [](const RowContext& c) { return OptText(c.row.layout()); }},
      {{"state", kS, "", "pending, leased, running, succeeded, failed or cancelled."},
       [](const RowContext& c) { return Enum(*parity::v1::RunState_descriptor(), c.row.state()); }},
      {{"compute_budget", kS, "", "Compute budget label of the run's group (C1, 2e10, ...)."},
       [](const RowContext& c) { return OptText(c.row.compute_budget()); }},
      {{"compute_multiple", kD, "ratio",
        "Multiple of the budget the run spends (1 for 1C, 2 for 2C)."},
       [](const RowContext& c) { return Double(c.row.compute_multiple()); }},
      {{"data_variant", kS, "", "Data variant label of the run's group (reuse setting)."},
       [](const RowContext& c) { return OptText(c.row.data_variant()); }},
      {{"seed", kI, "", "Training seed."}, [](const RowContext& c) { return Int(c.row.seed()); }},
      {{kGridFamily, kS, "",
        "The run's grid coordinate on that axis, as the spec wrote it; one "
        "column per axis of any run, sorted by axis."},
       nullptr},
      {{"d_model", kI, "units", "D_m, the model width."},
       [](const RowContext& c) { return Int(c.row.d_model()); }},
      {{"num_layers", kI, "layers", "L."},
       [](const RowContext& c) { return Int(c.row.num_layers()); }},
      {{"num_experts", kI, "count", "E, experts per MoE layer (0 for dense)."},
       [](const RowContext& c) { return Int(c.row.num_experts()); }},
      {{"top_k", kI, "count", "K, experts each token is routed to (0 for dense)."},
       [](const RowContext& c) { return Int(c.row.top_k()); }},
      {{"expert_hidden", kI, "units", "D_e, hidden width of one expert (0 for dense)."},
       [](const RowContext& c) { return Int(c.row.expert_hidden()); }},
      {{"hyperparameter_rule", kS, "",
        "How learning rate and batch were chosen (fixed, step_law)."},
       PARITY_TRAINING(Enum(*parity::v1::HyperparameterRule_descriptor(), t->rule()))},
      {{"learning_rate", kD, "dimensionless", "Peak learning rate the run trained with."},
       PARITY_TRAINING(Positive(t->learning_rate()))},
      {{"batch_tokens", kI, "tokens", "Tokens per optimizer step."},
       PARITY_TRAINING(Int(t->batch_tokens()))},
      {{"sequence_length", kI, "tokens", "Training sequence length."},
       PARITY_TRAINING(Int(t->sequence_length()))},
      {{"steps", kI, "steps", "Optimizer steps planned."}, PARITY_TRAINING(Int(t->steps()))},
      {{"lr_schedule", kS, "", "Learning-rate schedule (cosine, wsd, ...)."},
       PARITY_TRAINING(Enum(*parity::v1::LrSchedule_descriptor(), t->schedule()))},
      {{"warmup_steps", kI, "steps", "Warmup steps."}, PARITY_TRAINING(Int(t->warmup_steps()))},
      {{"weight_decay", kD, "dimensionless", "AdamW weight decay; null when the engine default."},
       PARITY_TRAINING(t->has_weight_decay() ? Double(t->weight_decay()) : Cell())},
      {{"grad_clip", kD, "norm", "Gradient clipping norm; null when the engine default."},
       PARITY_TRAINING(t->has_grad_clip() ? Double(t->grad_clip()) : Cell())},
      {{"params", kI, "parameters", "N, total parameters (embeddings excluded)."},
       [](const RowContext& c) { return Int(c.row.params()); }},
      {{"active_params", kI, "parameters", "N_a, parameters active per token."},
       [](const RowContext& c) { return Int(c.row.active_params()); }},
      {{"activation_rate", kD, "fraction", "r_a = N_a / N."},
       [](const RowContext& c) { return Double(c.row.activation_rate()); }},
      {{"flops_per_token", kD, "FLOPs/token", "M, training FLOPs per token as planned."},
       [](const RowContext& c) { return Double(c.row.flops_per_token()); }},
      {{"measured_flops_per_token", kD, "FLOPs/token",
        "M the engine counted; null until finished."},
       [](const RowContext& c) { return Positive(c.row.measured_flops_per_token()); }},
      {{"compute_flops", kD, "FLOPs", "C = M·D, the training compute."},
       [](const RowContext& c) { return Double(c.row.compute_flops()); }},
      {{"tokens", kI, "tokens", "D, training tokens."},
       [](const RowContext& c) { return Int(c.row.tokens()); }},
      {{"unique_tokens", kI, "tokens", "D̂, distinct tokens the run may see."},
       [](const RowContext& c) { return Int(c.row.unique_tokens()); }},
      {{"epochs", kD, "epochs", "D / D̂, passes over the unique data."},
       [](const RowContext& c) { return Double(c.row.epochs()); }},
      {{"wall_seconds", kD, "seconds", "Wall time of training, all attempts; null until finished."},
       [](const RowContext& c) { return Positive(c.row.wall_seconds()); }},
      {{"predicted_efficiency_leverage", kD, "ratio",
        "EL the published joint law predicts (not measured); null for dense runs."},
       [](const RowContext& c) {
         return c.row.role() == parity::v1::RUN_ROLE_MOE
                    ? Positive(c.row.predicted_efficiency_leverage())
                    : Cell();
       }},
      {{"final_val_bpc", kD, "bits per byte",
        "Final BPC on the primary validation set; null "
        "unless the run succeeded."},
       [](const RowContext& c) { return c.finished ? Cell(c.row.final_val_bpc()) : Cell(); }},
      {{kFinalSetFamily, kD, "bits per byte",
        "Final BPC on that evaluation set (beyond the "
        "primary); null unless the run reported it."},
       nullptr},
      {{kDeltaFamily, kD, "bits per byte",
        "final_val_bpc minus that of the dense baseline at multiple m of the same budget, data "
        "variant and seed (first succeeded in grid order, a run serving that role in another "
        "group too); negative = better than dense; one column per multiple in the sweep, 1C "
        "always; null without a finished run and baseline."},
       nullptr},
      {{kDeltaSetFamily, kD, "bits per byte",
        "The same on that evaluation set (beyond the primary); null when either lacks the set."},
       nullptr},
      {{"failure_class", kS, "",
        "Why the last failed attempt failed (user_error, "
        "infrastructure, ...); null when none."},
       [](const RowContext& c) {
         return c.run == nullptr ? Cell() : OptText(core::FailureClassName(c.run->failure_class()));
       }},
      {{"failure_message", kS, "", "The scheduler's message for that failure; null when none."},
       [](const RowContext& c) {
         return c.run == nullptr ? Cell() : OptText(c.run->failure().message());
       }},
      {{"dataset_digest", kS, "",
        "Manifest digest of the dataset the engine read (64 hex); "
        "null when unreported."},
       [](const RowContext& c) { return OptText(c.row.dataset_digest()); }},
  };
  return *columns;
}

#undef PARITY_TRAINING

// The dense baseline a run is compared with: its final BPC and per-set BPCs.
using BaselineKey =
    std::tuple<std::string, std::string, uint64_t, double>;  // budget, variant, seed, m

struct Deltas {
  std::vector<double> multiples;  // ascending, 1 included
  std::map<BaselineKey, const ResultRow*> baselines;
};

bool Finished(const ResultRow& row) {
  return row.state() == parity::v1::RUN_STATE_SUCCEEDED && std::isfinite(row.final_val_bpc()) &&
         row.final_val_bpc() > 0;
}

// Every dense baseline of the sweep by (budget, variant, seed, multiple): the first that
// succeeded in grid order, the run itself or one serving that role in another group
// (RunSpec.also_serves) — the rule the scheduler's results view uses for 1C, for every multiple.
Deltas ComputeDeltas(const std::vector<ResultRow>& rows, const std::map<std::string, Run>& runs) {
  std::set<double> multiples = {1.0};
  Deltas deltas;
  for (const ResultRow& row : rows) {
    const auto run = runs.find(row.run_id());
    std::vector<std::pair<std::string, std::string>> groups;  // (budget, variant) per multiple
    std::vector<double> at;
    if (row.role() == parity::v1::RUN_ROLE_DENSE_BASELINE) {
      groups.emplace_back(row.compute_budget(), row.data_variant());
      at.push_back(row.compute_multiple());
    }
    if (run != runs.end()) {
      for (const auto& g : run->second.spec().also_serves()) {
        if (g.role() != parity::v1::RUN_ROLE_DENSE_BASELINE) continue;
        groups.emplace_back(g.compute_budget(), g.data_variant());
        at.push_back(g.compute_multiple());
      }
    }
    for (size_t i = 0; i < groups.size(); ++i) {
      if (!(at[i] > 0)) continue;
      multiples.insert(at[i]);
      if (!Finished(row)) continue;
      deltas.baselines.try_emplace({groups[i].first, groups[i].second, row.seed(), at[i]}, &row);
    }
  }
  deltas.multiples.assign(multiples.begin(), multiples.end());
  return deltas;
}

const ResultRow* BaselineOf(const Deltas& deltas, const ResultRow& row, double multiple) {
  const auto it =
      deltas.baselines.find({row.compute_budget(), row.data_variant(), row.seed(), multiple});
  return it == deltas.baselines.end() ? nullptr : it->second;
}

Cell SetBpc(const ResultRow& row, const std::string& set) {
  const auto it = row.final_eval_bpc().find(set);
  return it == row.final_eval_bpc().end() ? Cell() : Double(it->second);
}

}  // namespace detail

const char* ColumnTypeName(ColumnType type) {
  switch (type) {
    case ColumnType::kString:
      return "string";
    case ColumnType::kInt64:
      return "int64";
    case ColumnType::kDouble:
      return "double";
  }
  return "string";
}

const std::vector<Column>& DocumentedColumns() {
  static const auto* columns = [] {
    auto* out = new std::vector<Column>;
    for (const detail::FixedColumn& f : detail::Fixed()) out->push_back(f.column);
    return out;
  }();
  return *columns;
}

std::string MultipleSuffix(double multiple) {
  return absl::StrReplaceAll(fmt::format("{:g}c", multiple), {{".", "p"}});
}

ResultRow ResultRowOfRun(const Run& run) {
  const parity::v1::RunSpec& spec = run.spec();
  const parity::v1::ModelSpec& model = spec.model();
  const parity::v1::Accounting& a = spec.accounting();
  ResultRow row;
  row.set_run_id(run.run_id());
  row.set_sweep_id(run.sweep_id());
  row.set_name(spec.name());
  row.set_role(spec.role());
  row.set_layout(core::ModelLayoutName(model));  // as the store writes runs.layout
  row.set_state(run.state());
  row.set_d_model(model.d_model());
  row.set_num_layers(model.num_layers());
  row.set_num_experts(model.moe().num_experts());
  row.set_top_k(model.moe().top_k());
  row.set_expert_hidden(model.moe().expert_hidden());
  row.set_params(a.params());
  row.set_active_params(a.active_params());
  row.set_activation_rate(a.activation_rate());
  row.set_flops_per_token(a.flops_per_token());
  row.set_compute_flops(a.compute_flops());
  row.set_tokens(a.tokens());
  row.set_unique_tokens(a.unique_tokens());
  row.set_epochs(a.epochs());
  row.set_compute_budget(spec.compute_budget());
  row.set_compute_multiple(spec.compute_multiple());
  row.set_data_variant(spec.data_variant());
  row.set_predicted_efficiency_leverage(spec.predicted_efficiency_leverage());
  row.set_seed(spec.training().seed());
  if (run.state() == parity::v1::RUN_STATE_SUCCEEDED) {
    const parity::v1::RunSummary& summary = run.summary();
    row.set_final_val_bpc(summary.final_val_bpc());
    row.set_measured_flops_per_token(summary.measured_flops_per_token());
    row.set_wall_seconds(static_cast<double>(summary.wall_time().seconds()) +
                         summary.wall_time().nanos() * 1e-9);
    row.mutable_final_eval_bpc()->insert(summary.final_eval_bpc().begin(),
                                         summary.final_eval_bpc().end());
    row.set_dataset_digest(summary.dataset_digest());
  }
  return row;
}

void SlimRunForExport(Run& run) {
  run.clear_lease();
  run.clear_checkpoint();
  run.clear_summary();
  parity::v1::RunSpec& spec = *run.mutable_spec();
  spec.clear_model();
  spec.clear_data();
  spec.clear_accounting();
  spec.clear_resources();
  spec.clear_labels();
  for (auto& g : *spec.mutable_also_serves()) g.clear_grid_point();
  run.mutable_failure()->clear_details();
}

namespace detail {

// One output column and how to fill it: a fixed getter or a member of a family.
enum class Kind { kFixed, kGrid, kFinalSet, kDelta, kDeltaSet };
struct Plan {
  Kind kind = Kind::kFixed;
  Getter get = nullptr;
  std::string key = {};  // axis or evaluation set
  double multiple = 0;
};

// The table's columns with each one's plan: the fixed columns, families expanded in place.
std::vector<Plan> PlanColumns(const std::set<std::string>& axes, const std::set<std::string>& sets,
                              const std::vector<double>& multiples, std::vector<Column>& columns) {
  std::vector<Plan> plans;
  auto add = [&](const Column& family, std::string name, Plan plan) {
    columns.push_back({std::move(name), family.type, family.unit, family.meaning});
    plans.push_back(std::move(plan));
  };
  for (const FixedColumn& f : Fixed()) {
    const Column& c = f.column;
    if (f.get != nullptr) {
      add(c, c.name, {.kind = Kind::kFixed, .get = f.get});
    } else if (c.name == kGridFamily) {
      for (const std::string& axis : axes)
        add(c, "grid." + axis, {.kind = Kind::kGrid, .key = axis});
    } else if (c.name == kFinalSetFamily) {
      for (const std::string& set : sets)
        add(c, "final_bpc." + set, {.kind = Kind::kFinalSet, .key = set});
    } else if (c.name == kDeltaFamily) {
      for (double m : multiples)
        add(c, "delta_bpc_vs_dense_" + MultipleSuffix(m), {.kind = Kind::kDelta, .multiple = m});
    } else if (c.name == kDeltaSetFamily) {
      for (double m : multiples) {
        for (const std::string& set : sets)
          add(c, "delta_bpc_vs_dense_" + MultipleSuffix(m) + "." + set,
              {.kind = Kind::kDeltaSet, .key = set, .multiple = m});
      }
    }
  }
  return plans;
}

Cell FillCell(const Plan& p, const RowContext& c, const Deltas& deltas) {
  switch (p.kind) {
    case Kind::kFixed:
      return p.get(c);
    case Kind::kGrid: {
      if (c.run == nullptr) return {};
      const auto& point = c.run->spec().grid_point();
      const auto it = point.find(p.key);
      return it == point.end() ? Cell() : Cell(it->second);
    }
    case Kind::kFinalSet:
      return c.finished ? SetBpc(c.row, p.key) : Cell();
    case Kind::kDelta: {
      const ResultRow* b = c.finished ? BaselineOf(deltas, c.row, p.multiple) : nullptr;
      return b == nullptr ? Cell() : Double(c.row.final_val_bpc() - b->final_val_bpc());
    }
    case Kind::kDeltaSet: {
      const ResultRow* b = c.finished ? BaselineOf(deltas, c.row, p.multiple) : nullptr;
      const Cell mine = c.finished ? SetBpc(c.row, p.key) : Cell();
      const Cell theirs = b == nullptr ? Cell() : SetBpc(*b, p.key);
      if (!std::holds_alternative<double>(mine) || !std::holds_alternative<double>(theirs))
        return {};
      return Double(std::get<double>(mine) - std::get<double>(theirs));
    }
  }
  return {};
}

}  // namespace detail

struct ExportBuilder::Plans {
  std::vector<detail::Plan> columns;
  detail::Deltas deltas;
};

ExportBuilder::ExportBuilder(const std::vector<ResultRow>& rows,
                             const std::map<std::string, Run>& runs)
    : rows_(rows), runs_(runs) {
  std::set<std::string> axes, sets;
  for (const ResultRow& row : rows) {
    for (const auto& [name, bpc] : row.final_eval_bpc())
      if (name != core::kPrimaryEvalSet) sets.insert(name);
    const auto run = runs.find(row.run_id());
    if (run == runs.end()) continue;
    for (const auto& [axis, value] : run->second.spec().grid_point()) axes.insert(axis);
  }
  auto plans = std::make_unique<Plans>();
  plans->deltas = detail::ComputeDeltas(rows, runs);
  plans->columns = detail::PlanColumns(axes, sets, plans->deltas.multiples, columns_);
  plans_ = std::move(plans);
}

ExportBuilder::~ExportBuilder() = default;

void ExportBuilder::Row(size_t i, std::vector<Cell>& cells) const {
  const ResultRow& row = rows_[i];
  const auto found = runs_.find(row.run_id());
  const detail::RowContext context{row, found == runs_.end() ? nullptr : &found->second,
                                   detail::Finished(row)};
  cells.clear();
  cells.reserve(plans_->columns.size());
  for (const detail::Plan& p : plans_->columns)
    cells.push_back(detail::FillCell(p, context, plans_->deltas));
}

ExportTable BuildExportTable(const std::vector<ResultRow>& rows,
                             const std::map<std::string, Run>& runs) {
  const ExportBuilder builder(rows, runs);
  ExportTable table;
  table.columns = builder.columns();
  table.rows.resize(builder.size());
  for (size_t i = 0; i < builder.size(); ++i) builder.Row(i, table.rows[i]);
  return table;
}

}  // namespace parity::exports
