// The dropless grouped expert computation of an MoE layer, shared by the model and its tests:
// permute → one grouped GEMM over all experts (w13) → one SwiGLU over all P rows → one grouped
// GEMM (w2) → combine, with the backward mirrored: five op calls each way, whatever E is. The
// routing plan (slot_of, token_of, offsets) comes from the routing_plan op: `plan_offsets` is its
// E+1 group boundaries on the device, `offsets` their host copy (the layer's one readback, which
// the GEMM shapes need).
//
// Shapes: T tokens, K experts per token, E experts, P = T·K slots, D width, De expert hidden.
// Weights: w13 [E, 2De, D], w2 [E, D, De]. Weight gradients accumulate (+=), and so does dx,
// because the router and the shared expert add into the same input gradient.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/backend/op_table.h"

namespace parity::kernels {

struct ExpertShape {
  int64_t tokens, top_k, experts, d_model, d_expert;
};

// Saved activations of the grouped computation, in the activation precision A (the scalar in
// fp32/fp64, bf16 in the bf16 mode).
template <typename A>
struct ExpertActivations {
  A* xs;  // [P,D]   inputs grouped by expert
  A* ab;  // [P,2De] SwiGLU inputs
  A* g;   // [P,De]  SwiGLU outputs
  A* ys;  // [P,D]   expert outputs (ungated)
};

// The grouped matmul of the E experts: weights [E, out, in], rows grouped by the plan.
inline GroupedMatmulShape ExpertGemm(const ExpertShape& s, int64_t in, int64_t out,
                                     const int64_t* plan_offsets,
                                     const std::vector<int64_t>& offsets) {
  return {.groups = s.experts,
          .in = in,
          .out = out,
          .offsets = plan_offsets,
          .host_offsets = offsets.data()};
}

// out[T,D] += Σ_k gate[t,k]·Expert_{expert[t,k]}(x[t]). `Ops` is OpTable<T> (A = T) or the bf16
// mode's Bf16OpTable (T = float, A = Bf16): the same calls type-check against both.
template <typename Ops, typename T, typename A>
void GroupedExpertsForward(const Ops& ops, const OpContext& ctx, const ExpertShape& s,
                           const int64_t* plan_offsets, const std::vector<int64_t>& offsets,
                           const int32_t* slot_of, const int32_t* token_of, const T* gate,
                           const A* x, const A* w13, const A* w2, const ExpertActivations<A>& a,
                           T* out) {
  const int64_t D = s.d_model, De = s.d_expert, P = s.tokens * s.top_k;
  ops.permute_forward(ctx, P, D, a.xs, x, token_of);
  ops.grouped_matmul_forward(ctx, ExpertGemm(s, D, 2 * De, plan_offsets, offsets), a.ab, a.xs, w13,
                             FlopKind::kModel);
  ops.swiglu_forward(ctx, P, De, a.g, a.ab);
  ops.grouped_matmul_forward(ctx, ExpertGemm(s, De, D, plan_offsets, offsets), a.ys, a.g, w2,
                             FlopKind::kModel);
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
                            const int64_t* plan_offsets, const std::vector<int64_t>& offsets,
                            const int32_t* slot_of, const T* gate, const A* w13, const A* w2,
                            const ExpertActivations<A>& a, const T* dout,
                            const ExpertScratch<A>& sc, T* dgate, A* dx, T* dw13, T* dw2) {
  const int64_t D = s.d_model, De = s.d_expert, P = s.tokens * s.top_k;
  ops.combine_backward(ctx, s.tokens, s.top_k, D, sc.dys, dgate, dout, a.ys, gate, slot_of);
  ops.grouped_matmul_backward(ctx, ExpertGemm(s, De, D, plan_offsets, offsets), sc.dg, dw2, sc.dys,
                              a.g, w2, FlopKind::kModel);
  ops.swiglu_backward(ctx, P, De, sc.dab, sc.dg, a.ab);
  ops.grouped_matmul_backward(ctx, ExpertGemm(s, D, 2 * De, plan_offsets, offsets), sc.dxs, dw13,
                              sc.dab, a.xs, w13, FlopKind::kModel);
  ops.permute_backward(ctx, s.tokens, s.top_k, D, dx, sc.dxs, slot_of);
}

}  // namespace parity::kernels
