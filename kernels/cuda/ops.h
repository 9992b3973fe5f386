// The CUDA backend's op implementations: one declaration per OpTable<float> entry, then the bf16
// mode's overloads (Bf16OpTable, backend/op_table_bf16.h; its fp32 entries — embedding,
// cross-entropy, route, routing plan, bias update, sum of squares, AdamW — are the fp32 ops). The
// comments on PARITY_OPS in backend/op_table.h define each op, and every op here mirrors its CPU
// reference in cpu/ops_*.h: the same outputs, the same accumulate-or-overwrite behaviour, the
// same FLOP counts (added on the host, so the counted M equals the plan). All pointers are device
// pointers (sum_squares's host result aside); work is queued on the device's stream and no op
// synchronises with the host.
#pragma once

#include <cstdint>

#include "kernels/backend/bf16.h"
#include "kernels/backend/op_table.h"

namespace parity::kernels::cuda {

// ops_dense.cu
void EmbeddingForward(const OpContext& ctx, int64_t t, int64_t d, float* out, const int32_t* tokens,
                      const float* table);
void EmbeddingBackward(const OpContext& ctx, int64_t t, int64_t d, int64_t v, float* dtable,
                       const float* dout, const int32_t* tokens);
void RmsNormForward(const OpContext& ctx, int64_t t, int64_t d, float* out, float* rstd,
                    const float* x, const float* w);
void RmsNormBackward(const OpContext& ctx, int64_t t, int64_t d, float* dx, float* dw,
                     const float* dout, const float* x, const float* w, const float* rstd);
void MatmulForward(const OpContext& ctx, const MatmulShape& s, float* y, const float* x,
                   const float* w, Accumulate acc, FlopKind kind);
void MatmulBackward(const OpContext& ctx, const MatmulShape& s, float* dx, float* dw,
                    const float* dy, const float* x, const float* w, Accumulate acc, FlopKind kind);
void SwiGluForward(const OpContext& ctx, int64_t t, int64_t f, float* g, const float* ab);
void SwiGluBackward(const OpContext& ctx, int64_t t, int64_t f, float* dab, const float* dg,
                    const float* ab);
void CrossEntropyForward(const OpContext& ctx, int64_t t, int64_t v, float* loss,
                         const float* logits, const int32_t* targets);
void CrossEntropyBackward(const OpContext& ctx, int64_t t, int64_t v, float* dlogits,
                          const float* logits, const int32_t* targets, double scale);

// ops_attention.cu
void RopeForward(const OpContext& ctx, const AttentionShape& s, float* qkv);
void RopeBackward(const OpContext& ctx, const AttentionShape& s, float* dqkv);
void AttentionForward(const OpContext& ctx, const AttentionShape& s, float* out, float* lse,
                      const float* qkv);
void AttentionBackward(const OpContext& ctx, const AttentionShape& s, float* dqkv,
                       const float* dout, const float* out, const float* lse, const float* qkv);

// ops_moe.cu
void RouteForward(const OpContext& ctx, const RouteShape& s, float* probs, float* lse,
                  int32_t* expert, float* gate, int64_t* load, double* losses, const float* logits,
                  const float* bias);
void RouteBackward(const OpContext& ctx, const RouteShape& s, float* dlogits, const float* dgate,
                   const float* probs, const float* lse, const int32_t* expert,
                   const int64_t* load);
void RoutingPlan(const OpContext& ctx, int64_t t, int64_t k, int64_t e, int64_t* offsets,
                 int32_t* slot_of, int32_t* token_of, const int32_t* expert);
void BiasUpdate(const OpContext& ctx, int64_t e, float* bias, const int64_t* load, double rate);
void PermuteForward(const OpContext& ctx, int64_t p, int64_t d, float* xs, const float* x,
                    const int32_t* token_of);
void PermuteBackward(const OpContext& ctx, int64_t t, int64_t k, int64_t d, float* dx,
                     const float* dxs, const int32_t* slot_of);
void CombineForward(const OpContext& ctx, int64_t t, int64_t k, int64_t d, float* y,
                    const float* ys, const float* gate, const int32_t* slot_of);
void CombineBackward(const OpContext& ctx, int64_t t, int64_t k, int64_t d, float* dys,
                     float* dgate, const float* dy, const float* ys, const float* gate,
                     const int32_t* slot_of);

// ops_grouped.cu: one cublasGemmGroupedBatchedEx per product (fp32 A/B/C, CUBLAS_COMPUTE_32F).
void GroupedMatmulForward(const OpContext& ctx, const GroupedMatmulShape& s, float* y,
                          const float* x, const float* w, FlopKind kind);
void GroupedMatmulBackward(const OpContext& ctx, const GroupedMatmulShape& s, float* dx, float* dw,
                           const float* dy, const float* x, const float* w, FlopKind kind);

// ops_optim.cu
void SumSquares(const OpContext& ctx, int64_t n, const float* g, double* sum);
void AdamWUpdate(const OpContext& ctx, int64_t n, float* p, float* m, float* v, const float* g,
                 double grad_scale, const AdamWArgs& a, WeightDecay decay);
void AdamWMultiTensor(const OpContext& ctx, int64_t count, const TensorSpan* tensors, float* p,
                      float* m, float* v, const float* g, double grad_scale, const AdamWArgs& a);

// ---- the bf16 mode: each array in the precision op_table_bf16.h gives it; math in fp32, bf16
// stores rounded to nearest-even.
// ops_dense.cu
void RmsNormForward(const OpContext& ctx, int64_t t, int64_t d, Bf16* out, float* rstd,
                    const float* x, const float* w);
void RmsNormBackward(const OpContext& ctx, int64_t t, int64_t d, float* dx, float* dw,
                     const Bf16* dout, const float* x, const float* w, const float* rstd);
void MatmulForward(const OpContext& ctx, const MatmulShape& s, Bf16* y, const Bf16* x,
                   const Bf16* w, Accumulate acc, FlopKind kind);  // matmul_forward
void MatmulForward(const OpContext& ctx, const MatmulShape& s, float* y, const Bf16* x,
                   const Bf16* w, Accumulate acc, FlopKind kind);  // matmul_forward_f32
void MatmulBackward(const OpContext& ctx, const MatmulShape& s, Bf16* dx, float* dw, const Bf16* dy,
                    const Bf16* x, const Bf16* w, Accumulate acc,
                    FlopKind kind);  // matmul_backward
// matmul_backward_f32: dy is rounded to bf16 first (tensor-core operands are bf16).
void MatmulBackward(const OpContext& ctx, const MatmulShape& s, Bf16* dx, float* dw,
                    const float* dy, const Bf16* x, const Bf16* w, Accumulate acc, FlopKind kind);
void SwiGluForward(const OpContext& ctx, int64_t t, int64_t f, Bf16* g, const Bf16* ab);
void SwiGluBackward(const OpContext& ctx, int64_t t, int64_t f, Bf16* dab, const Bf16* dg,
                    const Bf16* ab);
// ops_attention.cu
void RopeForward(const OpContext& ctx, const AttentionShape& s, Bf16* qkv);
void RopeBackward(const OpContext& ctx, const AttentionShape& s, Bf16* dqkv);
void AttentionForward(const OpContext& ctx, const AttentionShape& s, Bf16* out, float* lse,
                      const Bf16* qkv);
void AttentionBackward(const OpContext& ctx, const AttentionShape& s, Bf16* dqkv, const Bf16* dout,
                       const Bf16* out, const float* lse, const Bf16* qkv);
// ops_moe.cu
void PermuteForward(const OpContext& ctx, int64_t p, int64_t d, Bf16* xs, const Bf16* x,
                    const int32_t* token_of);
void PermuteBackward(const OpContext& ctx, int64_t t, int64_t k, int64_t d, Bf16* dx,
                     const Bf16* dxs, const int32_t* slot_of);
void CombineForward(const OpContext& ctx, int64_t t, int64_t k, int64_t d, float* y, const Bf16* ys,
                    const float* gate, const int32_t* slot_of);
void CombineBackward(const OpContext& ctx, int64_t t, int64_t k, int64_t d, Bf16* dys, float* dgate,
                     const float* dy, const Bf16* ys, const float* gate, const int32_t* slot_of);
// ops_grouped.cu: bf16 y and dx from grouped calls; the fp32 dW (+=) as per-group GEMMs.
void GroupedMatmulForward(const OpContext& ctx, const GroupedMatmulShape& s, Bf16* y, const Bf16* x,
                          const Bf16* w, FlopKind kind);
void GroupedMatmulBackward(const OpContext& ctx, const GroupedMatmulShape& s, Bf16* dx, float* dw,
                           const Bf16* dy, const Bf16* x, const Bf16* w, FlopKind kind);
// ops_optim.cu: dst[n] = bf16(src[n]) (the weight copy; not counted as FLOPs).
void CastToBf16(const OpContext& ctx, int64_t n, Bf16* dst, const float* src);

}  // namespace parity::kernels::cuda
