// Efficiency leverage in two senses, each labelled (docs/domain.md):
//   * FRONTIER EL — the papers' EL: against the compute-optimal dense frontier. At each distinct
//     budget (runs within 1% of C) the best dense loss over sizes (seeds averaged per size
//     first); L*(C) = a·C^-b + c fitted to those points (analysis_law.h); EL = C*_dense(L)/C_moe.
//   * FIXED-N EL — against one dense shape's own law (its D alone varies with C), the quantity
//     Parity reported before; far from compute-optimal training it overstates the papers' EL.
// Both are flagged `extrapolated` (with the factor) when C_dense leaves the measured dense range,
// and a grid point's interval bootstraps BOTH sides: the dense seeds (cells redrawn with the
// dense runs' pooled seed spread, the frontier re-chosen and refitted each replicate) and the MoE
// point's own seeds (mean loss). Draws are keyed by run id, so a run that serves several groups
// or budgets is one run (analysis_stats.h).
#pragma once

#include <array>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/analysis_law.h"

namespace parity::core {

// One finished dense run that saw each token once (epochs ≤ 1).
struct DenseRun {
  std::string run_key;  // run id; listing a run twice (shared by groups) counts it once
  double compute = 0;   // C (FLOPs)
  double params = 0;    // N (parameters)
  double bpc = 0;       // final validation BPC (bits per byte)
};

// The best dense size at one budget.
struct FrontierPoint {
  double compute = 0;  // mean C of the best size's runs (FLOPs)
  double params = 0;   // N of the best size (parameters)
  double bpc = 0;      // its mean BPC over seeds (bits per byte)
  int seeds = 0;
  int sizes = 0;  // dense sizes measured at this budget
};

struct DenseFrontier {
  std::vector<FrontierPoint> points;  // ascending C
  // L*(C) over `points`; FailedPrecondition below three budgets, with the reason.
  absl::StatusOr<DenseLawFit> law = absl::FailedPreconditionError("no dense runs");
  int runs = 0;  // distinct dense runs used (shared runs once)
  // Replicate k's refitted law (a, b, c), dense seeds redrawn; empty when no replicate could be
  // drawn, and then `replicate_note` says why (e.g. one seed per size and budget).
  std::vector<std::optional<std::array<double, 3>>> replicates;
  std::string replicate_note;
};

// Builds the frontier of distinct dense runs and its bootstrap replicates (options.bootstrap).
// For a fixed-N law pass one shape's runs only. InvalidArgument for C ≤ 0, N ≤ 0 or a BPC that
// is not positive and finite.
absl::StatusOr<DenseFrontier> BuildDenseFrontier(std::span<const DenseRun> runs,
                                                 const DenseLawOptions& options = {});

enum class LeverageKind {
  kFrontier,  // against the compute-optimal dense frontier (the papers' EL)
  kFixedN,    // against one dense shape's own law
};

// One MoE grid point: its seeds at one compute.
struct MoePointRuns {
  double compute = 0;             // C_moe (FLOPs)
  std::vector<double> bpc;        // one per seed (bits per byte)
  std::vector<std::string> keys;  // their run ids
};

struct LeverageEstimate {
  LeverageKind kind = LeverageKind::kFrontier;
  std::optional<double> value;       // EL = C_dense/C_moe (ratio); unset with `missing_reason`
  double dense_compute = 0;          // C_dense at the MoE's mean loss (FLOPs)
  bool extrapolated = false;         // C_dense outside the measured dense range (beyond 1%)
  double extrapolation_factor = 1;   // C_dense/max C above, min C/C_dense below (≥ 1)
  std::optional<Interval> interval;  // 90%, both sides bootstrapped
  std::string interval_note;         // why none, or which side had no seed noise
  std::string missing_reason;
  int resamples = 0;  // replicates that placed the loss
};

// EL of an MoE grid point (mean loss over its seeds) against `frontier`'s law; the interval
// pairs each dense replicate k with the MoE seeds redrawn in the same replicate k.
LeverageEstimate GridPointLeverage(LeverageKind kind, const DenseFrontier& frontier,
                                   const MoePointRuns& point, const BootstrapOptions& options = {});

}  // namespace parity::core
