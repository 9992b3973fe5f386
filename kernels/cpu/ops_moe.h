// CPU reference kernels for the MoE chain: route → permute → (expert FFN = matmul/SwiGLU ops per
// expert group) → combine. Dropless: every token reaches all of its Kr experts.
//
// Shapes: T tokens, E experts, Kr experts per token, P = T·Kr routing slots, D width.
// expert[T,Kr] chosen experts (descending by selection score, ties → lower index), gate[T,Kr],
// slot_of[T,Kr] = row of the (t,k) slot in the expert-grouped buffers xs/ys[P,D],
// token_of[P] its inverse, offsets[E+1] the first row of each expert's group (the routing plan).
// load[E] = number of slots routed to each expert.
#pragma once

#include <cmath>
#include <vector>

#include "kernels/backend/op_table.h"

namespace parity::kernels::cpu {

// probs = softmax(logits); top-Kr of probs + bias; gates raw or renormalised; losses = {aux, z}.
template <typename T>
void RouteForward(const OpContext& ctx, const RouteShape& s, T* probs, T* lse, int32_t* expert,
                  T* gate, int64_t* load, double* losses, const T* logits, const float* bias) {
  const int64_t E = s.experts, K = s.top_k;
  ctx.pool->ParallelFor(s.tokens, 64, [&](int, int64_t b, int64_t e) {
    std::vector<char> taken(E);
    for (int64_t t = b; t < e; ++t) {
      const T* l = logits + t * E;
      T* p = probs + t * E;
      T mx = l[0];
      for (int64_t i = 1; i < E; ++i) mx = std::max(mx, l[i]);
      double sum = 0.0;
      for (int64_t i = 0; i < E; ++i) sum += std::exp(static_cast<double>(l[i] - mx));
      lse[t] = static_cast<T>(mx + std::log(sum));
      for (int64_t i = 0; i < E; ++i) p[i] = static_cast<T>(std::exp(l[i] - lse[t]));
      std::fill(taken.begin(), taken.end(), 0);
      T chosen_sum = 0;
      for (int64_t k = 0; k < K; ++k) {
        int64_t best = -1;
        double best_score = 0.0;
        for (int64_t i = 0; i < E; ++i) {
          if (taken[i]) continue;
          const double score = static_cast<double>(p[i]) + (bias ? bias[i] : 0.0f);
          if (best < 0 || score > best_score) best = i, best_score = score;
        }
        taken[best] = 1;
        expert[t * K + k] = static_cast<int32_t>(best);
        gate[t * K + k] = p[best];
        chosen_sum += p[best];
      }
      if (s.renormalize) {
        for (int64_t k = 0; k < K; ++k) gate[t * K + k] /= chosen_sum;
      }
    }
  });
  // Statistics in one fixed serial order (cheap: T·E).
  std::vector<double> mean_prob(E, 0.0);
  for (int64_t i = 0; i < E; ++i) load[i] = 0;
  double z = 0.0;
  for (int64_t t = 0; t < s.tokens; ++t) {
    for (int64_t k = 0; k < K; ++k) ++load[expert[t * K + k]];
    for (int64_t i = 0; i < E; ++i) mean_prob[i] += probs[t * E + i];
    z += static_cast<double>(lse[t]) * lse[t];
  }
  double aux = 0.0;
  for (int64_t i = 0; i < E; ++i) {
    aux += (static_cast<double>(load[i]) / (s.tokens * K)) * (mean_prob[i] / s.tokens);
  }
  losses[0] = s.aux_weight * E * aux;
  losses[1] = s.z_weight * z / s.tokens;
  ctx.Count(FlopKind::kElementwise, 5.0 * s.tokens * E);
}

// dlogits[T,E] = softmax backward of (gate gradient + aux gradient) + z-loss gradient.
template <typename T>
void RouteBackward(const OpContext& ctx, const RouteShape& s, T* dlogits, const T* dgate,
                   const T* probs, const T* lse, const int32_t* expert, const int64_t* load) {
  const int64_t E = s.experts, K = s.top_k;
  ctx.pool->ParallelFor(s.tokens, 64, [&](int, int64_t b, int64_t e) {
    std::vector<double> dp(E);
    for (int64_t t = b; t < e; ++t) {
      const T* p = probs + t * E;
      // ∂(λ·E·Σ f_i·P_i)/∂p[t,i] = λ·E·f_i/T  (f is a count: no gradient)
      for (int64_t i = 0; i < E; ++i) {
        dp[i] = s.grad_scale * s.aux_weight * E * (static_cast<double>(load[i]) / (s.tokens * K)) /
                s.tokens;
      }
      if (s.renormalize) {
        double psum = 0.0, dot = 0.0;
        for (int64_t k = 0; k < K; ++k) psum += p[expert[t * K + k]];
        for (int64_t k = 0; k < K; ++k) {
          dot += static_cast<double>(dgate[t * K + k]) * p[expert[t * K + k]] / psum;
        }
        for (int64_t k = 0; k < K; ++k) dp[expert[t * K + k]] += (dgate[t * K + k] - dot) / psum;
      } else {
        for (int64_t k = 0; k < K; ++k) dp[expert[t * K + k]] += dgate[t * K + k];
      }
      double pdp = 0.0;
      for (int64_t i = 0; i < E; ++i) pdp += p[i] * dp[i];
      // ∂(λ_z·mean lse²)/∂logit_i = 2·λ_z·lse·p_i/T
      const double zc = s.grad_scale * s.z_weight * 2.0 * lse[t] / s.tokens;
      for (int64_t i = 0; i < E; ++i) {
        dlogits[t * E + i] = static_cast<T>(p[i] * (dp[i] - pdp) + zc * p[i]);
      }
    }
  });
  ctx.Count(FlopKind::kElementwise, 6.0 * s.tokens * E);
}

// Stable counting sort of the P = T·Kr slots by expert. Each pool chunk counts its slots per
// expert; chunk c's cursor for expert e starts after all of expert e's slots in chunks before c,
// so the result is the serial stable sort's whatever the chunking (slots keep (token, k) order).
inline void RoutingPlan(const OpContext& ctx, int64_t t, int64_t k, int64_t e, int64_t* offsets,
                        int32_t* slot_of, int32_t* token_of, const int32_t* expert) {
  const int64_t p = t * k;
  const int chunks = ctx.pool->NumChunks(p, 4096);
  std::vector<int64_t> cursor(static_cast<size_t>(chunks) * e, 0);  // [chunk, expert]
  ctx.pool->ParallelFor(p, 4096, [&](int c, int64_t b, int64_t end) {
    int64_t* count = cursor.data() + c * e;
    for (int64_t i = b; i < end; ++i) ++count[expert[i]];
  });
  offsets[0] = 0;
  int64_t next = 0;
  for (int64_t x = 0; x < e; ++x) {
    for (int c = 0; c < chunks; ++c) {
      const int64_t n = cursor[c * e + x];
      cursor[c * e + x] = next;
      next += n;
    }
    offsets[x + 1] = next;
  }
  ctx.pool->ParallelFor(p, 4096, [&](int c, int64_t b, int64_t end) {
    int64_t* at = cursor.data() + c * e;
    for (int64_t i = b; i < end; ++i) {
      const int64_t slot = at[expert[i]]++;
      slot_of[i] = static_cast<int32_t>(slot);
      token_of[slot] = static_cast<int32_t>(i / k);
    }
  });
}

// Loss-free balancing (docs/domain.md): bias[i] += rate·sign(mean(load) − load[i]). E is small
// (tens): one serial pass, the mean in double as the sum of the integer loads over E.
inline void BiasUpdate(const OpContext&, int64_t e, float* bias, const int64_t* load, double rate) {
  double mean = 0;
  for (int64_t i = 0; i < e; ++i) mean += static_cast<double>(load[i]);
  mean /= static_cast<double>(e);
  for (int64_t i = 0; i < e; ++i) {
    const double d = mean - static_cast<double>(load[i]);
    bias[i] += static_cast<float>(rate * ((d > 0) - (d < 0)));
  }
}

// xs[P,D] = x[token_of[p], :]
template <typename T>
void PermuteForward(const OpContext& ctx, int64_t p, int64_t d, T* xs, const T* x,
                    const int32_t* token_of) {
  ctx.pool->ParallelFor(p, 64, [&](int, int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) std::copy_n(x + token_of[i] * d, d, xs + i * d);
  });
}
// dx[T,D] += Σ_k dxs[slot_of[t,k], :]  (per token, slots in k order)
template <typename T>
void PermuteBackward(const OpContext& ctx, int64_t t, int64_t k, int64_t d, T* dx, const T* dxs,
                     const int32_t* slot_of) {
  ctx.pool->ParallelFor(t, 64, [&](int, int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      for (int64_t j = 0; j < k; ++j) {
        const T* src = dxs + static_cast<int64_t>(slot_of[i * k + j]) * d;
        for (int64_t c = 0; c < d; ++c) dx[i * d + c] += src[c];
      }
    }
  });
  ctx.Count(FlopKind::kElementwise, static_cast<double>(t) * k * d);
}

// y[T,D] += Σ_k gate[t,k]·ys[slot_of[t,k], :]
template <typename T>
void CombineForward(const OpContext& ctx, int64_t t, int64_t k, int64_t d, T* y, const T* ys,
                    const T* gate, const int32_t* slot_of) {
  ctx.pool->ParallelFor(t, 64, [&](int, int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      for (int64_t j = 0; j < k; ++j) {
        const T g = gate[i * k + j];
        const T* src = ys + static_cast<int64_t>(slot_of[i * k + j]) * d;
        for (int64_t c = 0; c < d; ++c) y[i * d + c] += g * src[c];
      }
    }
  });
  ctx.Count(FlopKind::kElementwise, 2.0 * t * k * d);
}
// dys[slot,:] = gate·dy[t,:];  dgate[t,k] = dy[t,:]·ys[slot,:]
template <typename T>
void CombineBackward(const OpContext& ctx, int64_t t, int64_t k, int64_t d, T* dys, T* dgate,
                     const T* dy, const T* ys, const T* gate, const int32_t* slot_of) {
  ctx.pool->ParallelFor(t, 64, [&](int, int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const T* dyi = dy + i * d;
      for (int64_t j = 0; j < k; ++j) {
        const int64_t slot = slot_of[i * k + j];
        const T g = gate[i * k + j];
        T dot = 0;
        for (int64_t c = 0; c < d; ++c) {
          dys[slot * d + c] = g * dyi[c];
          dot += dyi[c] * ys[slot * d + c];
        }
        dgate[i * k + j] = dot;
      }
    }
  });
  ctx.Count(FlopKind::kElementwise, 3.0 * t * k * d);
}

}  // namespace parity::kernels::cpu
