// The analysis' shared vocabulary (observations, intervals, bootstrap options) and the dense
// compute law L(C) = a·C^-b + c: Huber-robust, c kept in [0, min observed loss), refused below
// three distinct compute budgets, with 90% residual-bootstrap intervals (analysis.cc). The law is
// fitted to whatever (C, loss) points the caller passes: one dense shape's runs (the "fixed-N"
// law) or the compute-optimal frontier over shapes (analysis_frontier.h).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace parity::core {

// Coverage of every interval the analysis reports (two-sided, percentile bootstrap).
inline constexpr double kIntervalLevel = 0.9;
// Significance level of every test the analysis runs (one-sided Welch, lack-of-fit F): a
// difference or misfit is called real when p < kTestLevel, matching the 90% intervals.
inline constexpr double kTestLevel = 0.10;

// One finished run: x is C (FLOPs) or r_a (fraction); y is the final validation BPC.
struct Observation {
  double x = 0;
  double y = 0;
};

// [low, high], in the unit of the value it bounds.
struct Interval {
  double low = 0;
  double high = 0;
};

struct BootstrapOptions {
  int resamples = 2000;
  uint64_t seed = 0x5eed2026;  // fixed: the same runs give the same interval
};

struct DenseLawOptions {
  double huber_delta = 0.01;  // bits per byte: where the loss turns from quadratic to linear
  BootstrapOptions bootstrap{.resamples = 1000};
};

struct DenseLawFit {
  double a = 0;  // bits per byte · FLOPs^b
  double b = 0;  // dimensionless
  double c = 0;  // irreducible loss (bits per byte), in [0, min observed loss)
  int points = 0;
  int budgets = 0;          // distinct compute budgets
  double rms_residual = 0;  // bits per byte
  // 90% intervals; unset with exactly three runs (no residual left to resample), and then
  // `interval_note` says so.
  std::optional<Interval> a_interval, b_interval, c_interval;
  std::string interval_note;
  int resamples = 0;               // bootstrap refits that succeeded
  int repeated_data_excluded = 0;  // dense runs left out for repeating data (epochs > 1)
  std::vector<std::array<double, 3>> replicates;  // (a, b, c) of each refit, for propagation
  double min_compute = 0, max_compute = 0;        // measured range of C (FLOPs)
};

// Robust fit of L(C) = a·C^-b + c. FailedPrecondition (with the reason) below three distinct
// compute budgets — three parameters are not identified by two — or when losses do not fall
// with compute; InvalidArgument for C ≤ 0 or a loss that is not positive and finite.
absl::StatusOr<DenseLawFit> FitDenseComputeLaw(std::span<const Observation> runs,
                                               const DenseLawOptions& options = {});

// L(C) of a fit.
double DenseLoss(const DenseLawFit& fit, double compute);

// C at which the dense law reaches `loss`; OutOfRange when loss ≤ c (never reached).
absl::StatusOr<double> DenseComputeForLoss(const DenseLawFit& fit, double loss);

// EL = C_dense(L_moe)/C_moe.
absl::StatusOr<double> MeasuredEfficiencyLeverage(const DenseLawFit& fit, double moe_loss,
                                                  double moe_compute);

// The 90% interval of EL over the law's bootstrap replicates; unset when the fit has none or
// fewer than 90% of them can place the loss (it is at or below their floor c).
std::optional<Interval> EfficiencyLeverageInterval(const DenseLawFit& fit, double moe_loss,
                                                   double moe_compute);

// How far outside the measured dense range a dense-equivalent compute lies: C/max C above the
// range, min C/C below it (both > 1), 1 inside (FLOPs over FLOPs).
double ExtrapolationFactor(const DenseLawFit& fit, double dense_compute);

}  // namespace parity::core
