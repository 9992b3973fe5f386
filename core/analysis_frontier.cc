// The dense frontier and EL against it (analysis_frontier.h). Cells are (budget, size): runs
// within 1% of each other in C (token rounding) and in N. The frontier takes, per budget, the
// cell with the lowest mean. Replicates redraw every run as its cell's mean plus the pooled
// within-cell seed spread (scaled by t(df)/z for the few seeds it rests on) times a keyed normal
// draw, re-choose the best size per budget and refit L*(C) without an inner bootstrap.
#include "core/analysis_frontier.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/analysis_stats.h"

namespace parity::core {
namespace {

// Separates the dense draws from the MoE draws of the same replicate.
constexpr uint64_t kDenseSalt = 0x6a09e667f3bcc909ULL;

struct Cell {
  size_t budget = 0;
  double params = 0;
  std::vector<double> compute, bpc;
  std::vector<std::string> keys;
};

// Cluster sorted values: a new cluster when a value exceeds the last by more than 1%.
std::vector<double> Clusters(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  std::vector<double> starts;
  for (double v : values) {
    if (starts.empty() || v > starts.back() * 1.01) starts.push_back(v);
  }
  return starts;
}

size_t ClusterOf(const std::vector<double>& starts, double v) {
  size_t i = 0;
  while (i + 1 < starts.size() && v >= starts[i + 1]) ++i;
  return i;
}

// Best cell per budget given cell means; the frontier's (C, loss) observations.
std::vector<Observation> FrontierOf(const std::vector<Cell>& cells, const std::vector<double>& mean,
                                    size_t budgets, std::vector<size_t>* chosen = nullptr) {
  std::vector<size_t> best(budgets, cells.size());
  for (size_t i = 0; i < cells.size(); ++i) {
    size_t& b = best[cells[i].budget];
    if (b == cells.size() || mean[i] < mean[b]) b = i;
  }
  std::vector<Observation> out;
  for (size_t b : best) out.push_back({stats::Mean(cells[b].compute), mean[b]});
  if (chosen) *chosen = best;
  return out;
}

}  // namespace

absl::StatusOr<DenseFrontier> BuildDenseFrontier(std::span<const DenseRun> runs,
                                                 const DenseLawOptions& options) {
  std::vector<DenseRun> distinct;
  std::set<std::string> seen;
  for (const DenseRun& r : runs) {
    if (!(r.compute > 0 && r.params > 0 && r.bpc > 0 && std::isfinite(r.bpc))) {
      return absl::InvalidArgumentError(
          absl::StrCat("every dense run needs C > 0, N > 0 and a positive finite BPC; run ",
                       r.run_key, " has C = ", r.compute, ", N = ", r.params, ", BPC = ", r.bpc));
    }
    if (seen.insert(r.run_key).second) distinct.push_back(r);
  }
  DenseFrontier frontier;
  frontier.runs = static_cast<int>(distinct.size());
  if (distinct.empty()) return frontier;
  std::vector<double> computes, sizes;
  for (const DenseRun& r : distinct) {
    computes.push_back(r.compute);
    sizes.push_back(r.params);
  }
  const std::vector<double> budget_starts = Clusters(computes), size_starts = Clusters(sizes);
  std::map<std::pair<size_t, size_t>, Cell> by_cell;
  for (const DenseRun& r : distinct) {
    const size_t b = ClusterOf(budget_starts, r.compute), s = ClusterOf(size_starts, r.params);
    Cell& cell = by_cell[{b, s}];
    cell.budget = b;
    cell.params = r.params;
    cell.compute.push_back(r.compute);
    cell.bpc.push_back(r.bpc);
    cell.keys.push_back(r.run_key);
  }
  std::vector<Cell> cells;
  std::vector<double> mean;
  double ss = 0;
  int df = 0;
  std::vector<int> sizes_at(budget_starts.size(), 0);
  for (auto& [key, cell] : by_cell) {
    mean.push_back(stats::Mean(cell.bpc));
    for (double y : cell.bpc) ss += (y - mean.back()) * (y - mean.back());
    df += static_cast<int>(cell.bpc.size()) - 1;
    ++sizes_at[cell.budget];
    cells.push_back(std::move(cell));
  }
  std::vector<size_t> chosen;
  const std::vector<Observation> observed = FrontierOf(cells, mean, budget_starts.size(), &chosen);
  for (size_t b = 0; b < chosen.size(); ++b) {
    const Cell& c = cells[chosen[b]];
    frontier.points.push_back(
        {observed[b].x, c.params, observed[b].y, static_cast<int>(c.bpc.size()), sizes_at[b]});
  }
  frontier.law = FitDenseComputeLaw(observed, options);
  if (!frontier.law.ok()) return frontier;
  if (df < 1 || ss <= 0) {
    frontier.replicate_note =
        "one seed per dense size and budget: the dense side has no seed spread to resample";
    return frontier;
  }
  const double scale = std::sqrt(ss / df) * stats::StudentTQuantile(0.05, df) / 1.6448536269514722;
  std::vector<double> drawn(cells.size());
  for (int k = 0; k < options.bootstrap.resamples; ++k) {
    for (size_t i = 0; i < cells.size(); ++i) {
      double sum = 0;
      for (const std::string& key : cells[i].keys) {
        sum += stats::KeyedNormal(options.bootstrap.seed ^ kDenseSalt, k, key);
      }
      drawn[i] = mean[i] + scale * sum / static_cast<double>(cells[i].keys.size());
    }
    absl::StatusOr<DenseLawFit> refit =
        FitDenseComputeLaw(FrontierOf(cells, drawn, budget_starts.size()),
                           {.huber_delta = options.huber_delta, .bootstrap = {.resamples = 0}});
    if (refit.ok()) {
      frontier.replicates.push_back(std::array<double, 3>{refit->a, refit->b, refit->c});
    } else {
      frontier.replicates.push_back(std::nullopt);
    }
  }
  return frontier;
}

LeverageEstimate GridPointLeverage(LeverageKind kind, const DenseFrontier& frontier,
                                   const MoePointRuns& point, const BootstrapOptions& options) {
  LeverageEstimate out;
  out.kind = kind;
  if (!frontier.law.ok()) {
    out.missing_reason = absl::StrCat("no dense law: ", frontier.law.status().message());
    return out;
  }
  if (point.bpc.empty() || !(point.compute > 0)) {
    out.missing_reason = "the MoE point has no finished run with C > 0";
    return out;
  }
  const DenseLawFit& law = *frontier.law;
  const double moe_mean = stats::Mean(point.bpc);
  absl::StatusOr<double> dense_compute = DenseComputeForLoss(law, moe_mean);
  if (!dense_compute.ok()) {
    out.missing_reason = std::string(dense_compute.status().message());
    return out;
  }
  out.dense_compute = *dense_compute;
  out.value = *dense_compute / point.compute;
  out.extrapolation_factor = ExtrapolationFactor(law, *dense_compute);
  out.extrapolated = out.extrapolation_factor > 1.01;

  const double n = static_cast<double>(point.bpc.size());
  const double inflate = n > 1 ? std::sqrt(n / (n - 1)) : 0.0;
  std::vector<std::string> notes;
  if (!frontier.replicate_note.empty()) notes.push_back(frontier.replicate_note);
  if (n < 2) notes.push_back("one MoE seed: the MoE side has no seed spread to resample");
  if (frontier.replicates.empty() && n < 2) {
    out.interval_note = absl::StrJoin(notes, "; ");
    return out;
  }
  const int replicates = frontier.replicates.empty() ? options.resamples
                                                     : static_cast<int>(frontier.replicates.size());
  std::vector<double> values;
  for (int k = 0; k < replicates; ++k) {
    DenseLawFit replicate = law;
    if (!frontier.replicates.empty()) {
      if (!frontier.replicates[k]) continue;
      replicate.a = (*frontier.replicates[k])[0];
      replicate.b = (*frontier.replicates[k])[1];
      replicate.c = (*frontier.replicates[k])[2];
    }
    double loss = moe_mean;
    for (size_t j = 0; j < point.bpc.size(); ++j) {
      loss += (point.bpc[j] - moe_mean) * inflate / n *
              stats::KeyedNormal(options.seed, k, point.keys[j]);
    }
    absl::StatusOr<double> c = DenseComputeForLoss(replicate, loss);
    if (c.ok() && std::isfinite(*c)) values.push_back(*c / point.compute);
  }
  out.resamples = static_cast<int>(values.size());
  // A replicate whose floor lies above the loss has EL = ∞; too many and the upper end is
  // unbounded, which a finite interval would hide.
  if (static_cast<double>(values.size()) < kIntervalLevel * replicates) {
    notes.push_back(absl::StrCat("only ", values.size(), " of ", replicates,
                                 " replicates place the loss above the law's floor"));
  } else {
    out.interval = stats::PercentileInterval(values);
  }
  out.interval_note = absl::StrJoin(notes, "; ");
  return out;
}

}  // namespace parity::core
