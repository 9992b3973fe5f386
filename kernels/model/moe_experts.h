// The dropless grouped expert computation of an MoE layer, shared by the model and its tests:
//   BuildRoutingPlan: a stable counting sort of the T·K routing slots by expert, so each expert's
//     tokens are contiguous (in token order) — the "permute" half of the plan.
//   GroupedExpertsForward/Backward: permute → per expert one GEMM pair over its n_e rows →
//     combine, with the backward mirrored.
// The plan is built on the host (CPU-only; see device.h), everything else goes through ops.
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

// offsets [E+1] (host), slot_of [T,K], token_of [P] from expert [T,K] and load [E].
inline void BuildRoutingPlan(const ExpertShape& s, const int32_t* expert, const int64_t* load,
                             std::vector<int64_t>& offsets, int32_t* slot_of, int32_t* token_of) {
  offsets.assign(s.experts + 1, 0);
  for (int64_t e = 0; e < s.experts; ++e) offsets[e + 1] = offsets[e] + load[e];
  std::vector<int64_t> cursor(offsets.begin(), offsets.end() - 1);
  for (int64_t i = 0; i < s.tokens * s.top_k; ++i) {
    const int64_t slot = cursor[expert[i]]++;
    slot_of[i] = static_cast<int32_t>(slot);
    token_of[slot] = static_cast<int32_t>(i / s.top_k);
  }
}

// Saved activations of the grouped computation.
template <typename T>
struct ExpertActivations {
  T* xs;  // [P,D]   inputs grouped by expert
  T* ab;  // [P,2De] SwiGLU inputs
  T* g;   // [P,De]  SwiGLU outputs
  T* ys;  // [P,D]   expert outputs (ungated)
};

// out[T,D] += Σ_k gate[t,k]·Expert_{expert[t,k]}(x[t])
template <typename T>
void GroupedExpertsForward(const OpTable<T>& ops, const OpContext& ctx, const ExpertShape& s,
                           const std::vector<int64_t>& offsets, const int32_t* slot_of,
                           const int32_t* token_of, const T* gate, const T* x, const T* w13,
                           const T* w2, const ExpertActivations<T>& a, T* out) {
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
template <typename T>
struct ExpertScratch {
  T* dys;
  T* dg;
  T* dab;
  T* dxs;
};

// From dout [T,D]: dgate [T,K] (=), dx [T,D] (+=), dw13/dw2 (+=).
template <typename T>
void GroupedExpertsBackward(const OpTable<T>& ops, const OpContext& ctx, const ExpertShape& s,
                            const std::vector<int64_t>& offsets, const int32_t* slot_of,
                            const T* gate, const T* w13, const T* w2, const ExpertActivations<T>& a,
                            const T* dout, const ExpertScratch<T>& sc, T* dgate, T* dx, T* dw13,
                            T* dw2) {
  const int64_t D = s.d_model, De = s.d_expert;
  ops.combine_backward(ctx, s.tokens, s.top_k, D, sc.dys, dgate, dout, a.ys, gate, slot_of);
  for (int64_t e = 0; e < s.experts; ++e) {
    const int64_t o = offsets[e], n = offsets[e + 1] - offsets[e];
    if (n == 0) continue;
    ops.matmul_backward(ctx, {n, De, D}, sc.dg + o * De, dw2 + e * D * De, sc.dys + o * D,
                        a.g + o * De, w2 + e * D * De, Accumulate::kNo, FlopKind::kModel);
    ops.swiglu_backward(ctx, n, De, sc.dab + o * 2 * De, sc.dg + o * De, a.ab + o * 2 * De);
    ops.matmul_backward(ctx, {n, D, 2 * De}, sc.dxs + o * D, dw13 + e * 2 * De * D,
                        sc.dab + o * 2 * De, a.xs + o * D, w13 + e * 2 * De * D, Accumulate::kNo,
                        FlopKind::kModel);
  }
  ops.permute_backward(ctx, s.tokens, s.top_k, D, dx, sc.dxs, slot_of);
}

}  // namespace parity::kernels
