// The MoE chain on the device, mirroring cpu/ops_moe.h and the routing-plan and loss-free bias
// semantics of backend/op_table.h: route (softmax, top-K with bias, ties to the lower index,
// gates, load, aux and z losses), the routing plan (a stable counting sort of the T·K slots by
// expert), permute and combine as gathers, and the bias update. No float atomics anywhere: slot
// counts use integer atomics (exact), every float sum has one thread or a fixed tree per output.
// Permute and combine also have bf16 instances (bf16 x/xs/dx/dxs, ys/dys; fp32 y, dy and gates).
#include <cmath>

#include "core/gpu_limits.h"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/ops.h"

namespace parity::kernels::cuda {
namespace {

constexpr int64_t kMaxExperts = core::kCudaMaxExperts;  // top-K: a 32-bit "taken" mask a lane
constexpr int64_t kStatTokens = 256;  // tokens per partial of the routing statistics
constexpr int64_t kPlanChunk = 1024;  // slots per chunk of the routing plan's counting sort
constexpr int kWarpsPerBlock = kBlock / 32;

unsigned WarpBlocks(int64_t warps) {
  return static_cast<unsigned>((warps + kWarpsPerBlock - 1) / kWarpsPerBlock);
}

// One warp per token: softmax, lse, then K rounds of argmax over untaken experts of p + bias.
__global__ void RouteTokenKernel(RouteShape s, float* probs, float* lse, int32_t* expert,
                                 float* gate, const float* logits, const float* bias) {
  const int64_t t = blockIdx.x * static_cast<int64_t>(kWarpsPerBlock) + threadIdx.x / 32;
  const int lane = threadIdx.x & 31;
  if (t >= s.tokens) return;  // uniform per warp
  const int64_t E = s.experts, K = s.top_k;
  const float* l = logits + t * E;
  float mx = -INFINITY;
  for (int64_t i = lane; i < E; i += 32) mx = fmaxf(mx, l[i]);
  mx = WarpMax(mx);
  double sum = 0.0;
  for (int64_t i = lane; i < E; i += 32) sum += exp(static_cast<double>(l[i] - mx));
  const float lt = static_cast<float>(mx + log(WarpSum(sum)));
  if (lane == 0) lse[t] = lt;
  for (int64_t i = lane; i < E; i += 32) probs[t * E + i] = expf(l[i] - lt);
  uint32_t taken = 0;  // bit m: expert lane + 32·m already chosen
  float chosen_sum = 0.0f;
  for (int64_t k = 0; k < K; ++k) {
    int best = -1;
    double best_score = 0.0;
    for (int64_t i = lane, m = 0; i < E; i += 32, ++m) {
      if (taken & (1u << m)) continue;
      const double score =
          static_cast<double>(expf(l[i] - lt)) + (bias != nullptr ? bias[i] : 0.0f);
      if (best < 0 || score > best_score) best = static_cast<int>(i), best_score = score;
    }
    // Maximum under (score descending, index ascending): exact, so every lane agrees.
    for (int o = 16; o > 0; o >>= 1) {
      const int other = __shfl_xor_sync(0xffffffffu, best, o);
      const double other_score = __shfl_xor_sync(0xffffffffu, best_score, o);
      if (other >= 0 &&
          (best < 0 || other_score > best_score || (other_score == best_score && other < best))) {
        best = other, best_score = other_score;
      }
    }
    if ((best & 31) == lane) taken |= 1u << (best >> 5);
    const float pb = expf(l[best] - lt);
    if (lane == 0) {
      expert[t * K + k] = best;
      gate[t * K + k] = pb;
    }
    chosen_sum += pb;
  }
  if (s.renormalize && lane == 0) {
    for (int64_t k = 0; k < K; ++k) gate[t * K + k] /= chosen_sum;
  }
}

// Per chunk of tokens: Σ probs per expert and Σ lse² (double, token order), slot counts.
__global__ void RouteStatsPartialKernel(RouteShape s, double* psum, int64_t* pcount,
                                        const float* probs, const float* lse,
                                        const int32_t* expert) {
  const int64_t E = s.experts, K = s.top_k, chunk = blockIdx.x;
  const int64_t t0 = chunk * kStatTokens;
  const int64_t t1 = t0 + kStatTokens < s.tokens ? t0 + kStatTokens : s.tokens;
  for (int64_t col = threadIdx.x; col <= E; col += blockDim.x) {
    double acc = 0.0;
    if (col < E) {
      int64_t count = 0;
      for (int64_t t = t0; t < t1; ++t) {
        acc += probs[t * E + col];
        for (int64_t k = 0; k < K; ++k) count += expert[t * K + k] == col;
      }
      pcount[chunk * E + col] = count;
    } else {
      for (int64_t t = t0; t < t1; ++t) acc += static_cast<double>(lse[t]) * lse[t];
    }
    psum[chunk * (E + 1) + col] = acc;
  }
}

// One block: chunk partials in order → load[E], then the losses in one serial pass (as the CPU).
__global__ void RouteStatsFinalKernel(RouteShape s, int64_t chunks, int64_t* load, double* losses,
                                      const double* psum, const int64_t* pcount) {
  __shared__ double sums[kMaxExperts + 1];
  __shared__ int64_t counts[kMaxExperts];
  const int64_t E = s.experts;
  for (int64_t col = threadIdx.x; col <= E; col += blockDim.x) {
    double acc = 0.0;
    int64_t count = 0;
    for (int64_t c = 0; c < chunks; ++c) {
      acc += psum[c * (E + 1) + col];
      if (col < E) count += pcount[c * E + col];
    }
    sums[col] = acc;
    if (col < E) {
      counts[col] = count;
      load[col] = count;
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    double aux = 0.0;
    for (int64_t i = 0; i < E; ++i) {
      aux += (static_cast<double>(counts[i]) / static_cast<double>(s.tokens * s.top_k)) *
             (sums[i] / static_cast<double>(s.tokens));
    }
    losses[0] = s.aux_weight * static_cast<double>(E) * aux;
    losses[1] = s.z_weight * sums[E] / static_cast<double>(s.tokens);
  }
}

// d(loss)/d p[t,i] before the softmax backward: the aux term plus the gate gradient.
__device__ __forceinline__ double RouterDp(const RouteShape& s, int64_t t, int64_t i,
                                           const float* dgate, const int32_t* expert,
                                           const int64_t* load, double psum, double dot) {
  const int64_t E = s.experts, K = s.top_k;
  double dp = s.grad_scale * s.aux_weight * static_cast<double>(E) *
              (static_cast<double>(load[i]) / static_cast<double>(s.tokens * K)) /
              static_cast<double>(s.tokens);
  for (int64_t k = 0; k < K; ++k) {
    if (expert[t * K + k] != i) continue;
    const float dg = dgate[t * K + k];
    dp += s.renormalize ? (dg - dot) / psum : static_cast<double>(dg);
  }
  return dp;
}

// One warp per token, as cpu::RouteBackward.
__global__ void RouteBackwardKernel(RouteShape s, float* dlogits, const float* dgate,
                                    const float* probs, const float* lse, const int32_t* expert,
                                    const int64_t* load) {
  const int64_t t = blockIdx.x * static_cast<int64_t>(kWarpsPerBlock) + threadIdx.x / 32;
  const int lane = threadIdx.x & 31;
  if (t >= s.tokens) return;
  const int64_t E = s.experts, K = s.top_k;
  const float* p = probs + t * E;
  double psum = 0.0, dot = 0.0;
  if (s.renormalize) {
    for (int64_t k = 0; k < K; ++k) psum += p[expert[t * K + k]];
    for (int64_t k = 0; k < K; ++k) {
      dot += static_cast<double>(dgate[t * K + k]) * p[expert[t * K + k]] / psum;
    }
  }
  double pdp = 0.0;
  for (int64_t i = lane; i < E; i += 32) {
    pdp += p[i] * RouterDp(s, t, i, dgate, expert, load, psum, dot);
  }
  pdp = WarpSum(pdp);
  const double zc = s.grad_scale * s.z_weight * 2.0 * lse[t] / static_cast<double>(s.tokens);
  for (int64_t i = lane; i < E; i += 32) {
    const double dp = RouterDp(s, t, i, dgate, expert, load, psum, dot);
    dlogits[t * E + i] = static_cast<float>(p[i] * (dp - pdp) + zc * p[i]);
  }
}

// Routing plan pass 1: per chunk of slots, the number of slots of each expert.
__global__ void PlanCountKernel(int64_t p, int64_t E, int64_t* chunk_count, const int32_t* expert) {
  __shared__ int counts[kMaxExperts];
  const int64_t c = blockIdx.x, s0 = c * kPlanChunk;
  const int64_t s1 = s0 + kPlanChunk < p ? s0 + kPlanChunk : p;
  for (int64_t e = threadIdx.x; e < E; e += blockDim.x) counts[e] = 0;
  __syncthreads();
  for (int64_t i = s0 + threadIdx.x; i < s1; i += blockDim.x) atomicAdd(&counts[expert[i]], 1);
  __syncthreads();
  for (int64_t e = threadIdx.x; e < E; e += blockDim.x) chunk_count[c * E + e] = counts[e];
}

// Pass 2 (one block): offsets[E+1], and base[c, e] = first slot of chunk c's expert-e slots.
__global__ void PlanScanKernel(int64_t chunks, int64_t E, int64_t* offsets, int64_t* base,
                               const int64_t* chunk_count) {
  __shared__ int64_t start[kMaxExperts + 1];
  for (int64_t e = threadIdx.x; e < E; e += blockDim.x) {
    int64_t run = 0;
    for (int64_t c = 0; c < chunks; ++c) {
      base[c * E + e] = run;
      run += chunk_count[c * E + e];
    }
    start[e + 1] = run;  // expert e's total, turned into an offset below
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    start[0] = 0;
    for (int64_t e = 0; e < E; ++e) start[e + 1] += start[e];
  }
  __syncthreads();
  for (int64_t e = threadIdx.x; e <= E; e += blockDim.x) offsets[e] = start[e];
  for (int64_t e = threadIdx.x; e < E; e += blockDim.x) {
    for (int64_t c = 0; c < chunks; ++c) base[c * E + e] += start[e];
  }
}

// Pass 3: one warp per chunk walks its slots 32 at a time in order; lanes with the same expert
// take consecutive slots by lane rank (__match_any_sync), so the sort is stable.
__global__ void PlanScatterKernel(int64_t p, int64_t k, int64_t E, int32_t* slot_of,
                                  int32_t* token_of, const int64_t* base, const int32_t* expert) {
  __shared__ int64_t running[kMaxExperts];
  const int lane = threadIdx.x;
  const int64_t c = blockIdx.x, s0 = c * kPlanChunk;
  const int64_t s1 = s0 + kPlanChunk < p ? s0 + kPlanChunk : p;
  for (int64_t e = lane; e < E; e += 32) running[e] = base[c * E + e];
  __syncwarp();
  for (int64_t g = s0; g < s1; g += 32) {
    const int64_t i = g + lane;
    const bool valid = i < s1;
    const int e = valid ? expert[i] : -1;
    const unsigned same = __match_any_sync(0xffffffffu, e);
    const int rank = __popc(same & ((1u << lane) - 1u));
    const int64_t slot = valid ? running[e] + rank : 0;
    __syncwarp();  // every lane has read running[e] before the group's last lane advances it
    if (valid && lane == 31 - __clz(same)) running[e] += __popc(same);
    __syncwarp();
    if (valid) {
      slot_of[i] = static_cast<int32_t>(slot);
      token_of[slot] = static_cast<int32_t>(i / k);
    }
  }
}

__global__ void BiasUpdateKernel(int64_t E, float* bias, const int64_t* load, double rate) {
  __shared__ double mean;
  if (threadIdx.x == 0) {
    double m = 0.0;
    for (int64_t e = 0; e < E; ++e) m += static_cast<double>(load[e]);
    mean = m / static_cast<double>(E);
  }
  __syncthreads();
  for (int64_t e = threadIdx.x; e < E; e += blockDim.x) {
    const double d = mean - static_cast<double>(load[e]);
    bias[e] += static_cast<float>(rate * ((d > 0) - (d < 0)));
  }
}

// T (xs, x, dx, dxs; ys, dys in combine): float, or Bf16 in the bf16 mode, where values are
// widened on load and rounded once on store; a copy of bf16 values is exact.
template <typename T>
__global__ void PermuteForwardKernel(int64_t p, int64_t d, T* xs, const T* x,
                                     const int32_t* token_of) {
  const int64_t n = p * d;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < n;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = idx / d;
    xs[idx] = x[static_cast<int64_t>(token_of[row]) * d + (idx - row * d)];
  }
}

// dx[t,c] += Σ_k dxs[slot_of[t,k], c], k in order (a gather: one writer per element). bf16:
// dx = bf16(((float(dx) + dxs_0) + dxs_1) + …), the CPU's float additions, rounded once.
template <typename T>
__global__ void PermuteBackwardKernel(int64_t t, int64_t k, int64_t d, T* dx, const T* dxs,
                                      const int32_t* slot_of) {
  const int64_t n = t * d;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < n;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = idx / d, col = idx - row * d;
    float acc = Load(dx, idx);
    for (int64_t j = 0; j < k; ++j)
      acc += Load(dxs, static_cast<int64_t>(slot_of[row * k + j]) * d + col);
    Store(dx, idx, acc);
  }
}

// y[t,c] += Σ_k gate·ys[slot, c]; explicit round-to-nearest multiply then add, as the CPU does.
// y and gate are fp32 in both modes (y is the residual stream).
template <typename T>
__global__ void CombineForwardKernel(int64_t t, int64_t k, int64_t d, float* y, const T* ys,
                                     const float* gate, const int32_t* slot_of) {
  const int64_t n = t * d;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < n;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = idx / d, col = idx - row * d;
    float acc = y[idx];
    for (int64_t j = 0; j < k; ++j) {
      const float src = Load(ys, static_cast<int64_t>(slot_of[row * k + j]) * d + col);
      acc = __fadd_rn(acc, __fmul_rn(gate[row * k + j], src));
    }
    y[idx] = acc;
  }
}

// One warp per (t, k): dys[slot,:] = gate·dy[t,:] (each slot has exactly one (t, k)), and
// dgate[t,k] = dy[t,:]·ys[slot,:]. dy, gate and dgate are fp32 in both modes.
template <typename T>
__global__ void CombineBackwardKernel(int64_t t, int64_t k, int64_t d, T* dys, float* dgate,
                                      const float* dy, const T* ys, const float* gate,
                                      const int32_t* slot_of) {
  const int64_t pair = blockIdx.x * static_cast<int64_t>(kWarpsPerBlock) + threadIdx.x / 32;
  const int lane = threadIdx.x & 31;
  if (pair >= t * k) return;
  const int64_t row = pair / k, slot = slot_of[pair];
  const float g = gate[pair];
  const float* dyi = dy + row * d;
  double dot = 0.0;
  for (int64_t c = lane; c < d; c += 32) {
    Store(dys, slot * d + c, g * dyi[c]);
    dot += dyi[c] * Load(ys, slot * d + c);
  }
  dot = WarpSum(dot);
  if (lane == 0) dgate[pair] = static_cast<float>(dot);
}

void CheckExperts(int64_t e) {
  if (e <= 0 || e > kMaxExperts) {
    Die("moe", "the CUDA backend supports 1..1024 experts", __FILE__, __LINE__);
  }
}

}  // namespace

void RouteForward(const OpContext& ctx, const RouteShape& s, float* probs, float* lse,
                  int32_t* expert, float* gate, int64_t* load, double* losses, const float* logits,
                  const float* bias) {
  CheckExperts(s.experts);
  const cudaStream_t stream = StreamOf(ctx);
  if (s.tokens > 0) {
    RouteTokenKernel<<<WarpBlocks(s.tokens), kBlock, 0, stream>>>(s, probs, lse, expert, gate,
                                                                  logits, bias);
    PARITY_CUDA_LAUNCHED();
  }
  const int64_t chunks = (s.tokens + kStatTokens - 1) / kStatTokens;
  Scratch<double> psum(stream, chunks * (s.experts + 1));
  Scratch<int64_t> pcount(stream, chunks * s.experts);
  if (chunks > 0) {
    RouteStatsPartialKernel<<<static_cast<unsigned>(chunks), kBlock, 0, stream>>>(
        s, psum.get(), pcount.get(), probs, lse, expert);
    PARITY_CUDA_LAUNCHED();
  }
  RouteStatsFinalKernel<<<1, kBlock, 0, stream>>>(s, chunks, load, losses, psum.get(),
                                                  pcount.get());
  PARITY_CUDA_LAUNCHED();
  ctx.Count(FlopKind::kElementwise, 5.0 * s.tokens * s.experts);
}

void RouteBackward(const OpContext& ctx, const RouteShape& s, float* dlogits, const float* dgate,
                   const float* probs, const float* lse, const int32_t* expert,
                   const int64_t* load) {
  if (s.tokens > 0) {
    RouteBackwardKernel<<<WarpBlocks(s.tokens), kBlock, 0, StreamOf(ctx)>>>(
        s, dlogits, dgate, probs, lse, expert, load);
    PARITY_CUDA_LAUNCHED();
  }
  ctx.Count(FlopKind::kElementwise, 6.0 * s.tokens * s.experts);
}

void RoutingPlan(const OpContext& ctx, int64_t t, int64_t k, int64_t e, int64_t* offsets,
                 int32_t* slot_of, int32_t* token_of, const int32_t* expert) {
  CheckExperts(e);
  const cudaStream_t stream = StreamOf(ctx);
  const int64_t p = t * k, chunks = (p + kPlanChunk - 1) / kPlanChunk;
  Scratch<int64_t> chunk_count(stream, chunks * e), base(stream, chunks * e);
  if (chunks > 0) {
    PlanCountKernel<<<static_cast<unsigned>(chunks), kBlock, 0, stream>>>(p, e, chunk_count.get(),
                                                                          expert);
    PARITY_CUDA_LAUNCHED();
  }
  PlanScanKernel<<<1, kBlock, 0, stream>>>(chunks, e, offsets, base.get(), chunk_count.get());
  PARITY_CUDA_LAUNCHED();
  if (chunks > 0) {
    PlanScatterKernel<<<static_cast<unsigned>(chunks), 32, 0, stream>>>(p, k, e, slot_of, token_of,
                                                                        base.get(), expert);
    PARITY_CUDA_LAUNCHED();
  }
}

void BiasUpdate(const OpContext& ctx, int64_t e, float* bias, const int64_t* load, double rate) {
  if (e <= 0) return;
  BiasUpdateKernel<<<1, kBlock, 0, StreamOf(ctx)>>>(e, bias, load, rate);
  PARITY_CUDA_LAUNCHED();
}

namespace {

template <typename T>
void PermuteForwardImpl(const OpContext& ctx, int64_t p, int64_t d, T* xs, const T* x,
                        const int32_t* token_of) {
  if (p * d == 0) return;
  PermuteForwardKernel<<<GridFor(p * d), kBlock, 0, StreamOf(ctx)>>>(p, d, xs, x, token_of);
  PARITY_CUDA_LAUNCHED();
}

template <typename T>
void PermuteBackwardImpl(const OpContext& ctx, int64_t t, int64_t k, int64_t d, T* dx, const T* dxs,
                         const int32_t* slot_of) {
  if (t * d > 0) {
    PermuteBackwardKernel<<<GridFor(t * d), kBlock, 0, StreamOf(ctx)>>>(t, k, d, dx, dxs, slot_of);
    PARITY_CUDA_LAUNCHED();
  }
  ctx.Count(FlopKind::kElementwise, static_cast<double>(t) * k * d);
}

template <typename T>
void CombineForwardImpl(const OpContext& ctx, int64_t t, int64_t k, int64_t d, float* y,
                        const T* ys, const float* gate, const int32_t* slot_of) {
  if (t * d > 0) {
    CombineForwardKernel<<<GridFor(t * d), kBlock, 0, StreamOf(ctx)>>>(t, k, d, y, ys, gate,
                                                                       slot_of);
    PARITY_CUDA_LAUNCHED();
  }
  ctx.Count(FlopKind::kElementwise, 2.0 * t * k * d);
}

template <typename T>
void CombineBackwardImpl(const OpContext& ctx, int64_t t, int64_t k, int64_t d, T* dys,
                         float* dgate, const float* dy, const T* ys, const float* gate,
                         const int32_t* slot_of) {
  if (t * k > 0) {
    CombineBackwardKernel<<<WarpBlocks(t * k), kBlock, 0, StreamOf(ctx)>>>(t, k, d, dys, dgate, dy,
                                                                           ys, gate, slot_of);
    PARITY_CUDA_LAUNCHED();
  }
  ctx.Count(FlopKind::kElementwise, 3.0 * t * k * d);
}

}  // namespace

void PermuteForward(const OpContext& ctx, int64_t p, int64_t d, float* xs, const float* x,
                    const int32_t* token_of) {
  PermuteForwardImpl(ctx, p, d, xs, x, token_of);
}
void PermuteBackward(const OpContext& ctx, int64_t t, int64_t k, int64_t d, float* dx,
                     const float* dxs, const int32_t* slot_of) {
  PermuteBackwardImpl(ctx, t, k, d, dx, dxs, slot_of);
}
void CombineForward(const OpContext& ctx, int64_t t, int64_t k, int64_t d, float* y,
                    const float* ys, const float* gate, const int32_t* slot_of) {
  CombineForwardImpl(ctx, t, k, d, y, ys, gate, slot_of);
}
void CombineBackward(const OpContext& ctx, int64_t t, int64_t k, int64_t d, float* dys,
                     float* dgate, const float* dy, const float* ys, const float* gate,
                     const int32_t* slot_of) {
  CombineBackwardImpl(ctx, t, k, d, dys, dgate, dy, ys, gate, slot_of);
}

// ---- the bf16 mode (op_table_bf16.h): xs/x/dx/dxs, ys/dys bf16; y, dy, gate, dgate fp32 ------
void PermuteForward(const OpContext& ctx, int64_t p, int64_t d, Bf16* xs, const Bf16* x,
                    const int32_t* token_of) {
  PermuteForwardImpl(ctx, p, d, xs, x, token_of);
}
void PermuteBackward(const OpContext& ctx, int64_t t, int64_t k, int64_t d, Bf16* dx,
                     const Bf16* dxs, const int32_t* slot_of) {
  PermuteBackwardImpl(ctx, t, k, d, dx, dxs, slot_of);
}
void CombineForward(const OpContext& ctx, int64_t t, int64_t k, int64_t d, float* y, const Bf16* ys,
                    const float* gate, const int32_t* slot_of) {
  CombineForwardImpl(ctx, t, k, d, y, ys, gate, slot_of);
}
void CombineBackward(const OpContext& ctx, int64_t t, int64_t k, int64_t d, Bf16* dys, float* dgate,
                     const float* dy, const Bf16* ys, const float* gate, const int32_t* slot_of) {
  CombineBackwardImpl(ctx, t, k, d, dys, dgate, dy, ys, gate, slot_of);
}

}  // namespace parity::kernels::cuda
