// Small statistics shared by the analysis files: a seeded generator whose draws are the same on
// every platform (std:: distributions are not), draws keyed by run so that a run shared by
// several groups is drawn once per bootstrap replicate, percentile intervals, mean and spread,
// and the t and F tails behind the Welch and lack-of-fit tests (analysis_stats.cc).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "core/analysis_law.h"

namespace parity::core::stats {

// SplitMix64: tiny, fast, and fully specified, so a bootstrap is reproducible anywhere.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n); the modulo bias is below 1e-15 for the n used here.
  size_t Below(size_t n) { return static_cast<size_t>(Next() % n); }

 private:
  uint64_t state_;
};

// Linear-interpolated quantile q ∈ [0, 1] of unsorted values (copied).
inline double Quantile(std::vector<double> values, double q) {
  std::sort(values.begin(), values.end());
  const double pos = q * static_cast<double>(values.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, values.size() - 1);
  return values[lo] + (pos - static_cast<double>(lo)) * (values[hi] - values[lo]);
}

// The central kIntervalLevel interval of bootstrap values; unset when there are none.
inline std::optional<Interval> PercentileInterval(const std::vector<double>& values) {
  if (values.empty()) return std::nullopt;
  const double tail = (1 - kIntervalLevel) / 2;
  return Interval{Quantile(values, tail), Quantile(values, 1 - tail)};
}

inline double Mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

// Sample standard deviation (n − 1); 0 for fewer than two values.
inline double Spread(const std::vector<double>& v) {
  if (v.size() < 2) return 0;
  const double m = Mean(v);
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return std::sqrt(s / static_cast<double>(v.size() - 1));
}

// A run's standard-normal draw in bootstrap replicate `replicate`: a pure function of the
// bootstrap seed, the replicate and the run's key (its run id). Every group a run belongs to
// therefore sees the same draw in the same replicate — a shared run is resampled once, not once
// per group — and the order in which groups or runs are visited cannot change an interval.
double KeyedNormal(uint64_t seed, int replicate, std::string_view run_key);

// Upper tail P(T > t) of Student's t with `df` (> 0, may be fractional) degrees of freedom.
double StudentTUpperTail(double t, double df);
// The t quantile with upper tail `tail` (e.g. 0.05 → the 95th percentile).
double StudentTQuantile(double tail, double df);
// Upper tail P(F > f) of the F distribution with (d1, d2) degrees of freedom.
double FUpperTail(double f, double d1, double d2);

// One-sided Welch test of H1: mean(high) > mean(low). Needs ≥ 2 values on each side.
struct WelchTest {
  double difference = 0;  // mean(high) − mean(low), in the unit of the values
  double t = 0;
  double df = 0;       // Welch–Satterthwaite degrees of freedom
  double p_value = 1;  // one-sided; 0 when both spreads are 0 and the difference is positive
};
std::optional<WelchTest> OneSidedWelch(const std::vector<double>& high,
                                       const std::vector<double>& low);

// Two-sided Welch p-value of mean(a) ≠ mean(b); unset below two values on either side.
std::optional<double> TwoSidedWelchP(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace parity::core::stats
