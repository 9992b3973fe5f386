// The update ops on the device, mirroring cpu/ops_optim.h: Σ g² in double in two deterministic
// passes (a grid fixed by n, then the block partials in order), AdamW with the CPU's exact
// float operation order (explicit round-to-nearest intrinsics, so no fused multiply-add changes a
// bit relative to the CPU build), and the bf16 mode's weight copy (cast_to_bf16).
#include <algorithm>
#include <cmath>

#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/ops.h"

namespace parity::kernels::cuda {
namespace {

constexpr int64_t kSumBlocksMax = 1024;

__global__ void SumSquaresPartialKernel(int64_t n, double* partial, const float* g) {
  __shared__ double red[32];
  double acc = 0.0;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    acc += static_cast<double>(g[i]) * g[i];
  }
  acc = BlockSum(acc, red);
  if (threadIdx.x == 0) partial[blockIdx.x] = acc;
}

__global__ void SumSquaresFinalKernel(int64_t blocks, double* out, const double* partial) {
  __shared__ double red[32];
  double acc = 0.0;
  for (int64_t i = threadIdx.x; i < blocks; i += blockDim.x) acc += partial[i];
  acc = BlockSum(acc, red);
  if (threadIdx.x == 0) *out = acc;
}

struct AdamWConsts {
  float lr, b1, b2, one_minus_b1, one_minus_b2, eps, gs, shrink, step_m, step_v;
};

__global__ void AdamWKernel(int64_t n, float* p, float* m, float* v, const float* g,
                            AdamWConsts c) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float gi = __fmul_rn(g[i], c.gs);
    const float mi = __fadd_rn(__fmul_rn(c.b1, m[i]), __fmul_rn(c.one_minus_b1, gi));
    const float vi = __fadd_rn(__fmul_rn(c.b2, v[i]), __fmul_rn(__fmul_rn(c.one_minus_b2, gi), gi));
    m[i] = mi;
    v[i] = vi;
    const float num = __fmul_rn(c.lr, __fmul_rn(mi, c.step_m));
    const float den = __fadd_rn(__fmul_rn(__fsqrt_rn(vi), c.step_v), c.eps);
    p[i] = __fsub_rn(__fmul_rn(p[i], c.shrink), __fdiv_rn(num, den));
  }
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

double SumSquares(const OpContext& ctx, int64_t n, const float* g) {
  if (n <= 0) return 0.0;
  const cudaStream_t stream = StreamOf(ctx);
  // The grid depends only on n, so the summation tree (and the bits) do too.
  const int64_t blocks = std::min<int64_t>(kSumBlocksMax, (n + kBlock * 4 - 1) / (kBlock * 4));
  Scratch<double> partial(stream, blocks + 1);
  SumSquaresPartialKernel<<<static_cast<unsigned>(blocks), kBlock, 0, stream>>>(n, partial.get(),
                                                                                g);
  PARITY_CUDA_LAUNCHED();
  SumSquaresFinalKernel<<<1, kBlock, 0, stream>>>(blocks, partial.get() + blocks, partial.get());
  PARITY_CUDA_LAUNCHED();
  double result = 0.0;
  PARITY_CUDA_CHECK(cudaMemcpyAsync(&result, partial.get() + blocks, sizeof(double),
                                    cudaMemcpyDeviceToHost, stream));
  PARITY_CUDA_CHECK(cudaStreamSynchronize(stream));
  return result;
}

void AdamWUpdate(const OpContext& ctx, int64_t n, float* p, float* m, float* v, const float* g,
                 double grad_scale, const AdamWArgs& a, WeightDecay decay) {
  if (n <= 0) return;
  // Host constants exactly as cpu::AdamWUpdate computes them.
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
  c.shrink = decay == WeightDecay::kApply ? static_cast<float>(1.0 - a.lr * a.weight_decay) : 1.0f;
  c.step_m = static_cast<float>(1.0 / bc1);
  c.step_v = static_cast<float>(1.0 / std::sqrt(bc2));
  AdamWKernel<<<GridFor(n), kBlock, 0, StreamOf(ctx)>>>(n, p, m, v, g, c);
  PARITY_CUDA_LAUNCHED();
}

void CastToBf16(const OpContext& ctx, int64_t n, Bf16* dst, const float* src) {
  if (n <= 0) return;
  CastToBf16Kernel<<<GridFor(n), kBlock, 0, StreamOf(ctx)>>>(n, dst, src);
  PARITY_CUDA_LAUNCHED();
}

}  // namespace parity::kernels::cuda
