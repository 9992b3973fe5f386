// Normal noise for the analysis tests, from the analysis' own portable generator (Box–Muller), so
// a simulated sweep is the same on every platform.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/analysis_stats.h"

namespace parity::core::testing {

class Noise {
 public:
  explicit Noise(uint64_t seed) : rng_(seed) {}
  double Uniform() { return (static_cast<double>(rng_.Next() >> 11) + 0.5) / 9007199254740992.0; }
  double Normal(double sigma) {
    return sigma * std::sqrt(-2 * std::log(Uniform())) * std::cos(2 * M_PI * Uniform());
  }

 private:
  stats::Rng rng_;
};

}  // namespace parity::core::testing
