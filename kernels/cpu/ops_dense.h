// CPU reference kernels for the dense ops: embedding, RMSNorm, matmul, SwiGLU, cross-entropy.
// Templated on the scalar (float for training, double for finite-difference checks).
//
// Shapes: T tokens, D width, V vocabulary, N/K matmul out/in features, F SwiGLU hidden.
// Parameter gradients accumulate (+=); activation gradients overwrite unless told to accumulate.
// Reductions across tokens (dweight of RMSNorm, embedding rows) are summed per pool chunk and then
// in chunk order, so results are identical run to run for a given thread count.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/backend/op_table.h"
#include "kernels/cpu/gemm.h"

namespace parity::kernels::cpu {

inline constexpr double kRmsNormEps = 1e-5;

// ---- embedding ---------------------------------------------------------------------------------
// out[T,D] = table[tokens[t], :]
template <typename T>
void EmbeddingForward(const OpContext& ctx, int64_t t, int64_t d, T* out, const int32_t* tokens,
                      const T* table) {
  ctx.pool->ParallelFor(t, 256, [&](int, int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) std::memcpy(out + i * d, table + tokens[i] * d, d * sizeof(T));
  });
}
// dtable[V,D] += Σ_{t: tokens[t]=v} dout[t,:]. Split by vocabulary row so no two chunks write the
// same row and each row sums its tokens in token order.
template <typename T>
void EmbeddingBackward(const OpContext& ctx, int64_t t, int64_t d, int64_t v, T* dtable,
                       const T* dout, const int32_t* tokens) {
  ctx.pool->ParallelFor(v, 16, [&](int, int64_t v0, int64_t v1) {
    for (int64_t i = 0; i < t; ++i) {
      const int64_t row = tokens[i];
      if (row < v0 || row >= v1) continue;
      T* dst = dtable + row * d;
      const T* src = dout + i * d;
      for (int64_t j = 0; j < d; ++j) dst[j] += src[j];
    }
  });
  ctx.Count(FlopKind::kVocab, static_cast<double>(t) * d);
}

// ---- RMSNorm -----------------------------------------------------------------------------------
// out[T,D] = x·rstd·w, rstd[T] = 1/sqrt(mean(x²) + eps)
template <typename T>
void RmsNormForward(const OpContext& ctx, int64_t t, int64_t d, T* out, T* rstd, const T* x,
                    const T* w) {
  ctx.pool->ParallelFor(t, 64, [&](int, int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const T* xi = x + i * d;
      double ss = 0.0;
      for (int64_t j = 0; j < d; ++j) ss += static_cast<double>(xi[j]) * xi[j];
      const T r = static_cast<T>(1.0 / std::sqrt(ss / d + kRmsNormEps));
      rstd[i] = r;
      T* oi = out + i * d;
      for (int64_t j = 0; j < d; ++j) oi[j] = xi[j] * r * w[j];
    }
  });
  ctx.Count(FlopKind::kElementwise, 4.0 * t * d);
}
// dx[T,D] += r·w·dout − r³/D·x·Σ_j(x·w·dout);  dw[D] += Σ_t dout·x·r
template <typename T>
void RmsNormBackward(const OpContext& ctx, int64_t t, int64_t d, T* dx, T* dw, const T* dout,
                     const T* x, const T* w, const T* rstd) {
  const int chunks = ctx.pool->NumChunks(t, 64);
  std::vector<T> partial(static_cast<size_t>(chunks) * d, T(0));
  ctx.pool->ParallelFor(t, 64, [&](int c, int64_t b, int64_t e) {
    T* dwp = partial.data() + c * d;
    for (int64_t i = b; i < e; ++i) {
      const T* xi = x + i * d;
      const T* gi = dout + i * d;
      const T r = rstd[i];
      T dot = 0;
      for (int64_t j = 0; j < d; ++j) {
        dot += xi[j] * w[j] * gi[j];
        dwp[j] += gi[j] * xi[j] * r;
      }
      const T coef = r * r * r * dot / static_cast<T>(d);
      T* dxi = dx + i * d;
      for (int64_t j = 0; j < d; ++j) dxi[j] += r * w[j] * gi[j] - coef * xi[j];
    }
  });
  for (int c = 0; c < chunks; ++c) {
    for (int64_t j = 0; j < d; ++j) dw[j] += partial[c * d + j];
  }
  ctx.Count(FlopKind::kElementwise, 10.0 * t * d);
}

// ---- matmul ------------------------------------------------------------------------------------
// y[T,N] (=|+=) x[T,K]·W[N,K]^T
template <typename T>
void MatmulForward(const OpContext& ctx, const MatmulShape& s, T* y, const T* x, const T* w,
                   Accumulate acc, FlopKind kind) {
  Gemm<T>(*ctx.pool, Trans::kNo, Trans::kYes, s.rows, s.out, s.in, T(1), x, s.in, w, s.in,
          acc == Accumulate::kYes ? T(1) : T(0), y, s.out);
  ctx.Count(kind, 2.0 * s.rows * s.out * s.in);
}
// dx[T,K] (=|+=) dy[T,N]·W[N,K];  dW[N,K] += dy^T·x. dx may be null (input needs no gradient).
template <typename T>
void MatmulBackward(const OpContext& ctx, const MatmulShape& s, T* dx, T* dw, const T* dy,
                    const T* x, const T* w, Accumulate acc, FlopKind kind) {
  if (dx != nullptr) {
    Gemm<T>(*ctx.pool, Trans::kNo, Trans::kNo, s.rows, s.in, s.out, T(1), dy, s.out, w, s.in,
            acc == Accumulate::kYes ? T(1) : T(0), dx, s.in);
    ctx.Count(kind, 2.0 * s.rows * s.out * s.in);
  }
  Gemm<T>(*ctx.pool, Trans::kYes, Trans::kNo, s.out, s.in, s.rows, T(1), dy, s.out, x, s.in, T(1),
          dw, s.in);
  ctx.Count(kind, 2.0 * s.rows * s.out * s.in);
}

// ---- SwiGLU ------------------------------------------------------------------------------------
template <typename T>
inline T Sigmoid(T a) {
  return T(1) / (T(1) + std::exp(-a));
}
// g[T,F] = silu(a)·b with a = ab[:, :F], b = ab[:, F:]
template <typename T>
void SwiGluForward(const OpContext& ctx, int64_t t, int64_t f, T* g, const T* ab) {
  ctx.pool->ParallelFor(t, 64, [&](int, int64_t b0, int64_t b1) {
    for (int64_t i = b0; i < b1; ++i) {
      const T* a = ab + i * 2 * f;
      const T* b = a + f;
      T* gi = g + i * f;
      for (int64_t j = 0; j < f; ++j) gi[j] = a[j] * Sigmoid(a[j]) * b[j];
    }
  });
  ctx.Count(FlopKind::kElementwise, 5.0 * t * f);
}
// dab[T,2F] = (dg·b·σ(a)(1 + a(1−σ(a))), dg·silu(a))
template <typename T>
void SwiGluBackward(const OpContext& ctx, int64_t t, int64_t f, T* dab, const T* dg, const T* ab) {
  ctx.pool->ParallelFor(t, 64, [&](int, int64_t b0, int64_t b1) {
    for (int64_t i = b0; i < b1; ++i) {
      const T* a = ab + i * 2 * f;
      const T* b = a + f;
      const T* dgi = dg + i * f;
      T* da = dab + i * 2 * f;
      T* db = da + f;
      for (int64_t j = 0; j < f; ++j) {
        const T sg = Sigmoid(a[j]);
        db[j] = dgi[j] * a[j] * sg;
        da[j] = dgi[j] * b[j] * sg * (T(1) + a[j] * (T(1) - sg));
      }
    }
  });
  ctx.Count(FlopKind::kElementwise, 10.0 * t * f);
}

// ---- cross-entropy -----------------------------------------------------------------------------
// loss[T] = logsumexp(logits[t,:]) − logits[t, target]
template <typename T>
void CrossEntropyForward(const OpContext& ctx, int64_t t, int64_t v, T* loss, const T* logits,
                         const int32_t* targets) {
  ctx.pool->ParallelFor(t, 64, [&](int, int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const T* li = logits + i * v;
      const T mx = *std::max_element(li, li + v);
      double sum = 0.0;
      for (int64_t j = 0; j < v; ++j) sum += std::exp(static_cast<double>(li[j] - mx));
      loss[i] = static_cast<T>(std::log(sum) + mx - li[targets[i]]);
    }
  });
  ctx.Count(FlopKind::kElementwise, 3.0 * t * v);
}
// dlogits[T,V] = scale·(softmax(logits) − onehot(target))
template <typename T>
void CrossEntropyBackward(const OpContext& ctx, int64_t t, int64_t v, T* dlogits, const T* logits,
                          const int32_t* targets, double scale) {
  ctx.pool->ParallelFor(t, 64, [&](int, int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const T* li = logits + i * v;
      T* di = dlogits + i * v;
      const T mx = *std::max_element(li, li + v);
      double sum = 0.0;
      for (int64_t j = 0; j < v; ++j) sum += std::exp(static_cast<double>(li[j] - mx));
      const double inv = 1.0 / sum;
      for (int64_t j = 0; j < v; ++j) {
        di[j] = static_cast<T>(scale * std::exp(static_cast<double>(li[j] - mx)) * inv);
      }
      di[targets[i]] -= static_cast<T>(scale);
    }
  });
  ctx.Count(FlopKind::kElementwise, 4.0 * t * v);
}

}  // namespace parity::kernels::cpu
