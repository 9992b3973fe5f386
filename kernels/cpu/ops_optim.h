// CPU kernels for the update ops: gradient sum of squares (for global-norm clipping) and AdamW,
// per tensor and over a table of tensors. Shapes: n = number of parameters being updated.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/backend/op_table.h"

namespace parity::kernels::cpu {

// Σ g² in double: per-chunk partials, then summed in chunk order (deterministic per thread count).
template <typename T>
void SumSquares(const OpContext& ctx, int64_t n, const T* g, double* sum) {
  std::vector<double> partial(ctx.pool->NumChunks(n, 4096), 0.0);
  ctx.pool->ParallelFor(n, 4096, [&](int c, int64_t b, int64_t e) {
    double s = 0.0;
    for (int64_t i = b; i < e; ++i) s += static_cast<double>(g[i]) * g[i];
    partial[c] = s;
  });
  double total = 0.0;
  for (double s : partial) total += s;
  *sum = total;
}

// AdamW's per-step constants in T, computed once on the host from the step's arguments.
template <typename T>
struct AdamWConstants {
  T lr, b1, b2, eps, gs, step_m, step_v;
  T shrink;  // p's decay factor 1 − lr·wd, for tensors that decay (kApply)
};

template <typename T>
AdamWConstants<T> AdamWConstantsFor(const AdamWArgs& a, double grad_scale) {
  const double bc1 = 1.0 - std::pow(a.beta1, static_cast<double>(a.step));
  const double bc2 = 1.0 - std::pow(a.beta2, static_cast<double>(a.step));
  return {.lr = static_cast<T>(a.lr),
          .b1 = static_cast<T>(a.beta1),
          .b2 = static_cast<T>(a.beta2),
          .eps = static_cast<T>(a.eps),
          .gs = static_cast<T>(grad_scale),
          .step_m = static_cast<T>(1.0 / bc1),
          .step_v = static_cast<T>(1.0 / std::sqrt(bc2)),
          .shrink = static_cast<T>(1.0 - a.lr * a.weight_decay)};
}

// AdamW (Loshchilov & Hutter) on elements [b, e): decay is decoupled, p ← p·shrink, then the Adam
// step. The one definition of the per-element arithmetic, for both the per-tensor and the
// multi-tensor op, so that they agree bit for bit.
template <typename T>
inline void AdamWElements(const AdamWConstants<T>& c, T shrink, int64_t b, int64_t e, T* p, T* m,
                          T* v, const T* g) {
  for (int64_t i = b; i < e; ++i) {
    const T gi = g[i] * c.gs;
    m[i] = c.b1 * m[i] + (T(1) - c.b1) * gi;
    v[i] = c.b2 * v[i] + (T(1) - c.b2) * gi * gi;
    p[i] = p[i] * shrink - c.lr * (m[i] * c.step_m) / (std::sqrt(v[i]) * c.step_v + c.eps);
  }
}

template <typename T>
void AdamWUpdate(const OpContext& ctx, int64_t n, T* p, T* m, T* v, const T* g, double grad_scale,
                 const AdamWArgs& a, WeightDecay decay) {
  const AdamWConstants<T> c = AdamWConstantsFor<T>(a, grad_scale);
  const T shrink = decay == WeightDecay::kApply ? c.shrink : T(1);
  ctx.pool->ParallelFor(
      n, 4096, [&](int, int64_t b, int64_t e) { AdamWElements(c, shrink, b, e, p, m, v, g); });
}

// AdamWUpdate of every tensor in one call: the pool splits the tensors' elements, concatenated in
// table order, into contiguous chunks, so many small tensors (norm weights) share the threads.
template <typename T>
void AdamWMultiTensor(const OpContext& ctx, int64_t count, const TensorSpan* tensors, T* p, T* m,
                      T* v, const T* g, double grad_scale, const AdamWArgs& a) {
  const AdamWConstants<T> c = AdamWConstantsFor<T>(a, grad_scale);
  std::vector<int64_t> start(count + 1,
                             0);  // start[i]: tensor i's first index in the concatenation
  for (int64_t i = 0; i < count; ++i) start[i + 1] = start[i] + tensors[i].size;
  ctx.pool->ParallelFor(start[count], 4096, [&](int, int64_t b, int64_t e) {
    // The last tensor starting at or before b (empty tensors are skipped by the loop below).
    int64_t i = std::upper_bound(start.begin(), start.end() - 1, b) - start.begin() - 1;
    for (; i < count && start[i] < e; ++i) {
      const TensorSpan& t = tensors[i];
      const T shrink = t.decay == WeightDecay::kApply ? c.shrink : T(1);
      const int64_t lo = std::max(b, start[i]) - start[i],
                    hi = std::min(e, start[i + 1]) - start[i];
      AdamWElements(c, shrink, t.offset + lo, t.offset + hi, p, m, v, g);
    }
  });
}

}  // namespace parity::kernels::cpu
