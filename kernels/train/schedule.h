// Learning-rate schedules: linear warmup, then cosine decay to a floor, or warmup-stable-decay
// (constant, then a linear decay over the last decay_fraction of steps), or constant. The warmup
// length and every other value come resolved in OptimizerConfig: a spec's, or core's default when
// it names none (core/run_spec_defaults.h); nothing here picks one.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/model/config.h"

namespace parity::kernels {

// Learning rate for 0-based optimizer step `step` of `total_steps`.
inline double LearningRate(const OptimizerConfig& o, int64_t step, int64_t total_steps) {
  if (step < o.warmup_steps) return o.lr * static_cast<double>(step + 1) / o.warmup_steps;
  switch (o.schedule) {
    case Schedule::kConstant:
      return o.lr;
    case Schedule::kCosine: {
      const double span = std::max<int64_t>(1, total_steps - o.warmup_steps);
      const double progress = std::min(1.0, (step - o.warmup_steps) / span);
      return o.min_lr + (o.lr - o.min_lr) * 0.5 * (1.0 + std::cos(M_PI * progress));
    }
    case Schedule::kWarmupStableDecay: {
      const int64_t decay_steps =
          static_cast<int64_t>(std::llround(o.decay_fraction * static_cast<double>(total_steps)));
      const int64_t decay_start = total_steps - decay_steps;
      if (decay_steps <= 0 || step < decay_start) return o.lr;
      const double progress = static_cast<double>(step - decay_start + 1) / decay_steps;
      return o.lr + (o.min_lr - o.lr) * std::min(1.0, progress);
    }
  }
  return o.lr;
}

}  // namespace parity::kernels
