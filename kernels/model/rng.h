// A small counter-based generator (SplitMix64) with a portable normal sampler. std::
// distributions differ between standard libraries; ours must not, because a run's initial weights
// and data order are a function of its seed alone, and the whole state is two integers that a
// checkpoint stores.
#pragma once

#include <cmath>
#include <cstdint>

namespace parity::kernels {

struct Rng {
  uint64_t seed = 0;
  uint64_t counter = 0;

  static uint64_t Mix(uint64_t z) {
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  uint64_t Next() { return Mix(seed ^ Mix(counter++)); }
  // Uniform in [0, 1) with 53 random bits.
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  // Uniform integer in [0, n).
  uint64_t Below(uint64_t n) { return Next() % n; }
  // Standard normal by Box–Muller (one value per call; simple beats fast here).
  double Normal() {
    const double u1 = 1.0 - Uniform(), u2 = Uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
};

}  // namespace parity::kernels
