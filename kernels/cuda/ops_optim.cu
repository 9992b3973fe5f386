// The update ops on the device, mirroring cpu/ops_optim.h: Σ g² in double in one launch with a
// deterministic tree (a grid fixed by n; the last block to finish sums the block partials in
// order), AdamW per tensor and over a tensor table with the CPU's exact float operation order
// (explicit round-to-nearest intrinsics, so no fused multiply-add changes a bit relative to the
// CPU build), and the bf16 mode's weight copy (cast_to_bf16).
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/ops.h"

namespace parity::kernels::cuda {
namespace {

constexpr int64_t kSumBlocksMax = 1024;
// Elements per block of the multi-tensor AdamW: big tensors are cut into chunks this long, small
// ones (norm weights) are one chunk each.
constexpr int64_t kAdamWChunk = 32768;

// Every block sums its grid-stride share of g² into partial[block]; the block that finishes last
// (the `finished` counter) sums the partials in index order with the tree a one-block kernel of
// kBlock threads uses, so the result's bits depend on n alone, and writes it to *out.
__global__ void SumSquaresKernel(int64_t n, double* partial, unsigned int* finished, double* out,
                                 const float* g) {
  __shared__ double red[32];
  __shared__ bool last;
  double acc = 0.0;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    acc += static_cast<double>(g[i]) * g[i];
  }
  acc = BlockSum(acc, red);
  if (threadIdx.x == 0) {
    partial[blockIdx.x] = acc;
    __threadfence();  // the partial is visible to every block before the counter counts it
    last = atomicAdd(finished, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!last) return;  // uniform over the block
  __threadfence();
  double total = 0.0;
  for (int64_t i = threadIdx.x; i < gridDim.x; i += blockDim.x) total += __ldcg(partial + i);
  total = BlockSum(total, red);
  if (threadIdx.x == 0) *out = total;
}

struct AdamWConsts {
  float lr, b1, b2, one_minus_b1, one_minus_b2, eps, gs, step_m, step_v;
  float shrink;  // 1 − lr·wd: p's factor in a tensor that decays
};

// Host constants exactly as cpu::AdamWConstantsFor computes them.
AdamWConsts AdamWConstsFor(const AdamWArgs& a, double grad_scale) {
  const double bc1 = 1.0 - std::pow(a.beta1, static_cast<double>(a.step));
  const double bc2 = 1.0 - std::pow(a.beta2, static_cast<double>(a.step));
  AdamWConsts c{};
  c.lr = static_cast<float>(a.lr);
  c.b1 = static_cast<float>(a.beta1);
  c.b2 = static_cast<float>(a.beta2);
  c.one_minus_b1 = 1.0f - c.b1;
  c.one_minus_b2 = 1.0f - c.b2;
  c.eps = static_cast<float>(a.eps);
  c.gs = static_cast<float>(grad_scale);
  c.shrink = static_cast<float>(1.0 - a.lr * a.weight_decay);
  c.step_m = static_cast<float>(1.0 / bc1);
  c.step_v = static_cast<float>(1.0 / std::sqrt(bc2));
  return c;
}

// The one definition of the per-element update, for both kernels below (so they agree bit for
// bit); `shrink` is c.shrink where the tensor decays, 1 where it does not.
__device__ __forceinline__ void AdamWElement(int64_t i, float* p, float* m, float* v,
                                             const float* g, const AdamWConsts& c, float shrink) {
  const float gi = __fmul_rn(g[i], c.gs);
  const float mi = __fadd_rn(__fmul_rn(c.b1, m[i]), __fmul_rn(c.one_minus_b1, gi));
  const float vi = __fadd_rn(__fmul_rn(c.b2, v[i]), __fmul_rn(__fmul_rn(c.one_minus_b2, gi), gi));
  m[i] = mi;
  v[i] = vi;
  const float num = __fmul_rn(c.lr, __fmul_rn(mi, c.step_m));
  const float den = __fadd_rn(__fmul_rn(__fsqrt_rn(vi), c.step_v), c.eps);
  p[i] = __fsub_rn(__fmul_rn(p[i], shrink), __fdiv_rn(num, den));
}

__global__ void AdamWKernel(int64_t n, float* p, float* m, float* v, const float* g, AdamWConsts c,
                            float shrink) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    AdamWElement(i, p, m, v, g, c, shrink);
  }
}

// One row of the multi-tensor table: elements [begin, begin + count) of one tensor.
struct AdamWChunk {
  int64_t begin;
  int32_t count;  // ≤ kAdamWChunk
  int32_t decay;  // 1: the tensor decays (WeightDecay::kApply)
};

// Each block owns one chunk at a time (a grid-stride loop over chunks past the grid's cap).
__global__ void AdamWMultiTensorKernel(int64_t num_chunks, const AdamWChunk* chunks, float* p,
                                       float* m, float* v, const float* g, AdamWConsts c) {
  for (int64_t k = blockIdx.x; k < num_chunks; k += gridDim.x) {
    const AdamWChunk chunk = chunks[k];
    const float shrink = chunk.decay != 0 ? c.shrink : 1.0f;
    for (int64_t i = chunk.begin + threadIdx.x; i < chunk.begin + chunk.count; i += blockDim.x) {
      AdamWElement(i, p, m, v, g, c, shrink);
    }
  }
}

// The chunk table of `tensors` on the device: the cached one when the list is the last call's,
// else built and uploaded now (once per run; the upload waits for the stream, since the old
// table may still be in use by a queued update and the host rows are freed on return).
const AdamWChunkTable& ChunkTableFor(BackendState& state, int64_t count,
                                     const TensorSpan* tensors) {
  AdamWChunkTable& table = state.adamw_chunks;
  if (table.built &&
      std::equal(tensors, tensors + count, table.tensors.begin(), table.tensors.end())) {
    return table;
  }
  std::vector<AdamWChunk> rows;
  for (int64_t t = 0; t < count; ++t) {
    const TensorSpan& s = tensors[t];
    for (int64_t b = 0; b < s.size; b += kAdamWChunk) {
      rows.push_back({.begin = s.offset + b,
                      .count = static_cast<int32_t>(std::min(kAdamWChunk, s.size - b)),
                      .decay = s.decay == WeightDecay::kApply ? 1 : 0});
    }
  }
  PARITY_CUDA_CHECK(cudaStreamSynchronize(state.stream));
  table.chunks.reset();
  if (!rows.empty()) {
    void* d = nullptr;
    PARITY_CUDA_CHECK(cudaMalloc(&d, rows.size() * sizeof(AdamWChunk)));
    table.chunks.reset(d);
    PARITY_CUDA_CHECK(cudaMemcpyAsync(d, rows.data(), rows.size() * sizeof(AdamWChunk),
                                      cudaMemcpyHostToDevice, state.stream));
    PARITY_CUDA_CHECK(cudaStreamSynchronize(state.stream));
  }
  table.tensors.assign(tensors, tensors + count);
  table.num_chunks = static_cast<int64_t>(rows.size());
  table.built = true;
  return table;
}

// dst[i] = bf16(src[i]), round to nearest-even (bf16.h's ToBf16, bit for bit on finite values
// and infinities; a NaN stays a NaN).
__global__ void CastToBf16Kernel(int64_t n, Bf16* dst, const float* src) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    Store(dst, i, src[i]);
  }
}

}  // namespace

void SumSquares(const OpContext& ctx, int64_t n, const float* g, double* sum) {
  const cudaStream_t stream = StreamOf(ctx);
  if (n <= 0) {
    // Nothing queued can be writing *sum: the caller reads it only after a synchronisation.
    *sum = 0.0;
    return;
  }
  // The grid depends only on n, so the summation tree (and the bits) do too.
  const int64_t blocks = std::min<int64_t>(kSumBlocksMax, (n + kBlock * 4 - 1) / (kBlock * 4));
  // [partials | result | finished-block counter]
  Scratch<double> scratch(stream, blocks + 2);
  double* result = scratch.get() + blocks;
  auto* finished = reinterpret_cast<unsigned int*>(scratch.get() + blocks + 1);
  PARITY_CUDA_CHECK(cudaMemsetAsync(finished, 0, sizeof(unsigned int), stream));
  SumSquaresKernel<<<static_cast<unsigned>(blocks), kBlock, 0, stream>>>(n, scratch.get(), finished,
                                                                         result, g);
  PARITY_CUDA_LAUNCHED();
  // Queued, not waited for: the training step reads it at its one synchronisation.
  PARITY_CUDA_CHECK(cudaMemcpyAsync(sum, result, sizeof(double), cudaMemcpyDeviceToHost, stream));
}

void AdamWUpdate(const OpContext& ctx, int64_t n, float* p, float* m, float* v, const float* g,
                 double grad_scale, const AdamWArgs& a, WeightDecay decay) {
  if (n <= 0) return;
  const AdamWConsts c = AdamWConstsFor(a, grad_scale);
  const float shrink = decay == WeightDecay::kApply ? c.shrink : 1.0f;
  AdamWKernel<<<GridFor(n), kBlock, 0, StreamOf(ctx)>>>(n, p, m, v, g, c, shrink);
  PARITY_CUDA_LAUNCHED();
}

void AdamWMultiTensor(const OpContext& ctx, int64_t count, const TensorSpan* tensors, float* p,
                      float* m, float* v, const float* g, double grad_scale, const AdamWArgs& a) {
  const AdamWChunkTable& table = ChunkTableFor(State(ctx), count, tensors);
  if (table.num_chunks == 0) return;
  const AdamWConsts c = AdamWConstsFor(a, grad_scale);
  const auto grid = static_cast<unsigned>(std::min<int64_t>(table.num_chunks, 1 << 20));
  AdamWMultiTensorKernel<<<grid, kBlock, 0, StreamOf(ctx)>>>(
      table.num_chunks, static_cast<const AdamWChunk*>(table.chunks.get()), p, m, v, g, c);
  PARITY_CUDA_LAUNCHED();
}

void CastToBf16(const OpContext& ctx, int64_t n, Bf16* dst, const float* src) {
  if (n <= 0) return;
  CastToBf16Kernel<<<GridFor(n), kBlock, 0, StreamOf(ctx)>>>(n, dst, src);
  PARITY_CUDA_LAUNCHED();
}

}  // namespace parity::kernels::cuda
