// The dropless grouped expert computation of an MoE layer, shared by the model and its tests:
// permute → per expert one GEMM pair over its n_e rows → combine, with the backward mirrored.
// The routing plan (slot_of, token_of, offsets) comes from the routing_plan op; `offsets` here is
// the host copy of its E+1 group boundaries, the one readback the GEMM shapes need.
//
// Shapes: T tokens, K experts per token, E experts, P = T·K slots, D width, De expert hidden.
// Weights: w13 [E, 2De, D], w2 [E, D, De]. Weight gradients accumulate (+=), and so does dx,
// because the router and the shared expert add into the same input gradient.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/backend/op_table.h"

namespace parity::kernels {

struct ExpertShape {
  int64_t tokens, top_k, experts, d_model, d_expert;
};

// Experts run in parallel, one serial GEMM chain per expert, on contiguous expert ranges chosen so
// each pool chunk gets about the same number of rows. Small per-expert GEMMs are much cheaper this
// way than split row-wise (no duplicated weight packing, one barrier instead of three per
// expert). Each expert's result is computed by exactly one thread, so the bits do not depend on
// the partition. FLOPs are counted here, on the calling thread, not inside the workers. A backend
// without a host pool (CUDA) gets the experts in order on its own stream.
template <typename Fn>
void ForEachExpertParallel(const OpContext& ctx, const std::vector<int64_t>& offsets, Fn&& fn) {
  const int64_t experts = static_cast<int64_t>(offsets.size()) - 1;
  const OpContext inner{.pool = ctx.pool, .flops = nullptr, .backend = ctx.backend};
  if (ctx.pool == nullptr) {
    for (int64_t e = 0; e < experts; ++e) {
      if (offsets[e + 1] > offsets[e]) fn(inner, e, offsets[e], offsets[e + 1] - offsets[e]);
    }
    return;
  }
  const int parts = static_cast<int>(std::min<int64_t>(ctx.pool->Size(), experts));
  std::vector<int64_t> split(parts + 1, experts);
  split[0] = 0;
  const int64_t rows = offsets[experts];
  for (int p = 1, e = 0; p < parts; ++p) {
    while (e < experts && offsets[e] * parts < rows * p) ++e;
    split[p] = e;
  }
  ctx.pool->ParallelFor(parts, 1, [&](int, int64_t p0, int64_t p1) {
    for (int64_t e = split[p0]; e < split[p1]; ++e) {
      if (offsets[e + 1] > offsets[e]) fn(inner, e, offsets[e], offsets[e + 1] - offsets[e]);
    }
  });
}

// Saved activations of the grouped computation, in the activation precision A (the scalar in
// fp32/fp64, bf16 in the bf16 mode).
template <typename A>
struct ExpertActivations {
  A* xs;  // [P,D]   inputs grouped by expert
  A* ab;  // [P,2De] SwiGLU inputs
  A* g;   // [P,De]  SwiGLU outputs
  A* ys;  // [P,D]   expert outputs (ungated)
};

// out[T,D] += Σ_k gate[t,k]·Expert_{expert[t,k]}(x[t]). `Ops` is OpTable<T> (A = T) or the bf16
// mode's Bf16OpTable (T = float, A = Bf16): the same calls type-check against both.
template <typename Ops, typename T, typename A>
void GroupedExpertsForward(const Ops& ops, const OpContext& ctx, const ExpertShape& s,
                           const std::vector<int64_t>& offsets, const int32_t* slot_of,
                           const int32_t* token_of, const T* gate, const A* x, const A* w13,
                           const A* w2, const ExpertActivations<A>& a, T* out) {
  const int64_t D = s.d_model, De = s.d_expert;
  ops.permute_forward(ctx, s.tokens * s.top_k, D, a.xs, x, token_of);
  for (int64_t e = 0; e < s.experts; ++e) {
    const int64_t o = offsets[e], n = offsets[e + 1] - offsets[e];
    if (n == 0) continue;
    ops.matmul_forward(ctx, {n, D, 2 * De}, a.ab + o * 2 * De, a.xs + o * D, w13 + e * 2 * De * D,
                       Accumulate::kNo, FlopKind::kModel);
    ops.swiglu_forward(ctx, n, De, a.g + o * De, a.ab + o * 2 * De);
    ops.matmul_forward(ctx, {n, De, D}, a.ys + o * D, a.g + o * De, w2 + e * D * De,
                       Accumulate::kNo, FlopKind::kModel);
  }
  ops.combine_forward(ctx, s.tokens, s.top_k, D, out, a.ys, gate, slot_of);
}

// Scratch for the backward, [P,D], [P,De], [P,2De], [P,D].
template <typename A>
struct ExpertScratch {
  A* dys;
  A* dg;
  A* dab;
  A* dxs;
};

// From dout [T,D]: dgate [T,K] (=), dx [T,D] (+=), dw13/dw2 (+=).
template <typename Ops, typename T, typename A>
void GroupedExpertsBackward(const Ops& ops, const OpContext& ctx, const ExpertShape& s,
                            const std::vector<int64_t>& offsets, const int32_t* slot_of,
                            const T* gate, const A* w13, const A* w2, const ExpertActivations<A>& a,
                            const T* dout, const ExpertScratch<A>& sc, T* dgate, A* dx, T* dw13,
                            T* dw2) {
  const int64_t D = s.d_model, De = s.d_expert;
  ops.combine_backward(ctx, s.tokens, s.top_k, D, sc.dys, dgate, dout, a.ys, gate, slot_of);
  ForEachExpertParallel(ctx, offsets, [&](const OpContext& c, int64_t e, int64_t o, int64_t n) {
    ops.matmul_backward(c, {n, De, D}, sc.dg + o * De, dw2 + e * D * De, sc.dys + o * D,
                        a.g + o * De, w2 + e * D * De, Accumulate::kNo, FlopKind::kModel);
    ops.swiglu_backward(c, n, De, sc.dab + o * 2 * De, sc.dg + o * De, a.ab + o * 2 * De);
    ops.matmul_backward(c, {n, D, 2 * De}, sc.dxs + o * D, dw13 + e * 2 * De * D,
                        sc.dab + o * 2 * De, a.xs + o * D, w13 + e * 2 * De * D, Accumulate::kNo,
                        FlopKind::kModel);
  });
  const int64_t P = s.tokens * s.top_k;
  ctx.Count(FlopKind::kModel, 12.0 * P * D * De);
  ctx.Count(FlopKind::kElementwise, 10.0 * P * De);
  ops.permute_backward(ctx, s.tokens, s.top_k, D, dx, sc.dxs, slot_of);
}

}  // namespace parity::kernels
