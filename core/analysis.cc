// Small, dependency-free fits. The dense law is linear in (a, c) once b is fixed, so b is found by
// a scan plus golden-section refinement and (a, c) by iteratively reweighted least squares with
// Huber weights; C is scaled by its geometric mean so the powers stay well conditioned.
#include "core/analysis.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <iterator>
#include <limits>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/status_macros.h"

namespace parity::core {
namespace {

struct LinearFit {
  double scale = 0;      // a' of y = c + a'·u
  double intercept = 0;  // c
  double loss = std::numeric_limits<double>::infinity();
};

double Huber(double r, double delta) {
  const double a = std::fabs(r);
  return a <= delta ? 0.5 * r * r : delta * (a - 0.5 * delta);
}

// Huber-weighted fit of y = c + a'·x^-b over normalised x for one b.
LinearFit FitForExponent(std::span<const Observation> runs, double x0, double b, double delta) {
  std::vector<double> u(runs.size()), w(runs.size(), 1.0);
  for (size_t i = 0; i < runs.size(); ++i) u[i] = std::pow(runs[i].x / x0, -b);
  LinearFit fit;
  for (int iteration = 0; iteration < 30; ++iteration) {
    double sw = 0, su = 0, sy = 0, suu = 0, suy = 0;
    for (size_t i = 0; i < runs.size(); ++i) {
      sw += w[i];
      su += w[i] * u[i];
      sy += w[i] * runs[i].y;
      suu += w[i] * u[i] * u[i];
      suy += w[i] * u[i] * runs[i].y;
    }
    const double det = sw * suu - su * su;
    if (std::fabs(det) < 1e-300) return LinearFit{};
    fit.scale = (sw * suy - su * sy) / det;
    fit.intercept = (sy - fit.scale * su) / sw;
    for (size_t i = 0; i < runs.size(); ++i) {
      const double r = std::fabs(runs[i].y - fit.intercept - fit.scale * u[i]);
      w[i] = r <= delta ? 1.0 : delta / r;
    }
  }
  fit.loss = 0;
  for (size_t i = 0; i < runs.size(); ++i) {
    fit.loss += Huber(runs[i].y - fit.intercept - fit.scale * u[i], delta);
  }
  if (fit.scale <= 0) fit.loss = std::numeric_limits<double>::infinity();  // loss must fall with C
  return fit;
}

// Least squares of ln L = ln a − b·ln C (c = 0), for two budgets.
absl::StatusOr<DenseLawFit> FitPowerLaw(std::span<const Observation> runs) {
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const Observation& o : runs) {
    if (!(o.y > 0)) return absl::InvalidArgumentError("a power-law fit needs positive losses");
    const double x = std::log(o.x), y = std::log(o.y);
    sx += x;
    sy += y;
    sxx += x * x;
    sxy += x * y;
  }
  const double n = double(runs.size());
  const double slope = (n * sxy - sx * sy) / (n * sxx - sx * sx);
  DenseLawFit out;
  out.b = -slope;
  out.a = std::exp((sy - slope * sx) / n);
  out.c = 0;
  out.points = static_cast<int>(runs.size());
  if (out.b <= 0) {
    return absl::FailedPreconditionError("dense losses do not fall with compute; no law fits");
  }
  double sq = 0;
  for (const Observation& o : runs) sq += std::pow(o.y - out.a * std::pow(o.x, -out.b), 2);
  out.rms_residual = std::sqrt(sq / n);
  return out;
}

}  // namespace

absl::StatusOr<DenseLawFit> FitDenseComputeLaw(std::span<const Observation> runs,
                                               double huber_delta) {
  std::vector<double> distinct;
  double log_sum = 0;
  for (const Observation& o : runs) {
    if (!(o.x > 0) || !std::isfinite(o.y)) {
      return absl::InvalidArgumentError("every dense run needs C > 0 and a finite loss");
    }
    log_sum += std::log(o.x);
    if (std::find(distinct.begin(), distinct.end(), o.x) == distinct.end()) distinct.push_back(o.x);
  }
  if (distinct.size() < 2) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the dense law needs runs at ≥ 2 distinct compute budgets, got ", distinct.size()));
  }
  if (distinct.size() == 2) return FitPowerLaw(runs);
  const double x0 = std::exp(log_sum / runs.size());
  double best_b = 0;
  LinearFit best;
  for (double b = 0.005; b <= 2.0; b += 0.005) {
    LinearFit fit = FitForExponent(runs, x0, b, huber_delta);
    if (fit.loss < best.loss) {
      best = fit;
      best_b = b;
    }
  }
  if (!std::isfinite(best.loss)) {
    return absl::FailedPreconditionError("dense losses do not fall with compute; no law fits");
  }
  // Golden-section refinement of b around the best scan point.
  double lo = std::max(1e-4, best_b - 0.005), hi = best_b + 0.005;
  const double phi = (std::sqrt(5.0) - 1) / 2;
  for (int i = 0; i < 60; ++i) {
    const double m1 = hi - phi * (hi - lo), m2 = lo + phi * (hi - lo);
    if (FitForExponent(runs, x0, m1, huber_delta).loss <
        FitForExponent(runs, x0, m2, huber_delta).loss) {
      hi = m2;
    } else {
      lo = m1;
    }
  }
  const double b = (lo + hi) / 2;
  LinearFit refined = FitForExponent(runs, x0, b, huber_delta);
  if (refined.loss > best.loss) {
    refined = best;
  }
  DenseLawFit out;
  out.b = refined.loss > best.loss ? best_b : b;
  out.a = refined.scale * std::pow(x0, out.b);
  out.c = refined.intercept;
  out.points = static_cast<int>(runs.size());
  double sq = 0;
  for (const Observation& o : runs) sq += std::pow(o.y - DenseLoss(out, o.x), 2);
  out.rms_residual = std::sqrt(sq / runs.size());
  return out;
}

double DenseLoss(const DenseLawFit& fit, double compute) {
  return fit.a * std::pow(compute, -fit.b) + fit.c;
}

absl::StatusOr<double> DenseComputeForLoss(const DenseLawFit& fit, double loss) {
  if (!(loss > fit.c) || fit.a <= 0 || fit.b <= 0) {
    return absl::OutOfRangeError(
        absl::StrCat("loss ", loss, " is at or below the dense law's floor c = ", fit.c));
  }
  return std::pow(fit.a / (loss - fit.c), 1.0 / fit.b);
}

absl::StatusOr<double> MeasuredEfficiencyLeverage(const DenseLawFit& fit, double moe_loss,
                                                  double moe_compute) {
  if (!(moe_compute > 0)) return absl::InvalidArgumentError("C_moe must be > 0");
  PARITY_ASSIGN_OR_RETURN(const double dense_compute, DenseComputeForLoss(fit, moe_loss));
  return dense_compute / moe_compute;
}

absl::StatusOr<OptimalActivationFit> FitOptimalActivation(std::span<const Observation> runs) {
  const size_t n = runs.size();
  std::vector<double> x(n);
  double mean = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!(runs[i].x > 0 && runs[i].x <= 1) || !std::isfinite(runs[i].y)) {
      return absl::InvalidArgumentError("every run needs r_a in (0, 1] and a finite BPC");
    }
    x[i] = std::log(runs[i].x);
    mean += x[i] / n;
  }
  std::vector<double> distinct;
  for (double v : x) {
    if (std::find(distinct.begin(), distinct.end(), v) == distinct.end()) distinct.push_back(v);
  }
  if (distinct.size() < 3) {
    return absl::FailedPreconditionError("the quadratic fit needs ≥ 3 distinct activation rates");
  }
  // Normal equations of y = p0 + p1·t + p2·t² with t = ln r_a − mean, solved by Gauss-Jordan
  // on [XᵀX | XᵀY | I] so the inverse (for the covariance) comes out too.
  std::array<std::array<double, 7>, 3> m{};
  for (size_t i = 0; i < n; ++i) {
    const double t = x[i] - mean;
    const double row[3] = {1, t, t * t};
    for (int r = 0; r < 3; ++r) {
      for (int c = 0; c < 3; ++c) m[r][c] += row[r] * row[c];
      m[r][3] += row[r] * runs[i].y;
    }
  }
  for (int r = 0; r < 3; ++r) m[r][4 + r] = 1;
  for (int col = 0; col < 3; ++col) {
    int pivot = col;
    for (int r = col + 1; r < 3; ++r) {
      if (std::fabs(m[r][col]) > std::fabs(m[pivot][col])) pivot = r;
    }
    std::swap(m[col], m[pivot]);
    if (std::fabs(m[col][col]) < 1e-300) return absl::FailedPreconditionError("singular fit");
    const double d = m[col][col];
    for (double& v : m[col]) v /= d;
    for (int r = 0; r < 3; ++r) {
      if (r == col) continue;
      const double f = m[r][col];
      for (int c = 0; c < 7; ++c) m[r][c] -= f * m[col][c];
    }
  }
  const double p0 = m[0][3], p1 = m[1][3], p2 = m[2][3];
  if (p2 <= 0) {
    return absl::FailedPreconditionError(
        "BPC is not convex in ln r_a over these runs; no interior optimum");
  }
  const double t_star = -p1 / (2 * p2);
  OptimalActivationFit out;
  out.points = static_cast<int>(n);
  out.activation_rate = std::exp(t_star + mean);
  out.bpc = p0 + p1 * t_star + p2 * t_star * t_star;
  double rss = 0;
  double best_y = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < n; ++i) {
    const double t = x[i] - mean;
    rss += std::pow(runs[i].y - (p0 + p1 * t + p2 * t * t), 2);
    if (runs[i].y < best_y) {
      best_y = runs[i].y;
      out.best_grid_activation_rate = runs[i].x;
    }
  }
  if (n > 3) {
    const double sigma2 = rss / double(n - 3);
    const double g1 = -1 / (2 * p2), g2 = p1 / (2 * p2 * p2);
    // Covariance of (p1, p2) = σ²·(XᵀX)^-1, the right block of the reduced matrix.
    const double var = sigma2 * (g1 * g1 * m[1][5] + 2 * g1 * g2 * m[1][6] + g2 * g2 * m[2][6]);
    out.activation_rate_stderr = out.activation_rate * std::sqrt(std::max(0.0, var));
  }
  return out;
}

SweepAnalysis AnalyzeFinishedRuns(std::span<const FinishedRun> runs) {
  SweepAnalysis analysis;
  std::vector<Observation> dense;
  for (const FinishedRun& run : runs) {
    if (run.spec != nullptr && run.spec->role() == parity::v1::RUN_ROLE_DENSE_BASELINE) {
      dense.push_back({run.spec->accounting().compute_flops(), run.val_bpc});
    }
  }
  if (!dense.empty()) analysis.dense_fit = FitDenseComputeLaw(dense);

  struct Group {
    std::string budget, variant;
    std::vector<Observation> points;
  };
  std::vector<Group> groups;
  for (const FinishedRun& run : runs) {
    if (run.spec == nullptr || run.spec->role() != parity::v1::RUN_ROLE_MOE) continue;
    const auto& a = run.spec->accounting();
    RunLeverageResult leverage{run.run_id, run.spec->name(), a.activation_rate(), std::nullopt,
                               run.spec->predicted_efficiency_leverage()};
    if (analysis.dense_fit.ok()) {
      absl::StatusOr<double> el =
          MeasuredEfficiencyLeverage(*analysis.dense_fit, run.val_bpc, a.compute_flops());
      if (el.ok()) leverage.efficiency_leverage = *el;
    }
    analysis.leverage.push_back(std::move(leverage));
    auto it = std::find_if(groups.begin(), groups.end(), [&](const Group& g) {
      return g.budget == run.spec->compute_budget() && g.variant == run.spec->data_variant();
    });
    if (it == groups.end()) {
      groups.push_back({run.spec->compute_budget(), run.spec->data_variant(), {}});
      it = std::prev(groups.end());
    }
    it->points.push_back({a.activation_rate(), run.val_bpc});
  }
  for (const Group& g : groups) {
    if (g.points.size() < 3) continue;
    analysis.optimal_activation.push_back({g.budget, g.variant, FitOptimalActivation(g.points)});
  }
  return analysis;
}

}  // namespace parity::core
