#include "kernels/cpu/ops_bf16.h"

#include <utility>
#include <vector>

#include "kernels/cpu/ops_attention.h"
#include "kernels/cpu/ops_dense.h"
#include "kernels/cpu/ops_grouped.h"
#include "kernels/cpu/ops_moe.h"
#include "kernels/cpu/ops_optim.h"

namespace parity::kernels::cpu {
namespace {

constexpr int64_t kConvertGrain = 1 << 14;  // elements per pool chunk of a conversion

std::vector<float> Widen(const OpContext& ctx, const Bf16* x, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  ctx.pool->ParallelFor(n, kConvertGrain, [&](int, int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) out[i] = ToFloat(x[i]);
  });
  return out;
}

void Narrow(const OpContext& ctx, Bf16* dst, const float* src, int64_t n) {
  ctx.pool->ParallelFor(n, kConvertGrain, [&](int, int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) dst[i] = ToBf16(src[i]);
  });
}

// The fp32 starting value of an output: its current contents when the op accumulates into it.
std::vector<float> Start(const OpContext& ctx, const Bf16* y, int64_t n, Accumulate acc) {
  return acc == Accumulate::kYes ? Widen(ctx, y, n) : std::vector<float>(static_cast<size_t>(n));
}

int64_t QkvElements(const AttentionShape& s) { return s.batch * s.seq * QkvWidth(s); }

void RmsNormForwardBf16(const OpContext& ctx, int64_t t, int64_t d, Bf16* out, float* rstd,
                        const float* x, const float* w) {
  std::vector<float> o(static_cast<size_t>(t * d));
  RmsNormForward<float>(ctx, t, d, o.data(), rstd, x, w);
  Narrow(ctx, out, o.data(), t * d);
}
void RmsNormBackwardBf16(const OpContext& ctx, int64_t t, int64_t d, float* dx, float* dw,
                         const Bf16* dout, const float* x, const float* w, const float* rstd) {
  RmsNormBackward<float>(ctx, t, d, dx, dw, Widen(ctx, dout, t * d).data(), x, w, rstd);
}

template <typename Y>
void MatmulForwardBf16(const OpContext& ctx, const MatmulShape& s, Y* y, const Bf16* x,
                       const Bf16* w, Accumulate acc, FlopKind kind) {
  const std::vector<float> xf = Widen(ctx, x, s.rows * s.in), wf = Widen(ctx, w, s.out * s.in);
  if constexpr (std::is_same_v<Y, float>) {
    MatmulForward<float>(ctx, s, y, xf.data(), wf.data(), acc, kind);
  } else {
    std::vector<float> yf = Start(ctx, y, s.rows * s.out, acc);
    MatmulForward<float>(ctx, s, yf.data(), xf.data(), wf.data(), acc, kind);
    Narrow(ctx, y, yf.data(), s.rows * s.out);
  }
}

template <typename DY>
void MatmulBackwardBf16(const OpContext& ctx, const MatmulShape& s, Bf16* dx, float* dw,
                        const DY* dy, const Bf16* x, const Bf16* w, Accumulate acc, FlopKind kind) {
  // Tensor cores take bf16 operands only, so an fp32 dy is rounded to bf16 for both GEMMs (as the
  // CUDA backend does, and PyTorch autocast); the emulation rounds it at the same point.
  std::vector<float> dyf;
  if constexpr (std::is_same_v<DY, float>) {
    dyf.resize(static_cast<size_t>(s.rows * s.out));
    ctx.pool->ParallelFor(s.rows * s.out, kConvertGrain, [&](int, int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) dyf[i] = ToFloat(ToBf16(dy[i]));
    });
  } else {
    dyf = Widen(ctx, dy, s.rows * s.out);
  }
  const float* dy32 = dyf.data();
  const std::vector<float> xf = Widen(ctx, x, s.rows * s.in), wf = Widen(ctx, w, s.out * s.in);
  std::vector<float> dxf;
  if (dx != nullptr) dxf = Start(ctx, dx, s.rows * s.in, acc);
  MatmulBackward<float>(ctx, s, dx != nullptr ? dxf.data() : nullptr, dw, dy32, xf.data(),
                        wf.data(), acc, kind);
  if (dx != nullptr) Narrow(ctx, dx, dxf.data(), s.rows * s.in);
}

void SwiGluForwardBf16(const OpContext& ctx, int64_t t, int64_t f, Bf16* g, const Bf16* ab) {
  std::vector<float> gf(static_cast<size_t>(t * f));
  SwiGluForward<float>(ctx, t, f, gf.data(), Widen(ctx, ab, t * 2 * f).data());
  Narrow(ctx, g, gf.data(), t * f);
}
void SwiGluBackwardBf16(const OpContext& ctx, int64_t t, int64_t f, Bf16* dab, const Bf16* dg,
                        const Bf16* ab) {
  std::vector<float> dabf(static_cast<size_t>(t * 2 * f));
  SwiGluBackward<float>(ctx, t, f, dabf.data(), Widen(ctx, dg, t * f).data(),
                        Widen(ctx, ab, t * 2 * f).data());
  Narrow(ctx, dab, dabf.data(), t * 2 * f);
}

// RoPE rotates q and k in place; v goes through the widening and rounding unchanged (exact).
template <void (*Rotate)(const OpContext&, const AttentionShape&, float*)>
void RopeBf16(const OpContext& ctx, const AttentionShape& s, Bf16* qkv) {
  std::vector<float> f = Widen(ctx, qkv, QkvElements(s));
  Rotate(ctx, s, f.data());
  Narrow(ctx, qkv, f.data(), QkvElements(s));
}

void AttentionForwardBf16(const OpContext& ctx, const AttentionShape& s, Bf16* out, float* lse,
                          const Bf16* qkv) {
  const int64_t n = s.batch * s.seq * s.heads * s.head_dim;
  std::vector<float> o(static_cast<size_t>(n));
  AttentionForward<float>(ctx, s, o.data(), lse, Widen(ctx, qkv, QkvElements(s)).data());
  Narrow(ctx, out, o.data(), n);
}
void AttentionBackwardBf16(const OpContext& ctx, const AttentionShape& s, Bf16* dqkv,
                           const Bf16* dout, const Bf16* out, const float* lse, const Bf16* qkv) {
  const int64_t n = s.batch * s.seq * s.heads * s.head_dim, nq = QkvElements(s);
  std::vector<float> d(static_cast<size_t>(nq));
  AttentionBackward<float>(ctx, s, d.data(), Widen(ctx, dout, n).data(), Widen(ctx, out, n).data(),
                           lse, Widen(ctx, qkv, nq).data());
  Narrow(ctx, dqkv, d.data(), nq);
}

// A gather: copying the bits is exactly widening and rounding again.
void PermuteForwardBf16(const OpContext& ctx, int64_t p, int64_t d, Bf16* xs, const Bf16* x,
                        const int32_t* token_of) {
  PermuteForward<Bf16>(ctx, p, d, xs, x, token_of);
}
void PermuteBackwardBf16(const OpContext& ctx, int64_t t, int64_t k, int64_t d, Bf16* dx,
                         const Bf16* dxs, const int32_t* slot_of) {
  std::vector<float> dxf = Widen(ctx, dx, t * d);
  PermuteBackward<float>(ctx, t, k, d, dxf.data(), Widen(ctx, dxs, t * k * d).data(), slot_of);
  Narrow(ctx, dx, dxf.data(), t * d);
}
void CombineForwardBf16(const OpContext& ctx, int64_t t, int64_t k, int64_t d, float* y,
                        const Bf16* ys, const float* gate, const int32_t* slot_of) {
  CombineForward<float>(ctx, t, k, d, y, Widen(ctx, ys, t * k * d).data(), gate, slot_of);
}
void CombineBackwardBf16(const OpContext& ctx, int64_t t, int64_t k, int64_t d, Bf16* dys,
                         float* dgate, const float* dy, const Bf16* ys, const float* gate,
                         const int32_t* slot_of) {
  std::vector<float> dysf(static_cast<size_t>(t * k * d));
  CombineBackward<float>(ctx, t, k, d, dysf.data(), dgate, dy, Widen(ctx, ys, t * k * d).data(),
                         gate, slot_of);
  Narrow(ctx, dys, dysf.data(), t * k * d);
}

// The grouped matmul on the rows [offsets[0], offsets[G]) only, widened once: the fp32 grouped op
// then makes, per group, the GEMM calls the bf16 matmul op makes on that group's widened rows
// (widening and rounding are per element), so the bits are the per-group matmul calls'.
struct GroupedRows {
  int64_t first, count;
  std::vector<int64_t> offsets;  // host offsets relative to `first`
  // `s` over the widened rows alone (both offset arrays are host memory on the CPU).
  GroupedMatmulShape Local(const GroupedMatmulShape& s) const {
    return {.groups = s.groups,
            .in = s.in,
            .out = s.out,
            .offsets = offsets.data(),
            .host_offsets = offsets.data()};
  }
};
GroupedRows RowsOf(const GroupedMatmulShape& s) {
  const int64_t* off = s.host_offsets;
  std::vector<int64_t> relative(static_cast<size_t>(s.groups + 1));
  for (int64_t g = 0; g <= s.groups; ++g) relative[g] = off[g] - off[0];
  return {.first = off[0], .count = off[s.groups] - off[0], .offsets = std::move(relative)};
}

void GroupedMatmulForwardBf16(const OpContext& ctx, const GroupedMatmulShape& s, Bf16* y,
                              const Bf16* x, const Bf16* w, FlopKind kind) {
  const GroupedRows r = RowsOf(s);
  const GroupedMatmulShape local = r.Local(s);
  const std::vector<float> xf = Widen(ctx, x + r.first * s.in, r.count * s.in);
  const std::vector<float> wf = Widen(ctx, w, s.groups * s.out * s.in);
  std::vector<float> yf(static_cast<size_t>(r.count * s.out));
  GroupedMatmulForward<float>(ctx, local, yf.data(), xf.data(), wf.data(), kind);
  Narrow(ctx, y + r.first * s.out, yf.data(), r.count * s.out);
}

void GroupedMatmulBackwardBf16(const OpContext& ctx, const GroupedMatmulShape& s, Bf16* dx,
                               float* dw, const Bf16* dy, const Bf16* x, const Bf16* w,
                               FlopKind kind) {
  const GroupedRows r = RowsOf(s);
  const GroupedMatmulShape local = r.Local(s);
  const std::vector<float> dyf = Widen(ctx, dy + r.first * s.out, r.count * s.out);
  const std::vector<float> xf = Widen(ctx, x + r.first * s.in, r.count * s.in);
  const std::vector<float> wf = Widen(ctx, w, s.groups * s.out * s.in);
  std::vector<float> dxf(static_cast<size_t>(r.count * s.in));
  GroupedMatmulBackward<float>(ctx, local, dxf.data(), dw, dyf.data(), xf.data(), wf.data(), kind);
  Narrow(ctx, dx + r.first * s.in, dxf.data(), r.count * s.in);
}

void CastToBf16(const OpContext& ctx, int64_t n, Bf16* dst, const float* src) {
  Narrow(ctx, dst, src, n);
}

}  // namespace

Bf16OpTable MakeBf16Table() {
  Bf16OpTable t;
  t.embedding_forward = &EmbeddingForward<float>;
  t.embedding_backward = &EmbeddingBackward<float>;
  t.rmsnorm_forward = &RmsNormForwardBf16;
  t.rmsnorm_backward = &RmsNormBackwardBf16;
  t.matmul_forward = &MatmulForwardBf16<Bf16>;
  t.matmul_forward_f32 = &MatmulForwardBf16<float>;
  t.matmul_backward = &MatmulBackwardBf16<Bf16>;
  t.matmul_backward_f32 = &MatmulBackwardBf16<float>;
  t.swiglu_forward = &SwiGluForwardBf16;
  t.swiglu_backward = &SwiGluBackwardBf16;
  t.rope_forward = &RopeBf16<&RopeForward<float>>;
  t.rope_backward = &RopeBf16<&RopeBackward<float>>;
  t.attention_forward = &AttentionForwardBf16;
  t.attention_backward = &AttentionBackwardBf16;
  t.cross_entropy_forward = &CrossEntropyForward<float>;
  t.cross_entropy_backward = &CrossEntropyBackward<float>;
  t.route_forward = &RouteForward<float>;
  t.route_backward = &RouteBackward<float>;
  t.permute_forward = &PermuteForwardBf16;
  t.permute_backward = &PermuteBackwardBf16;
  t.combine_forward = &CombineForwardBf16;
  t.combine_backward = &CombineBackwardBf16;
  t.grouped_matmul_forward = &GroupedMatmulForwardBf16;
  t.grouped_matmul_backward = &GroupedMatmulBackwardBf16;
  t.routing_plan = &RoutingPlan;
  t.bias_update = &BiasUpdate;
  t.sum_squares = &SumSquares<float>;
  t.adamw_update = &AdamWUpdate<float>;
  t.cast_to_bf16 = &CastToBf16;
  return t;
}

}  // namespace parity::kernels::cpu
