// Analysis helpers for finished sweeps (the scheduler's AnalyzeSweep calls these):
//   * the dense compute law L(C) = a·C^-b + c, fitted with a Huber loss so one diverged run does
//     not bend the curve;
//   * measured efficiency leverage EL = C_dense(L_moe)/C_moe;
//   * the optimal r_a of a group: the minimum of a quadratic fit of BPC against ln r_a, with a
//     delta-method standard error.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "parity/v1/sweep.pb.h"

namespace parity::core {

// One finished run: x is C (FLOPs) or r_a (fraction); y is the final validation BPC.
struct Observation {
  double x = 0;
  double y = 0;
};

struct DenseLawFit {
  double a = 0;  // bits per byte · FLOPs^b
  double b = 0;  // dimensionless
  double c = 0;  // irreducible loss (bits per byte)
  int points = 0;
  double rms_residual = 0;  // bits per byte
};

// Robust fit of L(C) = a·C^-b + c over dense runs at ≥ 3 distinct C. With exactly two distinct C
// (the usual 1C and 2C baselines of one budget) c is fixed at 0 and a pure power law is fitted,
// since three parameters cannot be identified from two budgets.
// `huber_delta` (bits per byte) is where the loss turns from quadratic to linear.
absl::StatusOr<DenseLawFit> FitDenseComputeLaw(std::span<const Observation> runs,
                                               double huber_delta = 0.01);

// L(C) of a fit.
double DenseLoss(const DenseLawFit& fit, double compute);

// C at which the dense law reaches `loss`; OutOfRange when loss ≤ c (never reached).
absl::StatusOr<double> DenseComputeForLoss(const DenseLawFit& fit, double loss);

// EL = C_dense(L_moe)/C_moe.
absl::StatusOr<double> MeasuredEfficiencyLeverage(const DenseLawFit& fit, double moe_loss,
                                                  double moe_compute);

struct OptimalActivationFit {
  double activation_rate = 0;         // r_a at the fitted minimum
  double activation_rate_stderr = 0;  // one standard error (0 with exactly 3 points)
  double bpc = 0;                     // fitted BPC at the minimum
  double best_grid_activation_rate = 0;
  int points = 0;
};

// Quadratic fit of BPC against ln r_a over ≥ 3 runs with distinct r_a. FailedPrecondition when
// the fit is not convex (no interior minimum).
absl::StatusOr<OptimalActivationFit> FitOptimalActivation(std::span<const Observation> runs);

// One finished run of a sweep as AnalyzeSweep sees it.
struct FinishedRun {
  std::string run_id;
  const parity::v1::RunSpec* spec = nullptr;  // not owned; outlives the call
  double val_bpc = 0;                         // final validation BPC
};

struct RunLeverageResult {
  std::string run_id;
  std::string name;
  double activation_rate = 0;
  std::optional<double> efficiency_leverage;  // unset when the dense law cannot place L_moe
  double predicted_efficiency_leverage = 0;
};

struct OptimalActivationGroup {
  std::string compute_budget;
  std::string data_variant;
  absl::StatusOr<OptimalActivationFit> fit;  // FailedPrecondition when not convex
};

struct SweepAnalysis {
  absl::StatusOr<DenseLawFit> dense_fit = absl::FailedPreconditionError("no dense runs");
  std::vector<RunLeverageResult> leverage;                 // one per finished MoE run
  std::vector<OptimalActivationGroup> optimal_activation;  // groups with ≥ 3 MoE runs
};

// The whole analysis of a sweep's finished runs: the dense law over the dense baselines, the
// measured EL of every MoE run against it, and the optimal r_a of each (budget, data variant)
// group of MoE runs. Groups come out in first-seen order.
SweepAnalysis AnalyzeFinishedRuns(std::span<const FinishedRun> runs);

}  // namespace parity::core
