// Small statistics shared by the analysis files: a seeded generator whose draws are the same on
// every platform (std:: distributions are not), percentile intervals, mean and spread.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <vector>

#include "core/analysis.h"

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

}  // namespace parity::core::stats
