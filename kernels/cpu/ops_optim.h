// CPU kernels for the update ops: gradient sum of squares (for global-norm clipping) and AdamW.
// Shapes: n = number of parameters in the flat buffer being updated.
#pragma once

#include <cmath>
#include <vector>

#include "kernels/backend/op_table.h"

namespace parity::kernels::cpu {

// Σ g² in double: per-chunk partials, then summed in chunk order (deterministic per thread count).
template <typename T>
double SumSquares(const OpContext& ctx, int64_t n, const T* g) {
  std::vector<double> partial(ctx.pool->NumChunks(n, 4096), 0.0);
  ctx.pool->ParallelFor(n, 4096, [&](int c, int64_t b, int64_t e) {
    double s = 0.0;
    for (int64_t i = b; i < e; ++i) s += static_cast<double>(g[i]) * g[i];
    partial[c] = s;
  });
  double total = 0.0;
  for (double s : partial) total += s;
  return total;
}

// AdamW (Loshchilov & Hutter): decay is decoupled, p ← p − lr·wd·p, then the Adam step.
template <typename T>
void AdamWUpdate(const OpContext& ctx, int64_t n, T* p, T* m, T* v, const T* g, double grad_scale,
                 const AdamWArgs& a, WeightDecay decay) {
  const double bc1 = 1.0 - std::pow(a.beta1, static_cast<double>(a.step));
  const double bc2 = 1.0 - std::pow(a.beta2, static_cast<double>(a.step));
  const T lr = static_cast<T>(a.lr), b1 = static_cast<T>(a.beta1), b2 = static_cast<T>(a.beta2);
  const T eps = static_cast<T>(a.eps), gs = static_cast<T>(grad_scale);
  const T shrink =
      decay == WeightDecay::kApply ? static_cast<T>(1.0 - a.lr * a.weight_decay) : T(1);
  const T step_m = static_cast<T>(1.0 / bc1), step_v = static_cast<T>(1.0 / std::sqrt(bc2));
  ctx.pool->ParallelFor(n, 4096, [&](int, int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const T gi = g[i] * gs;
      m[i] = b1 * m[i] + (T(1) - b1) * gi;
      v[i] = b2 * v[i] + (T(1) - b2) * gi * gi;
      p[i] = p[i] * shrink - lr * (m[i] * step_m) / (std::sqrt(v[i]) * step_v + eps);
    }
  });
}

}  // namespace parity::kernels::cpu
