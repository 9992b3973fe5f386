// SweepsService::AnalyzeSweep: reads a sweep's SUCCEEDED runs (their full specs, for the accounting
// the joint EL law needs) and hands them to core::AnalyzeFinishedRuns (core/analysis.h): the
// fixed-N dense law and the compute-optimal dense frontier with intervals, the fixed-N EL of
// every MoE run, the frontier and fixed-N EL of every MoE grid point, each group's best grid
// point, region, lack-of-fit test and point optimum (or why none), the joint EL law refitted,
// and ΔBPC of every grid point against every dense baseline. A part the runs cannot support
// comes back with its reason rather than failing the call; only a sweep with no finished run is
// FAILED_PRECONDITION. The analysis is computed when the sweep's count of SUCCEEDED runs moved
// since the last call for that sweep and set (analysis_cache.h: at 10,000 runs it takes seconds,
// and every open dashboard asks for it on a timer); nothing is stored in the database.
//
// This file is the only place core's analysis types become proto messages: the CLI report, the
// dashboard (its JSON is this message) and the Python client all read what is set here.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "core/analysis.h"
#include "core/analysis_eval_sets.h"
#include "core/eval_sets.h"
#include "core/status_macros.h"
#include "google/rpc/error_details.pb.h"
#include "server/scheduling/request_validation.h"
#include "server/scheduling/sweeps_service.h"

namespace parity::server {
namespace {

absl::Status NoFinishedRuns(const std::string& sweep_id) {
  const std::string description = "no run of the sweep has finished yet; nothing to analyse";
  absl::Status status =
      absl::FailedPreconditionError(absl::StrCat("sweep ", sweep_id, ": ", description));
  google::rpc::PreconditionFailure failure;
  auto* violation = failure.add_violations();
  violation->set_type("FINISHED_RUNS");
  violation->set_subject(absl::StrCat("sweeps/", sweep_id));
  violation->set_description(description);
  status.SetPayload("type.googleapis.com/google.rpc.PreconditionFailure",
                    absl::Cord(failure.SerializeAsString()));
  return status;
}

void SetInterval(const std::optional<core::Interval>& from, v1::ConfidenceInterval* to) {
  to->set_low(from->low);
  to->set_high(from->high);
  to->set_level(core::kIntervalLevel);
}

void SetCoefficients(const core::ElLawParams& from, v1::EfficiencyLeverageLawCoefficients* to) {
  to->set_a(from.a);
  to->set_d(from.d);
  to->set_gamma(from.gamma);
  to->set_beta(from.beta);
  to->set_a_start(from.a_start);
  to->set_a_max(from.a_max);
}

v1::OptimumStatus StatusOf(core::OptimumStatus status) {
  switch (status) {
    case core::OptimumStatus::kBracketed:
      return v1::OPTIMUM_STATUS_BRACKETED;
    case core::OptimumStatus::kNotBracketed:
      return v1::OPTIMUM_STATUS_NOT_BRACKETED;
    case core::OptimumStatus::kTooFewRates:
      return v1::OPTIMUM_STATUS_TOO_FEW_RATES;
    case core::OptimumStatus::kPoorFit:
      return v1::OPTIMUM_STATUS_POOR_FIT;
    case core::OptimumStatus::kFitUnchecked:
      return v1::OPTIMUM_STATUS_FIT_UNCHECKED;
  }
  return v1::OPTIMUM_STATUS_UNSPECIFIED;
}

v1::DeltaVerdict VerdictOf(core::DeltaVerdict verdict) {
  switch (verdict) {
    case core::DeltaVerdict::kExceedsSpread:
      return v1::DELTA_VERDICT_EXCEEDS_SPREAD;
    case core::DeltaVerdict::kWithinSpread:
      return v1::DELTA_VERDICT_WITHIN_SPREAD;
    case core::DeltaVerdict::kNoSpread:
      return v1::DELTA_VERDICT_NO_SPREAD;
    case core::DeltaVerdict::kNoBaseline:
      return v1::DELTA_VERDICT_NO_BASELINE;
    case core::DeltaVerdict::kIsBaseline:
      return v1::DELTA_VERDICT_IS_BASELINE;
  }
  return v1::DELTA_VERDICT_UNSPECIFIED;
}

void SetDenseFit(const core::DenseLawFit& fit, v1::DenseComputeFit* out) {
  out->set_a(fit.a);
  out->set_b(fit.b);
  out->set_c(fit.c);
  out->set_points(static_cast<uint32_t>(fit.points));
  out->set_rms_residual(fit.rms_residual);
  if (fit.a_interval) SetInterval(fit.a_interval, out->mutable_a_interval());
  if (fit.b_interval) SetInterval(fit.b_interval, out->mutable_b_interval());
  if (fit.c_interval) SetInterval(fit.c_interval, out->mutable_c_interval());
  out->set_budgets(static_cast<uint32_t>(fit.budgets));
  out->set_resamples(static_cast<uint32_t>(fit.resamples));
  out->set_interval_note(fit.interval_note);
  out->set_repeated_data_excluded(static_cast<uint32_t>(fit.repeated_data_excluded));
}

v1::RegionStatus RegionOf(core::RegionMembership region) {
  switch (region) {
    case core::RegionMembership::kBest:
      return v1::REGION_STATUS_BEST;
    case core::RegionMembership::kInside:
      return v1::REGION_STATUS_INSIDE;
    case core::RegionMembership::kOutside:
      return v1::REGION_STATUS_OUTSIDE;
    case core::RegionMembership::kUntested:
      return v1::REGION_STATUS_UNTESTED;
  }
  return v1::REGION_STATUS_UNSPECIFIED;
}

void SetLackOfFit(const core::LackOfFit& from, v1::LackOfFit* out) {
  if (!from.tested) {
    out->set_verdict(v1::LACK_OF_FIT_VERDICT_UNTESTED);
  } else {
    out->set_verdict(from.p_value < core::kTestLevel ? v1::LACK_OF_FIT_VERDICT_REJECTED
                                                     : v1::LACK_OF_FIT_VERDICT_PASSES);
  }
  out->set_curve(from.curve);
  out->set_note(from.note);
  out->set_f(from.f);
  out->set_p_value(from.p_value);
  out->set_df_lack(static_cast<uint32_t>(std::max(0, from.df_lack)));
  out->set_df_pure(static_cast<uint32_t>(std::max(0, from.df_pure)));
  out->set_test_level(core::kTestLevel);
}

// The group's grid as the region test sees it, the region's span and the lack-of-fit test.
void SetRegion(const core::OptimalActivationFit& fit, v1::OptimalActivation* out) {
  for (const core::RatePoint& p : fit.grid) {
    v1::RatePoint* point = out->add_grid();
    point->set_activation_rate(p.activation_rate);
    point->set_seeds(static_cast<uint32_t>(p.seeds));
    point->set_bpc_mean(p.bpc_mean);
    point->set_bpc_spread(p.bpc_spread);
    point->set_probability_best(p.probability_best);
    point->set_region(RegionOf(p.region));
    if (p.p_value_above_best) point->set_p_value_above_best(*p.p_value_above_best);
  }
  if (fit.region) {
    out->mutable_region()->set_low(fit.region->low);
    out->mutable_region()->set_high(fit.region->high);
    out->mutable_region()->set_contiguous(fit.region_contiguous);
  }
  out->set_region_note(fit.region_note);
  out->set_probability_resamples(static_cast<uint32_t>(fit.probability_resamples));
  SetLackOfFit(fit.lack_of_fit, out->mutable_lack_of_fit());
}

void SetOptimum(const core::OptimalActivationGroup& group, v1::OptimalActivation* out) {
  out->set_compute_budget(group.compute_budget);
  out->set_data_variant(group.data_variant);
  out->set_group(group.group);
  if (!group.fit.ok()) {  // bad input (a non-finite BPC): no status, only the reason
    out->set_reason(std::string(group.fit.status().message()));
    return;
  }
  const core::OptimalActivationFit& fit = *group.fit;
  out->set_status(StatusOf(fit.status));
  out->set_reason(fit.reason);
  out->set_activation_rate(fit.activation_rate);
  out->set_bpc(fit.bpc);
  out->set_best_grid_activation_rate(fit.best_grid_activation_rate);
  out->set_best_grid_bpc(fit.best_grid_bpc);
  out->set_points(static_cast<uint32_t>(fit.points));
  out->set_rates(static_cast<uint32_t>(fit.rates));
  if (fit.activation_rate_interval) {
    SetInterval(fit.activation_rate_interval, out->mutable_activation_rate_interval());
  }
  if (fit.bpc_interval) SetInterval(fit.bpc_interval, out->mutable_bpc_interval());
  out->set_resamples(static_cast<uint32_t>(fit.resamples));
  out->set_resamples_at_edge(static_cast<uint32_t>(fit.resamples_at_edge));
  out->set_interval_note(fit.interval_note);
  SetRegion(fit, out);
}

void SetLeverage(const core::LeverageEstimate& from, v1::GridPointLeverage* out) {
  out->set_value(from.value.value_or(0.0));
  out->set_dense_compute(from.dense_compute);
  out->set_extrapolated(from.extrapolated);
  out->set_extrapolation_factor(from.extrapolation_factor);
  if (from.interval) SetInterval(from.interval, out->mutable_interval());
  out->set_interval_note(from.interval_note);
  out->set_missing_reason(from.missing_reason);
  out->set_resamples(static_cast<uint32_t>(from.resamples));
}

// A grid point's leverage against a law that was not built: the reason, no value.
void SetMissingLaw(const absl::Status& why, v1::GridPointLeverage* out) {
  out->set_missing_reason(absl::StrCat("no dense law: ", why.message()));
}

void SetBaselines(const core::GridPointSummary& p, v1::GridPointSummary* out) {
  for (const core::BaselineDelta& d : p.baselines) {
    v1::BaselineDelta* b = out->add_baselines();
    b->set_baseline(d.baseline);
    b->set_compute_multiple(d.compute_multiple);
    b->set_data_variant(d.data_variant);
    b->set_baseline_bpc(d.baseline_bpc);
    b->set_baseline_seeds(static_cast<uint32_t>(d.baseline_seeds));
    b->set_delta_bpc(d.delta_bpc);
    b->set_delta_spread(d.delta_spread);
    b->set_verdict(VerdictOf(d.verdict));
    if (d.welch_p) b->set_welch_p(*d.welch_p);
  }
}

void SetGridPoint(const core::GridPointSummary& p, v1::GridPointSummary* out) {
  out->set_name(p.name);
  out->set_role(p.role);
  out->set_compute_budget(p.compute_budget);
  out->set_data_variant(p.data_variant);
  out->set_compute_multiple(p.compute_multiple);
  out->set_params(p.params);
  out->set_active_params(p.active_params);
  out->set_activation_rate(p.activation_rate);
  out->set_tokens(p.tokens);
  out->set_unique_tokens(p.unique_tokens);
  out->set_epochs(p.epochs);
  out->set_seeds(static_cast<uint32_t>(p.seeds));
  out->set_bpc_mean(p.bpc_mean);
  out->set_bpc_spread(p.bpc_spread);
  out->set_delta_bpc(p.delta_bpc.value_or(0.0));
  out->set_delta_spread(p.delta_spread);
  out->set_verdict(VerdictOf(p.verdict));
  out->set_efficiency_leverage(p.efficiency_leverage.value_or(0.0));
  out->set_group(p.group);
  SetBaselines(p, out);
}

void SetFrontier(const core::DenseFrontier& frontier, v1::DenseFrontier* out) {
  for (const core::FrontierPoint& p : frontier.points) {
    v1::DenseFrontierPoint* point = out->add_points();
    point->set_compute(p.compute);
    point->set_params(static_cast<uint64_t>(std::llround(p.params)));
    point->set_bpc(p.bpc);
    point->set_seeds(static_cast<uint32_t>(p.seeds));
    point->set_sizes(static_cast<uint32_t>(p.sizes));
  }
  if (frontier.law.ok()) {
    SetDenseFit(*frontier.law, out->mutable_law());
  } else {
    out->set_law_refusal(std::string(frontier.law.status().message()));
  }
  out->set_runs(static_cast<uint32_t>(frontier.runs));
  out->set_replicates(static_cast<uint32_t>(frontier.replicates.size()));
  out->set_replicate_note(frontier.replicate_note);
}

void SetRunLeverage(const core::RunLeverageResult& run, v1::RunLeverage* out) {
  out->set_run_id(run.run_id);
  out->set_name(run.name);
  out->set_activation_rate(run.activation_rate);
  out->set_efficiency_leverage(run.efficiency_leverage.value_or(0.0));
  out->set_predicted_efficiency_leverage(run.predicted_efficiency_leverage);
  if (run.efficiency_leverage_interval) {
    SetInterval(run.efficiency_leverage_interval, out->mutable_efficiency_leverage_interval());
  }
  out->set_efficiency_leverage_missing(run.missing_reason);
  out->set_fitted_law_efficiency_leverage(run.joint_law_efficiency_leverage.value_or(0.0));
}

// A grid point with, for an MoE point, its two leverage estimates or why each is missing.
void SetGridPointWithLeverage(const core::SweepAnalysis& analysis,
                              const core::GridPointSummary& point, v1::GridPointSummary* out) {
  SetGridPoint(point, out);
  if (point.role != v1::RUN_ROLE_MOE) return;
  // Core sets both estimates for an MoE point whenever their dense law could be built.
  if (point.frontier_leverage) {
    SetLeverage(*point.frontier_leverage, out->mutable_frontier_leverage());
  } else {
    SetMissingLaw(analysis.frontier.status(), out->mutable_frontier_leverage());
  }
  if (point.fixed_n_leverage) {
    SetLeverage(*point.fixed_n_leverage, out->mutable_fixed_n_leverage());
  } else {
    SetMissingLaw(analysis.dense_fit.status(), out->mutable_fixed_n_leverage());
  }
}

}  // namespace

absl::StatusOr<v1::AnalyzeSweepResponse> SweepsService::AnalyzeSweep(
    const v1::AnalyzeSweepRequest& request) {
  Violations violations;
  violations.RequireUuid("sweep_id", request.sweep_id());
  if (!request.eval_set().empty()) {
    if (absl::Status bad = core::CheckEvalSetName(request.eval_set()); !bad.ok()) {
      violations.Add("eval_set", std::string(bad.message()));
    }
  }
  PARITY_RETURN_IF_ERROR(violations.ToStatus("invalid AnalyzeSweep request"));
  // NOT_FOUND with a ResourceInfo for an unknown sweep.
  PARITY_ASSIGN_OR_RETURN(v1::Sweep sweep, catalog_.GetSweep(request.sweep_id()));
  // Read before the runs are: a run succeeding meanwhile makes the kept answer at most one
  // version old, and the next call (a higher count) computes again.
  const int64_t version = sweep.counts().succeeded();
  PARITY_ASSIGN_OR_RETURN(
      AnalysisCache::Answer answer,
      analyses_->GetOrCompute(absl::StrCat(request.sweep_id(), "/", request.eval_set()), version,
                              [&] { return ComputeAnalysis(request); }));
  return *answer;
}

absl::StatusOr<v1::AnalyzeSweepResponse> SweepsService::ComputeAnalysis(
    const v1::AnalyzeSweepRequest& request) {
  std::vector<v1::Run> runs;
  PageRequest page{.page_size = 1000, .page_token = ""};
  do {
    PARITY_ASSIGN_OR_RETURN(Page<v1::Run> got,
                            catalog_.ListRuns(request.sweep_id(), {v1::RUN_STATE_SUCCEEDED}, page));
    for (v1::Run& run : got.items) runs.push_back(std::move(run));
    page.page_token = got.next_page_token;
  } while (!page.page_token.empty());
  if (runs.empty()) return NoFinishedRuns(request.sweep_id());

  // Each run's final BPC on the set asked for (the primary set's by default); memberships come
  // from the spec: also_serves, ablation axes.
  absl::StatusOr<core::RunsOnSet> on_set = core::FinishedRunsOnSet(runs, request.eval_set());
  if (!on_set.ok()) {
    Violations unknown;
    unknown.Add("eval_set", std::string(on_set.status().message()));
    return unknown.ToStatus("invalid AnalyzeSweep request");
  }
  const core::SweepAnalysis analysis = core::AnalyzeFinishedRuns(on_set->runs);

  v1::AnalyzeSweepResponse response;
  response.set_eval_set(request.eval_set());
  for (const std::string& set : core::EvalSetsOf(runs)) response.add_eval_sets(set);
  if (analysis.dense_fit.ok()) {
    SetDenseFit(*analysis.dense_fit, response.mutable_dense_fit());
  } else {
    response.set_dense_fit_refusal(std::string(analysis.dense_fit.status().message()));
  }
  for (const core::RunLeverageResult& run : analysis.leverage) {
    SetRunLeverage(run, response.add_leverage());
  }
  for (const core::OptimalActivationGroup& group : analysis.optimal_activation) {
    SetOptimum(group, response.add_optimal_activation());
  }
  if (analysis.el_law.ok()) {
    v1::EfficiencyLeverageLawFit* law = response.mutable_efficiency_leverage_law();
    SetCoefficients(analysis.el_law->fitted, law->mutable_fitted());
    SetCoefficients(analysis.el_law->published, law->mutable_published());
    law->set_points(static_cast<uint32_t>(analysis.el_law->points));
    law->set_budgets(static_cast<uint32_t>(analysis.el_law->budgets));
    law->set_granularities(static_cast<uint32_t>(analysis.el_law->granularities));
    law->set_rms_log_residual(analysis.el_law->rms_log_residual);
  } else {
    response.set_efficiency_leverage_law_refusal(std::string(analysis.el_law.status().message()));
  }
  for (const core::GridPointSummary& point : analysis.grid_points) {
    SetGridPointWithLeverage(analysis, point, response.add_grid_points());
  }
  if (analysis.frontier.ok()) {
    SetFrontier(*analysis.frontier, response.mutable_dense_frontier());
  } else {
    response.set_dense_frontier_refusal(std::string(analysis.frontier.status().message()));
  }
  response.set_dense_fit_params(static_cast<uint64_t>(std::llround(analysis.dense_fit_params)));
  return response;
}

}  // namespace parity::server
