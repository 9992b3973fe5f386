// CPU reference kernels for rotary positions and causal (grouped-query) attention.
//
// Shapes: B sequences, S length, H query heads, Hkv key/value heads (H % Hkv == 0), Dh head dim.
// qkv[B·S, (H+2·Hkv)·Dh] holds per token [q heads | k heads | v heads]; out[B·S, H·Dh];
// lse[B, H, S] the log-sum-exp of each query row's scaled, masked scores (FlashAttention-2 style:
// the S×S probabilities are never stored, only one S×S scratch per pool chunk exists at a time).
// Each (sequence, head) is two GEMMs over the full S×S window. FLOPs are counted over that full
// window, which is both what is executed here and docs/domain.md's convention (4·D_m·S per token).
#pragma once

#include <cmath>
#include <vector>

#include "kernels/backend/op_table.h"
#include "kernels/cpu/gemm.h"

namespace parity::kernels::cpu {

inline int64_t QkvWidth(const AttentionShape& s) { return (s.heads + 2 * s.kv_heads) * s.head_dim; }

// ALiBi slope of head h: 2^(−8(h+1)/H) (Press et al.), a fixed geometric sequence.
inline double AlibiSlope(int64_t h, int64_t heads) {
  return std::pow(2.0, -8.0 * static_cast<double>(h + 1) / static_cast<double>(heads));
}

// Rotates pairs (j, j+Dh/2) of every q and k head by angle pos·θ^(−2j/Dh); `sign` −1 undoes it.
template <typename T>
void RopeRotate(const OpContext& ctx, const AttentionShape& s, T* qkv, double sign) {
  if (s.positions != Positions::kRotary) return;
  const int64_t half = s.head_dim / 2, ld = QkvWidth(s), rotated = s.heads + s.kv_heads;
  std::vector<double> cosv(s.seq * half), sinv(s.seq * half);
  for (int64_t p = 0; p < s.seq; ++p) {
    for (int64_t j = 0; j < half; ++j) {
      const double ang = p * std::pow(s.rope_theta, -2.0 * j / s.head_dim);
      cosv[p * half + j] = std::cos(ang);
      sinv[p * half + j] = sign * std::sin(ang);
    }
  }
  ctx.pool->ParallelFor(s.batch * s.seq, 64, [&](int, int64_t b, int64_t e) {
    for (int64_t tok = b; tok < e; ++tok) {
      const int64_t p = tok % s.seq;
      for (int64_t h = 0; h < rotated; ++h) {
        T* v = qkv + tok * ld + h * s.head_dim;
        for (int64_t j = 0; j < half; ++j) {
          const T c = static_cast<T>(cosv[p * half + j]), sn = static_cast<T>(sinv[p * half + j]);
          const T x0 = v[j], x1 = v[j + half];
          v[j] = x0 * c - x1 * sn;
          v[j + half] = x0 * sn + x1 * c;
        }
      }
    }
  });
  ctx.Count(FlopKind::kElementwise, 6.0 * s.batch * s.seq * rotated * half);
}
template <typename T>
void RopeForward(const OpContext& ctx, const AttentionShape& s, T* qkv) {
  RopeRotate(ctx, s, qkv, 1.0);
}
template <typename T>
void RopeBackward(const OpContext& ctx, const AttentionShape& s, T* dqkv) {
  RopeRotate(ctx, s, dqkv, -1.0);
}

// scores[S,S] = scale·q·k^T [− slope·(i − j)] of one (sequence, head); rows are queries. Only
// j ≤ i is meaningful (causal); the masked half is computed by the GEMM and ignored.
template <typename T>
void CausalScores(const AttentionShape& s, int64_t h, const T* q, const T* k, T* scores) {
  const int64_t S = s.seq, Dh = s.head_dim, ld = QkvWidth(s);
  const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(Dh)));
  GemmSerial<T>(Trans::kNo, Trans::kYes, S, S, Dh, scale, q, ld, k, ld, T(0), scores, S);
  if (s.positions != Positions::kAlibi) return;
  const double slope = AlibiSlope(h, s.heads);
  for (int64_t i = 0; i < S; ++i) {
    for (int64_t j = 0; j <= i; ++j) scores[i * S + j] -= static_cast<T>(slope * (i - j));
  }
}

// Per (sequence, head): scores, causal softmax, probabilities·v. The S×S probabilities live in a
// per-chunk scratch reused across heads; only lse[B,H,S] is kept for the backward.
template <typename T>
void AttentionForward(const OpContext& ctx, const AttentionShape& s, T* out, T* lse, const T* qkv) {
  const int64_t S = s.seq, Dh = s.head_dim, ld = QkvWidth(s), ldo = s.heads * Dh;
  const int64_t group = s.heads / s.kv_heads;
  ctx.pool->ParallelFor(s.batch * s.heads, 1, [&](int, int64_t b0, int64_t b1) {
    std::vector<T> p(S * S);
    for (int64_t bh = b0; bh < b1; ++bh) {
      const int64_t b = bh / s.heads, h = bh % s.heads, g = h / group;
      const T* q = qkv + b * S * ld + h * Dh;
      const T* k = qkv + b * S * ld + (s.heads + g) * Dh;
      const T* v = qkv + b * S * ld + (s.heads + s.kv_heads + g) * Dh;
      CausalScores(s, h, q, k, p.data());
      for (int64_t i = 0; i < S; ++i) {
        T* row = p.data() + i * S;
        T mx = row[0];
        for (int64_t j = 1; j <= i; ++j) mx = std::max(mx, row[j]);
        T sum = 0;
        for (int64_t j = 0; j <= i; ++j) {
          row[j] = std::exp(row[j] - mx);
          sum += row[j];
        }
        lse[bh * S + i] = mx + std::log(sum);
        const T inv = T(1) / sum;
        for (int64_t j = 0; j <= i; ++j) row[j] *= inv;
        for (int64_t j = i + 1; j < S; ++j) row[j] = 0;
      }
      // out[S,Dh] = probs·v
      GemmSerial<T>(Trans::kNo, Trans::kNo, S, Dh, S, T(1), p.data(), S, v, ld, T(0),
                    out + b * S * ldo + h * Dh, ldo);
    }
  });
  ctx.Count(FlopKind::kModel, 4.0 * s.batch * s.heads * S * S * Dh);
  ctx.Count(FlopKind::kElementwise, 4.0 * s.batch * s.heads * S * S / 2);
}

// dqkv (=) from dout. Split by (sequence, kv group) so the heads sharing a key/value head add
// into dk/dv in a fixed order and no two chunks write the same rows. Per head the probabilities
// are recomputed as exp(score − lse), and the softmax backward uses D_i = Σ_d dout·out (equal to
// Σ_j p·dp, but O(Dh) instead of O(S) per row).
template <typename T>
void AttentionBackward(const OpContext& ctx, const AttentionShape& s, T* dqkv, const T* dout,
                       const T* out, const T* lse, const T* qkv) {
  const int64_t S = s.seq, Dh = s.head_dim, ld = QkvWidth(s), ldo = s.heads * Dh;
  const int64_t group = s.heads / s.kv_heads;
  const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(Dh)));
  ctx.pool->ParallelFor(s.batch * s.kv_heads, 1, [&](int, int64_t b0, int64_t b1) {
    std::vector<T> p(S * S), dp(S * S), delta(S);
    for (int64_t bg = b0; bg < b1; ++bg) {
      const int64_t b = bg / s.kv_heads, g = bg % s.kv_heads;
      const T* k = qkv + b * S * ld + (s.heads + g) * Dh;
      const T* v = qkv + b * S * ld + (s.heads + s.kv_heads + g) * Dh;
      T* dk = dqkv + b * S * ld + (s.heads + g) * Dh;
      T* dv = dqkv + b * S * ld + (s.heads + s.kv_heads + g) * Dh;
      for (int64_t h = g * group; h < (g + 1) * group; ++h) {
        const T beta = h == g * group ? T(0) : T(1);  // first head of the group overwrites
        const T* q = qkv + b * S * ld + h * Dh;
        T* dq = dqkv + b * S * ld + h * Dh;
        const T* lse_h = lse + (b * s.heads + h) * S;
        const T* dout_h = dout + b * S * ldo + h * Dh;
        const T* out_h = out + b * S * ldo + h * Dh;
        CausalScores(s, h, q, k, p.data());
        for (int64_t i = 0; i < S; ++i) {
          T* row = p.data() + i * S;
          for (int64_t j = 0; j <= i; ++j) row[j] = std::exp(row[j] - lse_h[i]);
          for (int64_t j = i + 1; j < S; ++j) row[j] = 0;
          T d = 0;
          for (int64_t c = 0; c < Dh; ++c) d += dout_h[i * ldo + c] * out_h[i * ldo + c];
          delta[i] = d;
        }
        // dp[S,S] = dout·v^T;  dv += p^T·dout
        GemmSerial<T>(Trans::kNo, Trans::kYes, S, S, Dh, T(1), dout_h, ldo, v, ld, T(0), dp.data(),
                      S);
        GemmSerial<T>(Trans::kYes, Trans::kNo, S, Dh, S, T(1), p.data(), S, dout_h, ldo, beta, dv,
                      ld);
        // softmax backward: ds = p·(dp − D_i)·scale (zero above the diagonal since p is)
        for (int64_t i = 0; i < S; ++i) {
          const T* pr = p.data() + i * S;
          T* dr = dp.data() + i * S;
          for (int64_t j = 0; j <= i; ++j) dr[j] = pr[j] * (dr[j] - delta[i]) * scale;
          for (int64_t j = i + 1; j < S; ++j) dr[j] = 0;
        }
        // dq = ds·k;  dk += ds^T·q
        GemmSerial<T>(Trans::kNo, Trans::kNo, S, Dh, S, T(1), dp.data(), S, k, ld, T(0), dq, ld);
        GemmSerial<T>(Trans::kYes, Trans::kNo, S, Dh, S, T(1), dp.data(), S, q, ld, beta, dk, ld);
      }
    }
  });
  // kModel keeps docs/domain.md's convention (a step is 3× the forward: 8·S²·Dh here); the
  // recomputed scores (2·S²·Dh per head) are the price of not storing probabilities and count as
  // overhead.
  ctx.Count(FlopKind::kModel, 8.0 * s.batch * s.heads * S * S * Dh);
  ctx.Count(FlopKind::kElementwise, 2.0 * s.batch * s.heads * S * S * Dh);
  ctx.Count(FlopKind::kElementwise, 6.0 * s.batch * s.heads * S * S / 2);
}

}  // namespace parity::kernels::cpu
