// ΔBPC of every grid point against every dense baseline of its group: Dense-1C as the 2B/3B
// tables use it, Dense-2C (or any multiple, e.g. the 7B table's 1.91× data) as the 7B headline
// does, whatever data policy the baseline was trained with. Each comparison keeps the original
// verdict — |ΔBPC| against √(spread² + baseline spread²) — and adds a two-sided Welch p-value
// when both sides have two or more seeds.
#include <cmath>

#include "core/analysis.h"
#include "core/analysis_stats.h"

namespace parity::core {

void CompareWithBaselines(std::vector<GridPointSummary>& points,
                          const std::map<std::string, std::vector<double>>& bpc_of_point) {
  auto key = [](const GridPointSummary& p) { return p.group + "|" + p.name; };
  for (GridPointSummary& s : points) {
    s.verdict = DeltaVerdict::kNoBaseline;
    for (const GridPointSummary& base : points) {
      // A baseline serves every point of its budget and data variant, whatever ablation keys
      // (layout, balance, pinned K …) split the MoE points into groups.
      if (base.compute_budget != s.compute_budget || base.data_variant != s.data_variant ||
          base.role != parity::v1::RUN_ROLE_DENSE_BASELINE) {
        continue;
      }
      const bool one_c = std::fabs(base.compute_multiple - 1) < 1e-9;
      if (&base == &s) {
        if (one_c) s.verdict = DeltaVerdict::kIsBaseline;
        continue;
      }
      BaselineDelta d;
      d.baseline = base.name;
      d.compute_multiple = base.compute_multiple;
      d.data_variant = base.data_variant;
      d.baseline_bpc = base.bpc_mean;
      d.baseline_seeds = base.seeds;
      d.delta_bpc = s.bpc_mean - base.bpc_mean;
      d.delta_spread = std::hypot(s.bpc_spread, base.bpc_spread);
      if (s.seeds < 2 && base.seeds < 2) {
        d.verdict = DeltaVerdict::kNoSpread;
      } else {
        d.verdict = std::fabs(d.delta_bpc) > d.delta_spread ? DeltaVerdict::kExceedsSpread
                                                            : DeltaVerdict::kWithinSpread;
      }
      d.welch_p = stats::TwoSidedWelchP(bpc_of_point.at(key(s)), bpc_of_point.at(key(base)));
      if (one_c && s.verdict != DeltaVerdict::kIsBaseline && !s.delta_bpc) {
        s.delta_bpc = d.delta_bpc;
        s.delta_spread = d.delta_spread;
        s.verdict = d.verdict;
      }
      s.baselines.push_back(std::move(d));
    }
  }
}

}  // namespace parity::core
