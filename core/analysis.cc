// The dense compute law and measured EL. L(C) = a·C^-b + c is linear in (a, c) once b is fixed,
// so b is found by a log-spaced scan plus golden-section refinement and (a, c) by iteratively
// reweighted least squares with Huber weights, c projected onto [0, min observed loss) (for a
// fixed b the problem is a convex quadratic, so a violated bound is active at the optimum). C is
// scaled by its geometric mean so the powers stay well conditioned. Intervals come from a
// residual bootstrap: the fitted curve plus residuals drawn with replacement (inflated by
// √(n/(n−3)) for the three fitted parameters), refitted each time.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/analysis_law.h"
#include "core/analysis_stats.h"
#include "core/status_macros.h"

namespace parity::core {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

struct LinearFit {
  double scale = 0;      // a' of y = c + a'·u
  double intercept = 0;  // c
  double loss = kInf;
};

double Huber(double r, double delta) {
  const double a = std::fabs(r);
  return a <= delta ? 0.5 * r * r : delta * (a - 0.5 * delta);
}

// Huber-weighted fit of y = c + a'·x^-b over normalised x for one b, with 0 ≤ c ≤ c_max.
LinearFit FitForExponent(std::span<const Observation> runs, double x0, double b, double delta,
                         double c_max) {
  const size_t n = runs.size();
  std::vector<double> u(n), w(n, 1.0);
  for (size_t i = 0; i < n; ++i) u[i] = std::pow(runs[i].x / x0, -b);
  LinearFit fit;
  for (int iteration = 0; iteration < 30; ++iteration) {
    double sw = 0, su = 0, sy = 0, suu = 0, suy = 0;
    for (size_t i = 0; i < n; ++i) {
      sw += w[i];
      su += w[i] * u[i];
      sy += w[i] * runs[i].y;
      suu += w[i] * u[i] * u[i];
      suy += w[i] * u[i] * runs[i].y;
    }
    const double det = sw * suu - su * su;
    if (std::fabs(det) < 1e-300 || suu <= 0) return LinearFit{};
    double scale = (sw * suy - su * sy) / det;
    double intercept = (sy - scale * su) / sw;
    if (intercept < 0 || intercept > c_max) {
      intercept = std::clamp(intercept, 0.0, c_max);
      scale = (suy - intercept * su) / suu;
    }
    double change = 0;
    for (size_t i = 0; i < n; ++i) {
      const double r = std::fabs(runs[i].y - intercept - scale * u[i]);
      const double weight = r <= delta ? 1.0 : delta / r;
      change = std::max(change, std::fabs(weight - w[i]));
      w[i] = weight;
    }
    fit.scale = scale;
    fit.intercept = intercept;
    if (change < 1e-12) break;
  }
  fit.loss = 0;
  for (size_t i = 0; i < n; ++i) {
    fit.loss += Huber(runs[i].y - fit.intercept - fit.scale * u[i], delta);
  }
  if (!(fit.scale > 0)) fit.loss = kInf;  // loss must fall with C
  return fit;
}

// The point fit without intervals; runs already validated.
absl::StatusOr<DenseLawFit> FitPoint(std::span<const Observation> runs, double delta) {
  double log_sum = 0, min_y = kInf;
  for (const Observation& o : runs) {
    log_sum += std::log(o.x);
    min_y = std::min(min_y, o.y);
  }
  const double x0 = std::exp(log_sum / static_cast<double>(runs.size()));
  // Strictly below the lowest loss: c = min loss would put that run at infinite compute.
  const double c_max = min_y * (1 - 1e-6);
  auto loss_at = [&](double b) { return FitForExponent(runs, x0, b, delta, c_max).loss; };
  constexpr int kScan = 120;
  // b in [0.001, 3]; const, not constexpr: std::log10 is constexpr only as a GCC extension.
  const double kLogLo = -3, kLogHi = std::log10(3.0);
  int best = -1;
  double best_loss = kInf;
  for (int i = 0; i < kScan; ++i) {
    const double loss = loss_at(std::pow(10.0, kLogLo + (kLogHi - kLogLo) * i / (kScan - 1)));
    if (loss < best_loss) {
      best_loss = loss;
      best = i;
    }
  }
  if (best < 0) {
    return absl::FailedPreconditionError("dense losses do not fall with compute; no law fits");
  }
  // Golden-section refinement of log10 b between the best scan point's neighbours.
  const double step = (kLogHi - kLogLo) / (kScan - 1);
  double lo = kLogLo + step * (best - 1), hi = kLogLo + step * (best + 1);
  const double phi = (std::sqrt(5.0) - 1) / 2;
  for (int i = 0; i < 50; ++i) {
    const double m1 = hi - phi * (hi - lo), m2 = lo + phi * (hi - lo);
    if (loss_at(std::pow(10.0, m1)) < loss_at(std::pow(10.0, m2))) {
      hi = m2;
    } else {
      lo = m1;
    }
  }
  double b = std::pow(10.0, (lo + hi) / 2);
  LinearFit fit = FitForExponent(runs, x0, b, delta, c_max);
  if (!(fit.loss <= best_loss)) {
    b = std::pow(10.0, kLogLo + step * best);
    fit = FitForExponent(runs, x0, b, delta, c_max);
  }
  DenseLawFit out;
  out.b = b;
  out.a = fit.scale * std::pow(x0, b);
  out.c = fit.intercept;
  out.points = static_cast<int>(runs.size());
  double sq = 0;
  for (const Observation& o : runs) sq += std::pow(o.y - DenseLoss(out, o.x), 2);
  out.rms_residual = std::sqrt(sq / static_cast<double>(runs.size()));
  return out;
}

void Bootstrap(std::span<const Observation> runs, const DenseLawOptions& options,
               DenseLawFit& fit) {
  const size_t n = runs.size();
  if (n <= 3) {
    fit.interval_note = "three runs for three parameters leave no residual to resample";
    return;
  }
  std::vector<double> residual(n);
  double mean = 0;
  for (size_t i = 0; i < n; ++i) {
    residual[i] = runs[i].y - DenseLoss(fit, runs[i].x);
    mean += residual[i] / static_cast<double>(n);
  }
  const double inflate = std::sqrt(static_cast<double>(n) / static_cast<double>(n - 3));
  for (double& r : residual) r = (r - mean) * inflate;
  stats::Rng rng(options.bootstrap.seed);
  std::vector<Observation> resample(runs.begin(), runs.end());
  std::vector<double> as, bs, cs;
  for (int k = 0; k < options.bootstrap.resamples; ++k) {
    bool positive = true;
    for (size_t i = 0; i < n; ++i) {
      resample[i].y = DenseLoss(fit, runs[i].x) + residual[rng.Below(n)];
      positive = positive && resample[i].y > 0;
    }
    if (!positive) continue;
    absl::StatusOr<DenseLawFit> refit = FitPoint(resample, options.huber_delta);
    if (!refit.ok()) continue;
    fit.replicates.push_back({refit->a, refit->b, refit->c});
    as.push_back(refit->a);
    bs.push_back(refit->b);
    cs.push_back(refit->c);
  }
  fit.resamples = static_cast<int>(fit.replicates.size());
  fit.a_interval = stats::PercentileInterval(as);
  fit.b_interval = stats::PercentileInterval(bs);
  fit.c_interval = stats::PercentileInterval(cs);
  if (fit.resamples == 0) fit.interval_note = "no bootstrap refit succeeded";
}

}  // namespace

absl::StatusOr<DenseLawFit> FitDenseComputeLaw(std::span<const Observation> runs,
                                               const DenseLawOptions& options) {
  std::vector<double> computes;
  for (const Observation& o : runs) {
    if (!(o.x > 0) || !(o.y > 0) || !std::isfinite(o.x) || !std::isfinite(o.y)) {
      return absl::InvalidArgumentError(
          absl::StrCat("every dense run needs C > 0 and a positive finite loss; got C = ", o.x,
                       ", loss = ", o.y));
    }
    computes.push_back(o.x);
  }
  // Runs of one budget may differ in C by token rounding (D = round(C·m/M)); a budget that is
  // a "distinct" budget only by rounding must not let three parameters be fitted to two.
  std::sort(computes.begin(), computes.end());
  std::vector<double> distinct;
  for (double c : computes) {
    if (distinct.empty() || c > distinct.back() * 1.01) distinct.push_back(c);
  }
  if (distinct.size() < 3) {
    return absl::FailedPreconditionError(
        absl::StrCat("L(C) = a·C^-b + c has three parameters and needs dense runs at ≥ 3 distinct "
                     "compute budgets; the finished dense runs span ",
                     distinct.size(), distinct.size() == 1 ? " budget" : " budgets",
                     " (add dense baselines at more compute multiples, e.g. 0.5C and 4C)"));
  }
  absl::StatusOr<DenseLawFit> fit = FitPoint(runs, options.huber_delta);
  if (!fit.ok()) return fit.status();
  fit->budgets = static_cast<int>(distinct.size());
  fit->min_compute = computes.front();
  fit->max_compute = computes.back();
  if (options.bootstrap.resamples > 0) Bootstrap(runs, options, *fit);
  return fit;
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

std::optional<Interval> EfficiencyLeverageInterval(const DenseLawFit& fit, double moe_loss,
                                                   double moe_compute) {
  if (fit.replicates.empty() || !(moe_compute > 0)) return std::nullopt;
  std::vector<double> values;
  for (const auto& [a, b, c] : fit.replicates) {
    DenseLawFit replicate;
    replicate.a = a;
    replicate.b = b;
    replicate.c = c;
    absl::StatusOr<double> el = MeasuredEfficiencyLeverage(replicate, moe_loss, moe_compute);
    if (el.ok() && std::isfinite(*el)) values.push_back(*el);
  }
  // A replicate whose floor lies above the loss has EL = ∞; too many of those and the upper end
  // is unbounded, which a finite interval would hide.
  if (static_cast<double>(values.size()) < kIntervalLevel * fit.replicates.size()) {
    return std::nullopt;
  }
  return stats::PercentileInterval(values);
}

double ExtrapolationFactor(const DenseLawFit& fit, double dense_compute) {
  if (dense_compute > fit.max_compute) return dense_compute / fit.max_compute;
  if (dense_compute < fit.min_compute) return fit.min_compute / dense_compute;
  return 1.0;
}

}  // namespace parity::core
