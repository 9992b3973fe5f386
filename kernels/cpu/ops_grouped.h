// CPU reference kernels for the grouped matmul (GroupedMatmulShape, backend/op_table.h): G groups
// of rows, one weight each — the MoE experts' GEMMs. Each group runs exactly the GEMM calls the
// matmul op of ops_dense.h makes for it, so a grouped call has the bits of the per-group matmul
// calls it replaces.
//
// Shapes: G groups, n_g rows of group g (host_offsets[g+1] − host_offsets[g]), K = in, N = out.
// x/dx [rows, K], y/dy [rows, N], w/dw [G, N, K]. dW accumulates (+=); y and dx are overwritten.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/backend/op_table.h"
#include "kernels/cpu/ops_dense.h"

namespace parity::kernels::cpu {

// Groups run in parallel, one serial chain per group, on contiguous group ranges chosen so each
// pool chunk gets about the same number of rows. Small per-group GEMMs are much cheaper this way
// than split row-wise (no duplicated weight packing, one barrier instead of one per group). Each
// group's result is computed by exactly one thread, so the bits do not depend on the partition.
// `fn` gets a context without a FLOP counter: count on the calling thread, after the call.
// Empty groups are skipped.
template <typename Fn>
void ForEachGroupParallel(const OpContext& ctx, const int64_t* offsets, int64_t groups, Fn&& fn) {
  const OpContext inner{.pool = ctx.pool, .flops = nullptr, .backend = ctx.backend};
  const int parts = static_cast<int>(std::min<int64_t>(ctx.pool->Size(), groups));
  std::vector<int64_t> split(parts + 1, groups);
  split[0] = 0;
  const int64_t first = offsets[0], rows = offsets[groups] - first;
  for (int p = 1, g = 0; p < parts; ++p) {
    while (g < groups && (offsets[g] - first) * parts < rows * p) ++g;
    split[p] = g;
  }
  ctx.pool->ParallelFor(parts, 1, [&](int, int64_t p0, int64_t p1) {
    for (int64_t g = split[p0]; g < split[p1]; ++g) {
      if (offsets[g + 1] > offsets[g]) fn(inner, g, offsets[g], offsets[g + 1] - offsets[g]);
    }
  });
}

// y_g[n_g,N] = x_g·W_g^T, group after group, each GEMM split across the pool by rows (as
// matmul_forward splits it).
template <typename T>
void GroupedMatmulForward(const OpContext& ctx, const GroupedMatmulShape& s, T* y, const T* x,
                          const T* w, FlopKind kind) {
  const int64_t* off = s.host_offsets;
  for (int64_t g = 0; g < s.groups; ++g) {
    const int64_t o = off[g], n = off[g + 1] - off[g];
    if (n == 0) continue;
    MatmulForward<T>(ctx, {n, s.in, s.out}, y + o * s.out, x + o * s.in, w + g * s.out * s.in,
                     Accumulate::kNo, kind);
  }
}

// dx_g[n_g,K] = dy_g·W_g;  dW_g[N,K] += dy_g^T·x_g — groups in parallel (ForEachGroupParallel),
// then each group's two products counted as matmul_backward counts them.
template <typename T>
void GroupedMatmulBackward(const OpContext& ctx, const GroupedMatmulShape& s, T* dx, T* dw,
                           const T* dy, const T* x, const T* w, FlopKind kind) {
  const int64_t K = s.in, N = s.out;
  ForEachGroupParallel(ctx, s.host_offsets, s.groups,
                       [&](const OpContext& c, int64_t g, int64_t o, int64_t n) {
                         MatmulBackward<T>(c, {n, K, N}, dx + o * K, dw + g * N * K, dy + o * N,
                                           x + o * K, w + g * N * K, Accumulate::kNo, kind);
                       });
  for (int64_t g = 0; g < s.groups; ++g) {
    const int64_t n = s.host_offsets[g + 1] - s.host_offsets[g];
    if (n == 0) continue;
    ctx.Count(kind, 2.0 * n * N * K);  // dx
    ctx.Count(kind, 2.0 * n * N * K);  // dW
  }
}

}  // namespace parity::kernels::cpu
