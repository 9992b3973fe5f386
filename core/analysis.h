// Analysis of finished sweeps (the scheduler's AnalyzeSweep calls AnalyzeFinishedRuns). Every
// figure comes with its uncertainty or the reason there is none, and says which quantity it is:
//   * the dense compute law and the fixed-N EL of each MoE run (analysis_law.h);
//   * the compute-optimal dense frontier and the frontier EL — the papers' EL — of each MoE grid
//     point, with extrapolation flags and both-sided intervals (analysis_frontier.h);
//   * per group: best grid point, best-point probabilities, the region, a lack-of-fit test and a
//     point optimum only when it is supported (analysis_region.h);
//   * ΔBPC of every grid point against every dense baseline of its group (analysis_baselines.cc)
//     and the joint EL law refitted (analysis_sweep.cc).
// A run may serve several groups (FinishedRun::memberships); it is one run in every law and
// bootstrap. Bootstraps use fixed seeds so the same runs always give the same answer.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/analysis_frontier.h"
#include "core/analysis_law.h"
#include "core/analysis_region.h"
#include "core/efficiency_leverage.h"
#include "parity/v1/sweep.pb.h"

namespace parity::core {

// A group a run serves. The planner may let one run serve several groups (dense 2C at C1 is
// the same run as dense 1C at C2): list each. Groups are keyed by GroupKey(); every bootstrap
// draws a run once per replicate by its run id, whatever groups list it (analysis_stats.h).
struct GroupMembership {
  std::string compute_budget;   // budget label, e.g. "C1"
  std::string data_variant;     // data variant label, e.g. "strict68B"
  double compute_multiple = 1;  // the run's multiple of that budget (ratio), e.g. 2 for Dense-2C
  std::map<std::string, std::string> keys;  // further grouping axes (ablation axis → value)
  // The run's name in that group ("dense-1C-C2-unique-s0" for the run planned as dense 2C of C1);
  // empty → the spec's name.
  std::string name;
  // Its role there (the dense 1C run is also the frontier's 1× size); unspecified → the spec's.
  parity::v1::RunRole role = parity::v1::RUN_ROLE_UNSPECIFIED;
};

// "C1/unique" plus "/axis=value" for each extra key in key order: one string per group.
std::string GroupKey(const GroupMembership& membership);

// The groups a planned run serves: its own and every RunSpec.also_serves entry (a run the
// planner planned once for several groups). An MoE point's ablation axes in its grid point
// (layout, balance, shared_expert_hidden, granularity, a pinned top_k) become keys, so a region is
// never drawn across two ablation settings; dense runs get none, and a dense baseline serves
// every MoE group of its budget and data variant.
std::vector<GroupMembership> GroupMembershipsOf(const parity::v1::RunSpec& spec);

// One finished run of a sweep as AnalyzeSweep sees it.
struct FinishedRun {
  std::string run_id;
  const parity::v1::RunSpec* spec = nullptr;  // not owned; outlives the call
  double val_bpc = 0;                         // final validation BPC
  // The groups it serves; empty → GroupMembershipsOf(*spec).
  std::vector<GroupMembership> memberships;
};

struct RunLeverageResult {
  std::string run_id;
  std::string name;
  double activation_rate = 0;
  // FIXED-N EL (the dense shape's own law); unset when there is no law or it cannot place L.
  std::optional<double> efficiency_leverage;
  std::optional<Interval> efficiency_leverage_interval;
  std::string missing_reason;  // why efficiency_leverage is unset
  double predicted_efficiency_leverage = 0;
  std::optional<double> joint_law_efficiency_leverage;  // the sweep's own joint-law fit
};

struct OptimalActivationGroup {
  std::string compute_budget;
  std::string data_variant;
  std::string group;  // GroupKey (budget, variant and any extra axes)
  absl::StatusOr<OptimalActivationFit> fit;
};

// EL(A, G, C) refitted: a, d, γ, β free; A_start and A_max kept at the published values.
struct ElLawFit {
  ElLawParams fitted;
  ElLawParams published;
  int points = 0;
  int budgets = 0;
  int granularities = 0;
  double rms_log_residual = 0;  // RMS of ln(EL measured / EL fitted) (dimensionless)
};

enum class DeltaVerdict {
  kExceedsSpread,  // |ΔBPC| > seed-to-seed spread of the difference
  kWithinSpread,   // |ΔBPC| ≤ that spread: not distinguishable from seed noise
  kNoSpread,       // a single seed on both sides: no spread to compare against
  kNoBaseline,     // no finished 1C dense baseline in the group
  kIsBaseline,     // the 1C dense baseline itself: the reference of the others
};

// ΔBPC of a grid point against one dense baseline of its group.
struct BaselineDelta {
  std::string baseline;         // the baseline grid point's name, e.g. "dense-2C-C1-unique"
  double compute_multiple = 0;  // its multiple of the group's budget (1, 2, 1.91 …)
  std::string data_variant;     // its data variant (the baseline's own data policy)
  double baseline_bpc = 0;      // its mean over seeds (bits per byte)
  int baseline_seeds = 0;
  double delta_bpc = 0;     // point mean − baseline mean (bits per byte)
  double delta_spread = 0;  // √(spread² + baseline spread²) (bits per byte)
  DeltaVerdict verdict = DeltaVerdict::kNoSpread;  // kExceedsSpread, kWithinSpread, kNoSpread
  std::optional<double> welch_p;  // two-sided Welch p; set when both sides have ≥ 2 seeds
};

// One grid point (a model at one budget and data variant) over its seeds: a paper-table row.
struct GridPointSummary {
  std::string name;  // run name without its seed suffix
  parity::v1::RunRole role = parity::v1::RUN_ROLE_UNSPECIFIED;
  std::string compute_budget, data_variant;
  double compute_multiple = 0;
  uint64_t params = 0, active_params = 0, tokens = 0, unique_tokens = 0;
  double activation_rate = 0, epochs = 0;
  int seeds = 0;
  double bpc_mean = 0;
  double bpc_spread = 0;            // sample standard deviation over seeds; 0 with one seed
  std::optional<double> delta_bpc;  // bpc_mean − the 1C dense baseline's mean
  double delta_spread = 0;          // √(spread² + baseline spread²)
  DeltaVerdict verdict = DeltaVerdict::kNoBaseline;
  std::optional<double> efficiency_leverage;          // mean over seeds of the measured fixed-N EL
  std::string group;                                  // GroupKey of the group this row belongs to
  std::vector<BaselineDelta> baselines;               // against EVERY dense point of the group
  std::optional<LeverageEstimate> frontier_leverage;  // MoE points: the papers' EL
  std::optional<LeverageEstimate> fixed_n_leverage;   // MoE points: the dense shape's own law
};

struct SweepAnalysis {
  // The FIXED-N law: the dense shape nearest in N to the MoE runs (all dense runs when there is
  // no MoE run), fitted to its individual runs; its EL per run is `leverage`.
  absl::StatusOr<DenseLawFit> dense_fit = absl::FailedPreconditionError("no dense runs finished");
  double dense_fit_params = 0;  // N of that shape (parameters)
  // The compute-optimal frontier over every fresh-data dense run (the papers' EL).
  absl::StatusOr<DenseFrontier> frontier = absl::FailedPreconditionError("no dense runs finished");
  std::vector<RunLeverageResult> leverage;                 // one per finished MoE run
  std::vector<OptimalActivationGroup> optimal_activation;  // one per group of MoE runs
  absl::StatusOr<ElLawFit> el_law = absl::FailedPreconditionError("no measured EL");
  std::vector<GridPointSummary> grid_points;  // grid order of first appearance
};

// Fits EL(A, G, C) to measured (A, G, C, EL) of MoE runs. FailedPrecondition with the reason when
// the runs span fewer than two budgets or three granularities, or number fewer than five.
struct ElObservation {
  double activation_ratio = 0, granularity = 0, compute = 0, efficiency_leverage = 0;
};
absl::StatusOr<ElLawFit> FitEfficiencyLeverageLaw(std::span<const ElObservation> runs);

// ΔBPC of every grid point against every dense point of its group (analysis_baselines.cc); the
// 1C dense point also fills delta_bpc/delta_spread/verdict.
void CompareWithBaselines(std::vector<GridPointSummary>& points,
                          const std::map<std::string, std::vector<double>>& bpc_of_point);

// The whole analysis of a sweep's finished runs. The dense law is fitted to the dense runs that
// see each token once (epochs ≤ 1); groups and grid points come out in first-seen order.
SweepAnalysis AnalyzeFinishedRuns(std::span<const FinishedRun> runs);

}  // namespace parity::core
