// Scheduler::AnalyzeSweep: reads a sweep's SUCCEEDED rows of the results view and hands them to
// core::AnalyzeFinishedRuns (core/analysis.h), which fits the dense law L(C) = a·C^-b + c, the
// measured efficiency leverage EL = C_dense(L_moe)/C_moe of every MoE run, and the optimal r_a of
// each (compute budget, data variant) group with ≥ 3 MoE runs. The analysis is computed on every
// call (a sweep has at most a few hundred runs); nothing is stored.
#include <string>
#include <vector>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "core/analysis.h"
#include "core/status_macros.h"
#include "google/rpc/error_details.pb.h"
#include "server/scheduling/request_validation.h"
#include "server/scheduling/scheduler.h"

namespace parity::server {
namespace {

// The precondition AnalyzeSweep needs: a dense law it can fit.
absl::Status DenseFitPrecondition(const std::string& sweep_id, const std::string& description) {
  absl::Status status =
      absl::FailedPreconditionError(absl::StrCat("sweep ", sweep_id, ": ", description));
  google::rpc::PreconditionFailure failure;
  auto* violation = failure.add_violations();
  violation->set_type("DENSE_BASELINES");
  violation->set_subject(absl::StrCat("sweeps/", sweep_id));
  violation->set_description(description);
  status.SetPayload("type.googleapis.com/google.rpc.PreconditionFailure",
                    absl::Cord(failure.SerializeAsString()));
  return status;
}

// The fields of a RunSpec that core::AnalyzeFinishedRuns reads, from a results row.
v1::RunSpec SpecOf(const v1::ResultRow& row) {
  v1::RunSpec spec;
  spec.set_name(row.name());
  spec.set_role(row.role());
  spec.mutable_accounting()->set_compute_flops(row.compute_flops());
  spec.mutable_accounting()->set_activation_rate(row.activation_rate());
  spec.set_compute_budget(row.compute_budget());
  spec.set_data_variant(row.data_variant());
  spec.set_predicted_efficiency_leverage(row.predicted_efficiency_leverage());
  return spec;
}

}  // namespace

absl::StatusOr<v1::AnalyzeSweepResponse> Scheduler::AnalyzeSweep(
    const v1::AnalyzeSweepRequest& request) {
  Violations violations;
  violations.RequireUuid("sweep_id", request.sweep_id());
  if (absl::Status status = violations.ToStatus("invalid AnalyzeSweep request"); !status.ok()) {
    return status;
  }
  if (absl::StatusOr<v1::Sweep> sweep = store_.GetSweep(request.sweep_id()); !sweep.ok()) {
    return sweep.status();  // NOT_FOUND with a ResourceInfo
  }
  std::vector<v1::ResultRow> rows;
  ResultsQuery query;
  query.sweep_id = request.sweep_id();
  query.states = {v1::RUN_STATE_SUCCEEDED};
  query.page.page_size = 10000;
  do {
    PARITY_ASSIGN_OR_RETURN(Page<v1::ResultRow> page, store_.QueryResults(query));
    for (v1::ResultRow& row : page.items) rows.push_back(std::move(row));
    query.page.page_token = page.next_page_token;
  } while (!query.page.page_token.empty());

  // Specs first, then the FinishedRuns that point into them (no reallocation after this).
  std::vector<v1::RunSpec> specs;
  specs.reserve(rows.size());
  int dense = 0;
  for (const v1::ResultRow& row : rows) {
    specs.push_back(SpecOf(row));
    dense += row.role() == v1::RUN_ROLE_DENSE_BASELINE;
  }
  if (dense < 2) {
    return DenseFitPrecondition(
        request.sweep_id(),
        absl::StrCat("the dense law needs ≥ 2 SUCCEEDED dense baseline runs at ≥ 2 compute "
                     "budgets; the sweep has ",
                     dense));
  }
  std::vector<core::FinishedRun> finished;
  finished.reserve(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    finished.push_back({rows[i].run_id(), &specs[i], rows[i].final_val_bpc()});
  }
  const core::SweepAnalysis analysis = core::AnalyzeFinishedRuns(finished);
  if (!analysis.dense_fit.ok()) {
    return DenseFitPrecondition(request.sweep_id(),
                                std::string(analysis.dense_fit.status().message()));
  }

  v1::AnalyzeSweepResponse response;
  const core::DenseLawFit& fit = *analysis.dense_fit;
  v1::DenseComputeFit* dense_fit = response.mutable_dense_fit();
  dense_fit->set_a(fit.a);
  dense_fit->set_b(fit.b);
  dense_fit->set_c(fit.c);
  dense_fit->set_points(static_cast<uint32_t>(fit.points));
  dense_fit->set_rms_residual(fit.rms_residual);
  for (const core::RunLeverageResult& run : analysis.leverage) {
    v1::RunLeverage* out = response.add_leverage();
    out->set_run_id(run.run_id);
    out->set_name(run.name);
    out->set_activation_rate(run.activation_rate);
    // 0 when the dense law cannot place the run's loss (at or below its floor c).
    out->set_efficiency_leverage(run.efficiency_leverage.value_or(0.0));
    out->set_predicted_efficiency_leverage(run.predicted_efficiency_leverage);
  }
  for (const core::OptimalActivationGroup& group : analysis.optimal_activation) {
    // A group whose BPC is not convex in ln r_a has no interior optimum to report.
    if (!group.fit.ok()) continue;
    v1::OptimalActivation* out = response.add_optimal_activation();
    out->set_compute_budget(group.compute_budget);
    out->set_data_variant(group.data_variant);
    out->set_activation_rate(group.fit->activation_rate);
    out->set_activation_rate_stderr(group.fit->activation_rate_stderr);
    out->set_bpc(group.fit->bpc);
    out->set_best_grid_activation_rate(group.fit->best_grid_activation_rate);
    out->set_points(static_cast<uint32_t>(group.fit->points));
  }
  return response;
}

}  // namespace parity::server
