// The bf16 mode's op table (training.precision: bf16). The same ops as PARITY_OPS in op_table.h,
// with each array in the precision the mode keeps it in:
//   bf16 (Bf16): the weight copy the GEMMs read, GEMM inputs and outputs inside a block (h1, qkv,
//         att, h2, ab, g, the experts' xs/ab/g/ys, hf) and their gradients;
//   fp32: master weights, their gradients and AdamW moments, the residual stream and its
//         gradient, norm statistics, attention log-sum-exp, router logits/probabilities/gates,
//         logits, losses.
// Every op computes in fp32 (GEMMs accumulate in fp32 on tensor cores) and rounds to nearest-even
// only where it stores a bf16 array. No loss scaling: bf16 has fp32's exponent range, so
// gradients do not underflow the way fp16's do.
//
// Matmul comes in two flavours per direction, by the precision of y (forward) or dy (backward):
// `matmul_forward` writes a bf16 y, `matmul_forward_f32` an fp32 one (the residual adds, router
// logits, the head's logits); `matmul_backward` reads a bf16 dy, `matmul_backward_f32` an fp32 one
// (the residual's gradient, dlogits, the router's) and rounds it to bf16 for its GEMMs, since
// tensor cores take bf16 operands only. dx is always bf16, dW always fp32 (+=).
// Shapes and accumulate rules are PARITY_OPS's.
#pragma once

#include "kernels/backend/bf16.h"
#include "kernels/backend/op_table.h"

namespace parity::kernels {

struct Bf16OpTable {
  using C = const OpContext&;
  // Embedding rows come from the fp32 master table into the fp32 residual stream.
  void (*embedding_forward)(C, int64_t t, int64_t d, float* out, const int32_t* tokens,
                            const float* table) = nullptr;
  void (*embedding_backward)(C, int64_t t, int64_t d, int64_t v, float* dtable, const float* dout,
                             const int32_t* tokens) = nullptr;
  void (*rmsnorm_forward)(C, int64_t t, int64_t d, Bf16* out, float* rstd, const float* x,
                          const float* w) = nullptr;
  void (*rmsnorm_backward)(C, int64_t t, int64_t d, float* dx, float* dw, const Bf16* dout,
                           const float* x, const float* w, const float* rstd) = nullptr;
  void (*matmul_forward)(C, const MatmulShape& s, Bf16* y, const Bf16* x, const Bf16* w,
                         Accumulate acc, FlopKind kind) = nullptr;
  void (*matmul_forward_f32)(C, const MatmulShape& s, float* y, const Bf16* x, const Bf16* w,
                             Accumulate acc, FlopKind kind) = nullptr;
  void (*matmul_backward)(C, const MatmulShape& s, Bf16* dx, float* dw, const Bf16* dy,
                          const Bf16* x, const Bf16* w, Accumulate acc, FlopKind kind) = nullptr;
  void (*matmul_backward_f32)(C, const MatmulShape& s, Bf16* dx, float* dw, const float* dy,
                              const Bf16* x, const Bf16* w, Accumulate acc,
                              FlopKind kind) = nullptr;
  void (*swiglu_forward)(C, int64_t t, int64_t f, Bf16* g, const Bf16* ab) = nullptr;
  void (*swiglu_backward)(C, int64_t t, int64_t f, Bf16* dab, const Bf16* dg,
                          const Bf16* ab) = nullptr;
  void (*rope_forward)(C, const AttentionShape& s, Bf16* qkv) = nullptr;
  void (*rope_backward)(C, const AttentionShape& s, Bf16* dqkv) = nullptr;
  void (*attention_forward)(C, const AttentionShape& s, Bf16* out, float* lse,
                            const Bf16* qkv) = nullptr;
  void (*attention_backward)(C, const AttentionShape& s, Bf16* dqkv, const Bf16* dout,
                             const Bf16* out, const float* lse, const Bf16* qkv) = nullptr;
  // Logits, losses and the router are fp32: the fp32 table's ops.
  void (*cross_entropy_forward)(C, int64_t t, int64_t v, float* loss, const float* logits,
                                const int32_t* targets) = nullptr;
  void (*cross_entropy_backward)(C, int64_t t, int64_t v, float* dlogits, const float* logits,
                                 const int32_t* targets, double scale) = nullptr;
  void (*route_forward)(C, const RouteShape& s, float* probs, float* lse, int32_t* expert,
                        float* gate, int64_t* load, double* losses, const float* logits,
                        const float* bias) = nullptr;
  void (*route_backward)(C, const RouteShape& s, float* dlogits, const float* dgate,
                         const float* probs, const float* lse, const int32_t* expert,
                         const int64_t* load) = nullptr;
  void (*permute_forward)(C, int64_t p, int64_t d, Bf16* xs, const Bf16* x,
                          const int32_t* token_of) = nullptr;
  void (*permute_backward)(C, int64_t t, int64_t k, int64_t d, Bf16* dx, const Bf16* dxs,
                           const int32_t* slot_of) = nullptr;
  // The gated sum lands in the fp32 residual stream; dy is its fp32 gradient.
  void (*combine_forward)(C, int64_t t, int64_t k, int64_t d, float* y, const Bf16* ys,
                          const float* gate, const int32_t* slot_of) = nullptr;
  void (*combine_backward)(C, int64_t t, int64_t k, int64_t d, Bf16* dys, float* dgate,
                           const float* dy, const Bf16* ys, const float* gate,
                           const int32_t* slot_of) = nullptr;
  // The experts' GEMMs: bf16 y, x, dx, dy and weights; fp32 dW (+=).
  void (*grouped_matmul_forward)(C, const GroupedMatmulShape& s, Bf16* y, const Bf16* x,
                                 const Bf16* w, FlopKind kind) = nullptr;
  void (*grouped_matmul_backward)(C, const GroupedMatmulShape& s, Bf16* dx, float* dw,
                                  const Bf16* dy, const Bf16* x, const Bf16* w,
                                  FlopKind kind) = nullptr;
  void (*routing_plan)(C, int64_t t, int64_t k, int64_t e, int64_t* offsets, int32_t* slot_of,
                       int32_t* token_of, const int32_t* expert) = nullptr;
  void (*bias_update)(C, int64_t e, float* bias, const int64_t* load, double rate) = nullptr;
  // The optimizer's ops: the trainer runs them from the fp32 table (OpsF32) in every precision,
  // multi-tensor AdamW included; these two entries are those ops.
  void (*sum_squares)(C, int64_t n, const float* g, double* sum) = nullptr;
  void (*adamw_update)(C, int64_t n, float* p, float* m, float* v, const float* g,
                       double grad_scale, const AdamWArgs& a, WeightDecay decay) = nullptr;
  // dst[n] = bf16(src[n]), round to nearest-even: the weight copy after every update.
  void (*cast_to_bf16)(C, int64_t n, Bf16* dst, const float* src) = nullptr;

  // True iff every entry is set (a backend fills all or offers no bf16 mode).
  bool Complete() const;
};

}  // namespace parity::kernels
