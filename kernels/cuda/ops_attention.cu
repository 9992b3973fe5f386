// Rotary positions and causal grouped-query attention in fp32, mirroring cpu/ops_attention.h. The
// bf16 mode's instances (T = Bf16: qkv, out, dout, dqkv) widen tiles into the same float shared
// memory and round only their stores; lse stays fp32.
//
// Attention is a tiled FlashAttention-2 style kernel of our own: a block owns 32 query rows of one
// (sequence, head), streams 32-key tiles through shared memory with an online softmax, and saves
// only lse[B,H,S]. The backward recomputes probabilities from q, k and lse, with dq in one kernel
// (a block per query tile, looping over keys) and dk/dv in another (a block per key tile and kv
// head, looping over the group's heads and the queries at or after the tile), so every output
// element has exactly one writer and no atomics are needed.
//
// Inside a block of 256 threads, score-tile element (r, c) belongs to thread r·8 + c % 8, and
// output element e = row·Dh + d (row < 32, d < Dh) to thread e % 256. Shared rows are padded to
// Dh + 1 floats so the row-wise dot products hit distinct banks.
#include <cmath>

#include "core/gpu_limits.h"
#include "kernels/cuda/cudnn_attention.h"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/flash_tc_launch.h"
#include "kernels/cuda/ops.h"

namespace parity::kernels::cuda {
namespace {

constexpr int kTile = 32;                            // query rows and key rows per tile
constexpr int kThreads = 256;                        // threads per attention block
constexpr int kRowThreads = kThreads / kTile;        // threads sharing a score-tile row (8)
constexpr int kColsPerThread = kTile / kRowThreads;  // score columns per thread (4)
constexpr int kScoreLd = kTile + 1;                  // padded score-tile row

int64_t QkvWidth(const AttentionShape& s) { return (s.heads + 2 * s.kv_heads) * s.head_dim; }

// ---- RoPE --------------------------------------------------------------------------------------
// table[p, j] = (cos, sign·sin) of p·θ^(−2j/Dh), in double as on the CPU, then rounded to float.
__global__ void RopeTableKernel(int64_t seq, int64_t half, int64_t head_dim, double theta,
                                double sign, float2* table) {
  const int64_t n = seq * half;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < n;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t p = idx / half, j = idx - p * half;
    const double ang = static_cast<double>(p) *
                       pow(theta, -2.0 * static_cast<double>(j) / static_cast<double>(head_dim));
    table[idx] = make_float2(static_cast<float>(cos(ang)), static_cast<float>(sign * sin(ang)));
  }
}

// One thread per rotated pair (token, head among the H + Hkv q/k heads, j < Dh/2). T: float, or
// Bf16 in the bf16 mode (rotated in float, rounded once on store).
template <typename T>
__global__ void RopeApplyKernel(int64_t tokens, int64_t seq, int64_t rotated, int64_t half,
                                int64_t head_dim, int64_t ld, T* qkv, const float2* table) {
  const int64_t n = tokens * rotated * half;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < n;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t j = idx % half, rest = idx / half;
    const int64_t h = rest % rotated, tok = rest / rotated, p = tok % seq;
    T* v = qkv + tok * ld + h * head_dim;
    const float2 cs = table[p * half + j];
    const float x0 = Load(v, j), x1 = Load(v, j + half);
    Store(v, j, x0 * cs.x - x1 * cs.y);
    Store(v, j + half, x0 * cs.y + x1 * cs.x);
  }
}

template <typename T>
void RopeRotate(const OpContext& ctx, const AttentionShape& s, T* qkv, double sign) {
  if (s.positions != Positions::kRotary) return;
  const int64_t half = s.head_dim / 2, rotated = s.heads + s.kv_heads, tokens = s.batch * s.seq;
  if (tokens > 0 && half > 0) {
    const cudaStream_t stream = StreamOf(ctx);
    Scratch<float2> table(stream, s.seq * half);
    RopeTableKernel<<<GridFor(s.seq * half), kBlock, 0, stream>>>(s.seq, half, s.head_dim,
                                                                  s.rope_theta, sign, table.get());
    PARITY_CUDA_LAUNCHED();
    RopeApplyKernel<<<GridFor(tokens * rotated * half), kBlock, 0, stream>>>(
        tokens, s.seq, rotated, half, s.head_dim, QkvWidth(s), qkv, table.get());
    PARITY_CUDA_LAUNCHED();
  }
  ctx.Count(FlopKind::kElementwise, 6.0 * s.batch * s.seq * rotated * half);
}

// ---- attention ---------------------------------------------------------------------------------
struct AttnArgs {
  int64_t seq, heads, kv_heads, dh, ld, ldo;
  float scale;
  bool alibi;
};

// ALiBi slope of head h: 2^(−8(h+1)/H), as cpu::AlibiSlope.
__device__ __forceinline__ double Slope(const AttnArgs& a, int64_t h) {
  return a.alibi ? pow(2.0, -8.0 * static_cast<double>(h + 1) / static_cast<double>(a.heads)) : 0.0;
}

// dst[r, 0:dh] = src[r·ld + 0:dh] for r < valid, zero for valid ≤ r < kTile. Shared memory is
// always float: a bf16 source (T = Bf16) is widened on the way in.
template <typename T>
__device__ __forceinline__ void LoadRows(float* dst, int lds, const T* src, int64_t ld, int valid,
                                         int dh) {
  for (int e = threadIdx.x; e < kTile * dh; e += kThreads) {
    const int r = e / dh, c = e - r * dh;
    dst[r * lds + c] = r < valid ? Load(src, r * ld + c) : 0.0f;
  }
}
// v[r] = src[r] for r < valid, else 0.
__device__ __forceinline__ void LoadVec(float* dst, const float* src, int valid) {
  if (threadIdx.x < kTile)
    dst[threadIdx.x] = static_cast<int>(threadIdx.x) < valid ? src[threadIdx.x] : 0.0f;
}

__device__ __forceinline__ float Dot(const float* a, const float* b, int dh) {
  float s = 0.0f;
#pragma unroll 8
  for (int d = 0; d < dh; ++d) s += a[d] * b[d];
  return s;
}

// The masked, scaled score of query i and key j (−∞ above the diagonal), as the CPU computes it.
__device__ __forceinline__ float Score(const AttnArgs& a, double slope, const float* q,
                                       const float* k, int64_t i, int64_t j) {
  if (j > i) return -INFINITY;
  float s = Dot(q, k, static_cast<int>(a.dh)) * a.scale;
  if (a.alibi) s -= static_cast<float>(slope * static_cast<double>(i - j));
  return s;
}

// Reductions over the kRowThreads (8) aligned lanes that share a score-tile row.
__device__ __forceinline__ float RowMax(float v) {
  for (int o = kRowThreads / 2; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float RowSum(float v) {
  for (int o = kRowThreads / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

template <int kMaxDh>
constexpr int kOwn = kMaxDh* kTile / kThreads;  // output elements per thread

// Grid (B·H, query tiles). Shared: q, k, v [kTile][dh+1], p [kTile][kTile+1], alpha/l/m [kTile].
// T (qkv, out): float, or Bf16 in the bf16 mode; lse is always fp32.
template <int kMaxDh, typename T>
__global__ void __launch_bounds__(kThreads)
    AttentionForwardKernel(AttnArgs a, T* out, float* lse, const T* qkv) {
  extern __shared__ float smem[];
  const int dh = static_cast<int>(a.dh), lds = dh + 1;
  float* sq = smem;
  float* sk = sq + kTile * lds;
  float* sv = sk + kTile * lds;
  float* sp = sv + kTile * lds;
  float* salpha = sp + kTile * kScoreLd;
  float* sl = salpha + kTile;
  float* sm = sl + kTile;

  const int64_t bh = blockIdx.x, b = bh / a.heads, h = bh % a.heads;
  const int64_t g = h / (a.heads / a.kv_heads);
  const int64_t q0 = static_cast<int64_t>(blockIdx.y) * kTile;
  const int q_valid = static_cast<int>(a.seq - q0 < kTile ? a.seq - q0 : kTile);
  const T* base = qkv + b * a.seq * a.ld;
  const T* kg = base + (a.heads + g) * a.dh;
  const T* vg = base + (a.heads + a.kv_heads + g) * a.dh;
  LoadRows(sq, lds, base + q0 * a.ld + h * a.dh, a.ld, q_valid, dh);

  const int tid = threadIdx.x, r = tid / kRowThreads, sub = tid % kRowThreads;
  // Rows past the sequence end compute with the last row's mask and are never stored.
  const int64_t i = q0 + r < a.seq ? q0 + r : a.seq - 1;
  const double slope = Slope(a, h);
  float m_run = -INFINITY, l_run = 0.0f;
  float o[kOwn<kMaxDh>];
#pragma unroll
  for (int k = 0; k < kOwn<kMaxDh>; ++k) o[k] = 0.0f;

  const int64_t k_end = q0 + q_valid;  // keys [0, k_end) are visible to some row of the tile
  for (int64_t k0 = 0; k0 < k_end; k0 += kTile) {
    const int k_valid = static_cast<int>(a.seq - k0 < kTile ? a.seq - k0 : kTile);
    __syncthreads();  // the previous tile's sk/sv/sp/salpha are no longer read
    LoadRows(sk, lds, kg + k0 * a.ld, a.ld, k_valid, dh);
    LoadRows(sv, lds, vg + k0 * a.ld, a.ld, k_valid, dh);
    __syncthreads();
    float s[kColsPerThread];
    float tile_max = -INFINITY;
#pragma unroll
    for (int c4 = 0; c4 < kColsPerThread; ++c4) {
      const int c = sub + kRowThreads * c4;
      s[c4] = Score(a, slope, sq + r * lds, sk + c * lds, i, k0 + c);
      tile_max = fmaxf(tile_max, s[c4]);
    }
    // Key 0 is in the first tile and visible to every row, so m_new is finite from then on.
    const float m_new = fmaxf(m_run, RowMax(tile_max));
    float psum = 0.0f;
#pragma unroll
    for (int c4 = 0; c4 < kColsPerThread; ++c4) {
      const float p = expf(s[c4] - m_new);  // exp(−∞) = 0 for masked keys
      sp[r * kScoreLd + sub + kRowThreads * c4] = p;
      psum += p;
    }
    const float alpha = expf(m_run - m_new);  // 0 on the first tile
    l_run = l_run * alpha + RowSum(psum);
    m_run = m_new;
    if (sub == 0) salpha[r] = alpha;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kOwn<kMaxDh>; ++k) {
      const int e = tid + k * kThreads;
      if (e < kTile * dh) {
        const int row = e / dh, d = e - row * dh;
        float acc = o[k] * salpha[row];
        for (int c = 0; c < kTile; ++c) acc += sp[row * kScoreLd + c] * sv[c * lds + d];
        o[k] = acc;
      }
    }
  }
  if (sub == 0) {
    sl[r] = l_run;
    sm[r] = m_run;
  }
  __syncthreads();
#pragma unroll
  for (int k = 0; k < kOwn<kMaxDh>; ++k) {
    const int e = tid + k * kThreads;
    if (e < kTile * dh) {
      const int row = e / dh, d = e - row * dh;
      if (row < q_valid) Store(out, (b * a.seq + q0 + row) * a.ldo + h * a.dh + d, o[k] / sl[row]);
    }
  }
  if (tid < q_valid) lse[bh * a.seq + q0 + tid] = sm[tid] + logf(sl[tid]);
}

// delta[b,h,i] = Σ_d dout·out (= Σ_j p·dp, the softmax-backward row term). One warp per row.
template <typename T>
__global__ void AttentionDeltaKernel(AttnArgs a, int64_t rows, float* delta, const T* dout,
                                     const T* out) {
  const int64_t row = blockIdx.x * static_cast<int64_t>(kBlock / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x & 31;
  if (row >= rows) return;  // uniform per warp
  const int64_t bh = row / a.seq, i = row % a.seq, b = bh / a.heads, h = bh % a.heads;
  const int64_t off = (b * a.seq + i) * a.ldo + h * a.dh;
  double acc = 0.0;
  for (int64_t d = lane; d < a.dh; d += 32) acc += Load(dout, off + d) * Load(out, off + d);
  acc = WarpSum(acc);
  if (lane == 0) delta[row] = static_cast<float>(acc);
}

// dq for one query tile: Σ over visible keys of ds·k, ds = p·(dp − delta)·scale.
// Shared: q, dout, k, v [kTile][dh+1], ds [kTile][kTile+1], lse/delta [kTile].
template <int kMaxDh, typename T>
__global__ void __launch_bounds__(kThreads)
    AttentionDqKernel(AttnArgs a, T* dqkv, const T* dout, const float* lse, const float* delta,
                      const T* qkv) {
  extern __shared__ float smem[];
  const int dh = static_cast<int>(a.dh), lds = dh + 1;
  float* sq = smem;
  float* sdo = sq + kTile * lds;
  float* sk = sdo + kTile * lds;
  float* sv = sk + kTile * lds;
  float* sds = sv + kTile * lds;
  float* slse = sds + kTile * kScoreLd;
  float* sdelta = slse + kTile;

  const int64_t bh = blockIdx.x, b = bh / a.heads, h = bh % a.heads;
  const int64_t g = h / (a.heads / a.kv_heads);
  const int64_t q0 = static_cast<int64_t>(blockIdx.y) * kTile;
  const int q_valid = static_cast<int>(a.seq - q0 < kTile ? a.seq - q0 : kTile);
  const T* base = qkv + b * a.seq * a.ld;
  const T* kg = base + (a.heads + g) * a.dh;
  const T* vg = base + (a.heads + a.kv_heads + g) * a.dh;
  LoadRows(sq, lds, base + q0 * a.ld + h * a.dh, a.ld, q_valid, dh);
  LoadRows(sdo, lds, dout + (b * a.seq + q0) * a.ldo + h * a.dh, a.ldo, q_valid, dh);
  LoadVec(slse, lse + bh * a.seq + q0, q_valid);
  LoadVec(sdelta, delta + bh * a.seq + q0, q_valid);

  const int tid = threadIdx.x, r = tid / kRowThreads, sub = tid % kRowThreads;
  const int64_t i = q0 + r;
  const bool row_valid = r < q_valid;
  const double slope = Slope(a, h);
  float dq[kOwn<kMaxDh>];
#pragma unroll
  for (int k = 0; k < kOwn<kMaxDh>; ++k) dq[k] = 0.0f;

  const int64_t k_end = q0 + q_valid;
  for (int64_t k0 = 0; k0 < k_end; k0 += kTile) {
    const int k_valid = static_cast<int>(a.seq - k0 < kTile ? a.seq - k0 : kTile);
    __syncthreads();  // q/dout/lse/delta are visible; the previous sk/sv/sds are no longer read
    LoadRows(sk, lds, kg + k0 * a.ld, a.ld, k_valid, dh);
    LoadRows(sv, lds, vg + k0 * a.ld, a.ld, k_valid, dh);
    __syncthreads();
#pragma unroll
    for (int c4 = 0; c4 < kColsPerThread; ++c4) {
      const int c = sub + kRowThreads * c4;
      const int64_t j = k0 + c;
      float ds = 0.0f;
      if (row_valid && j <= i) {
        const float p = expf(Score(a, slope, sq + r * lds, sk + c * lds, i, j) - slse[r]);
        const float dp = Dot(sdo + r * lds, sv + c * lds, dh);
        ds = p * (dp - sdelta[r]) * a.scale;
      }
      sds[r * kScoreLd + c] = ds;
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kOwn<kMaxDh>; ++k) {
      const int e = tid + k * kThreads;
      if (e < kTile * dh) {
        const int row = e / dh, d = e - row * dh;
        float acc = dq[k];
        for (int c = 0; c < kTile; ++c) acc += sds[row * kScoreLd + c] * sk[c * lds + d];
        dq[k] = acc;
      }
    }
  }
#pragma unroll
  for (int k = 0; k < kOwn<kMaxDh>; ++k) {
    const int e = tid + k * kThreads;
    if (e < kTile * dh) {
      const int row = e / dh, d = e - row * dh;
      if (row < q_valid) Store(dqkv, (b * a.seq + q0 + row) * a.ld + h * a.dh + d, dq[k]);
    }
  }
}

// dk, dv for one key tile of kv head g: Σ over the group's heads and the queries i ≥ j of
// ds·q and p·dout. Grid (B·Hkv, key tiles).
// Shared: k, v, q, dout [kTile][dh+1], p, ds [kTile][kTile+1], lse/delta [kTile].
template <int kMaxDh, typename T>
__global__ void __launch_bounds__(kThreads)
    AttentionDkDvKernel(AttnArgs a, T* dqkv, const T* dout, const float* lse, const float* delta,
                        const T* qkv) {
  extern __shared__ float smem[];
  const int dh = static_cast<int>(a.dh), lds = dh + 1;
  float* sk = smem;
  float* sv = sk + kTile * lds;
  float* sq = sv + kTile * lds;
  float* sdo = sq + kTile * lds;
  float* sp = sdo + kTile * lds;
  float* sds = sp + kTile * kScoreLd;
  float* slse = sds + kTile * kScoreLd;
  float* sdelta = slse + kTile;

  const int64_t bg = blockIdx.x, b = bg / a.kv_heads, g = bg % a.kv_heads;
  const int64_t group = a.heads / a.kv_heads;
  const int64_t k0 = static_cast<int64_t>(blockIdx.y) * kTile;
  const int k_valid = static_cast<int>(a.seq - k0 < kTile ? a.seq - k0 : kTile);
  const T* base = qkv + b * a.seq * a.ld;
  LoadRows(sk, lds, base + k0 * a.ld + (a.heads + g) * a.dh, a.ld, k_valid, dh);
  LoadRows(sv, lds, base + k0 * a.ld + (a.heads + a.kv_heads + g) * a.dh, a.ld, k_valid, dh);

  const int tid = threadIdx.x, r = tid / kRowThreads, sub = tid % kRowThreads;
  float dk[kOwn<kMaxDh>], dv[kOwn<kMaxDh>];
#pragma unroll
  for (int k = 0; k < kOwn<kMaxDh>; ++k) dk[k] = dv[k] = 0.0f;

  for (int64_t h = g * group; h < (g + 1) * group; ++h) {
    const int64_t bh = b * a.heads + h;
    const double slope = Slope(a, h);
    for (int64_t q0 = k0; q0 < a.seq; q0 += kTile) {  // queries before k0 see none of these keys
      const int q_valid = static_cast<int>(a.seq - q0 < kTile ? a.seq - q0 : kTile);
      __syncthreads();  // sk/sv are visible; the previous sq/sdo/sp/sds/lse/delta are not read
      LoadRows(sq, lds, base + q0 * a.ld + h * a.dh, a.ld, q_valid, dh);
      LoadRows(sdo, lds, dout + (b * a.seq + q0) * a.ldo + h * a.dh, a.ldo, q_valid, dh);
      LoadVec(slse, lse + bh * a.seq + q0, q_valid);
      LoadVec(sdelta, delta + bh * a.seq + q0, q_valid);
      __syncthreads();
      const int64_t i = q0 + r;
#pragma unroll
      for (int c4 = 0; c4 < kColsPerThread; ++c4) {
        const int c = sub + kRowThreads * c4;
        const int64_t j = k0 + c;
        float p = 0.0f, ds = 0.0f;
        if (r < q_valid && j <= i) {
          p = expf(Score(a, slope, sq + r * lds, sk + c * lds, i, j) - slse[r]);
          const float dp = Dot(sdo + r * lds, sv + c * lds, dh);
          ds = p * (dp - sdelta[r]) * a.scale;
        }
        sp[r * kScoreLd + c] = p;
        sds[r * kScoreLd + c] = ds;
      }
      __syncthreads();
#pragma unroll
      for (int k = 0; k < kOwn<kMaxDh>; ++k) {
        const int e = tid + k * kThreads;
        if (e < kTile * dh) {
          const int col = e / dh, d = e - col * dh;
          float acc_k = dk[k], acc_v = dv[k];
          for (int rr = 0; rr < kTile; ++rr) {
            acc_v += sp[rr * kScoreLd + col] * sdo[rr * lds + d];
            acc_k += sds[rr * kScoreLd + col] * sq[rr * lds + d];
          }
          dk[k] = acc_k;
          dv[k] = acc_v;
        }
      }
    }
  }
#pragma unroll
  for (int k = 0; k < kOwn<kMaxDh>; ++k) {
    const int e = tid + k * kThreads;
    if (e < kTile * dh) {
      const int col = e / dh, d = e - col * dh;
      if (col < k_valid) {
        T* row = dqkv + (b * a.seq + k0 + col) * a.ld;
        Store(row, (a.heads + g) * a.dh + d, dk[k]);
        Store(row, (a.heads + a.kv_heads + g) * a.dh + d, dv[k]);
      }
    }
  }
}

AttnArgs MakeArgs(const AttentionShape& s) {
  if (s.kv_heads <= 0 || s.heads % s.kv_heads != 0) {
    Die("attention", "heads must be a positive multiple of kv_heads", __FILE__, __LINE__);
  }
  return AttnArgs{.seq = s.seq,
                  .heads = s.heads,
                  .kv_heads = s.kv_heads,
                  .dh = s.head_dim,
                  .ld = QkvWidth(s),
                  .ldo = s.heads * s.head_dim,
                  .scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(s.head_dim))),
                  .alibi = s.positions == Positions::kAlibi};
}

size_t ForwardSmem(int64_t dh) {
  return sizeof(float) * (3 * kTile * (dh + 1) + kTile * kScoreLd + 3 * kTile);
}
size_t DqSmem(int64_t dh) {
  return sizeof(float) * (4 * kTile * (dh + 1) + kTile * kScoreLd + 2 * kTile);
}
size_t DkDvSmem(int64_t dh) {
  return sizeof(float) * (4 * kTile * (dh + 1) + 2 * kTile * kScoreLd + 2 * kTile);
}

template <typename Kernel, typename... Args>
void LaunchTiled(Kernel kernel, dim3 grid, size_t smem, cudaStream_t stream, Args... args) {
  // Above 48 KiB of dynamic shared memory a kernel must opt in (H100/H200 allow 227 KiB).
  PARITY_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(smem)));
  kernel<<<grid, kThreads, smem, stream>>>(args...);
  PARITY_CUDA_LAUNCHED();
}

// Calls fn.template operator()<kMaxDh>() with the smallest supported kMaxDh ≥ dh.
template <typename Fn>
void DispatchHeadDim(int64_t dh, Fn&& fn) {
  if (dh <= 32) return fn.template operator()<32>();
  if (dh <= 64) return fn.template operator()<64>();
  if (dh <= 128) return fn.template operator()<128>();
  static_assert(core::kCudaMaxHeadDim == 256, "the largest head dimension dispatched here");
  if (dh <= 256) return fn.template operator()<256>();
  Die("attention", "head_dim above 256 is not supported by the CUDA kernel", __FILE__, __LINE__);
}

// FLOPs as the CPU counts them (the full S×S window, docs/domain.md's M), whichever kernel ran.
void CountForward(const OpContext& ctx, const AttentionShape& s) {
  const double S = static_cast<double>(s.seq), bh = static_cast<double>(s.batch * s.heads);
  ctx.Count(FlopKind::kModel, 4.0 * bh * S * S * s.head_dim);
  ctx.Count(FlopKind::kElementwise, 4.0 * bh * S * S / 2);
}
void CountBackward(const OpContext& ctx, const AttentionShape& s) {
  const double S = static_cast<double>(s.seq), bh = static_cast<double>(s.batch * s.heads);
  ctx.Count(FlopKind::kModel, 8.0 * bh * S * S * s.head_dim);
  ctx.Count(FlopKind::kElementwise, 4.0 * bh * S * S / 2);
}

template <typename T>
void AttentionForwardImpl(const OpContext& ctx, const AttentionShape& s, T* out, float* lse,
                          const T* qkv) {
  const int64_t S = s.seq, Dh = s.head_dim;
  if (s.batch * s.heads * S > 0) {
    const AttnArgs a = MakeArgs(s);
    const dim3 grid(static_cast<unsigned>(s.batch * s.heads),
                    static_cast<unsigned>((S + kTile - 1) / kTile));
    DispatchHeadDim(Dh, [&]<int kMaxDh>() {
      LaunchTiled(AttentionForwardKernel<kMaxDh, T>, grid, ForwardSmem(Dh), StreamOf(ctx), a, out,
                  lse, qkv);
    });
  }
  CountForward(ctx, s);
}

// Rows of the softmax-backward term delta = rowsum(dout·out), [B·H·S], into `delta`.
template <typename T>
void ComputeDelta(cudaStream_t stream, const AttentionShape& s, float* delta, const T* dout,
                  const T* out) {
  const int64_t rows = s.batch * s.heads * s.seq;
  AttentionDeltaKernel<<<static_cast<unsigned>((rows + kBlock / 32 - 1) / (kBlock / 32)), kBlock, 0,
                         stream>>>(MakeArgs(s), rows, delta, dout, out);
  PARITY_CUDA_LAUNCHED();
}

template <typename T>
void AttentionBackwardImpl(const OpContext& ctx, const AttentionShape& s, T* dqkv, const T* dout,
                           const T* out, const float* lse, const T* qkv) {
  const int64_t S = s.seq, Dh = s.head_dim;
  if (s.batch * s.heads * S > 0) {
    const AttnArgs a = MakeArgs(s);
    const cudaStream_t stream = StreamOf(ctx);
    Scratch<float> delta(stream, s.batch * s.heads * S);
    ComputeDelta(stream, s, delta.get(), dout, out);
    const auto tiles = static_cast<unsigned>((S + kTile - 1) / kTile);
    DispatchHeadDim(Dh, [&]<int kMaxDh>() {
      LaunchTiled(AttentionDqKernel<kMaxDh, T>,
                  dim3(static_cast<unsigned>(s.batch * s.heads), tiles), DqSmem(Dh), stream, a,
                  dqkv, dout, lse, static_cast<const float*>(delta.get()), qkv);
      LaunchTiled(AttentionDkDvKernel<kMaxDh, T>,
                  dim3(static_cast<unsigned>(s.batch * s.kv_heads), tiles), DkDvSmem(Dh), stream, a,
                  dqkv, dout, lse, static_cast<const float*>(delta.get()), qkv);
    });
  }
  CountBackward(ctx, s);
}

}  // namespace

void RopeForward(const OpContext& ctx, const AttentionShape& s, float* qkv) {
  RopeRotate(ctx, s, qkv, 1.0);
}
void RopeBackward(const OpContext& ctx, const AttentionShape& s, float* dqkv) {
  RopeRotate(ctx, s, dqkv, -1.0);
}
void AttentionForward(const OpContext& ctx, const AttentionShape& s, float* out, float* lse,
                      const float* qkv) {
  AttentionForwardImpl(ctx, s, out, lse, qkv);
}
void AttentionBackward(const OpContext& ctx, const AttentionShape& s, float* dqkv,
                       const float* dout, const float* out, const float* lse, const float* qkv) {
  AttentionBackwardImpl(ctx, s, dqkv, dout, out, lse, qkv);
}

// ---- the bf16 mode (op_table_bf16.h): qkv, out, dout and dqkv bf16; lse fp32 -------------------
void RopeForward(const OpContext& ctx, const AttentionShape& s, Bf16* qkv) {
  RopeRotate(ctx, s, qkv, 1.0);
}
void RopeBackward(const OpContext& ctx, const AttentionShape& s, Bf16* dqkv) {
  RopeRotate(ctx, s, dqkv, -1.0);
}
// cuDNN's fused attention (cudnn_sdpa.h) where it has a plan for the shape; else the tensor-core
// kernels (flash_tc.h) where they take it; else the tiled fp32-math kernel (head dims above 128
// or not a multiple of 8, unaligned buffers).
void AttentionForward(const OpContext& ctx, const AttentionShape& s, Bf16* out, float* lse,
                      const Bf16* qkv) {
  if (CudnnSdpaForward(ctx, s, out, lse, qkv)) return CountForward(ctx, s);
  if (!FlashTcSupports(s, qkv, out)) return AttentionForwardImpl(ctx, s, out, lse, qkv);
  FlashTcForward(ctx, s, out, lse, qkv);
  CountForward(ctx, s);
}
void AttentionBackward(const OpContext& ctx, const AttentionShape& s, Bf16* dqkv, const Bf16* dout,
                       const Bf16* out, const float* lse, const Bf16* qkv) {
  if (CudnnSdpaBackward(ctx, s, dqkv, dout, out, lse, qkv)) return CountBackward(ctx, s);
  if (!FlashTcSupports(s, qkv, dqkv) || !FlashTcSupports(s, dout, out)) {
    return AttentionBackwardImpl(ctx, s, dqkv, dout, out, lse, qkv);
  }
  if (s.batch * s.heads * s.seq > 0) {
    const cudaStream_t stream = StreamOf(ctx);
    Scratch<float> delta(stream, s.batch * s.heads * s.seq);
    ComputeDelta(stream, s, delta.get(), dout, out);
    FlashTcBackward(ctx, s, dqkv, dout, lse, delta.get(), qkv);
  }
  CountBackward(ctx, s);
}

}  // namespace parity::kernels::cuda
