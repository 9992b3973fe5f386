// Device-side helpers shared by the CUDA op files: launch geometry, warp/block reductions with a
// fixed summation tree (so every reduction repeats bit for bit), and stream-ordered scratch memory.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/backend/bf16.h"
#include "kernels/cuda/backend_state.h"

namespace parity::kernels::cuda {

inline constexpr int kBlock = 256;  // threads per block for elementwise kernels

// Blocks for a grid-stride loop over n elements (the loop covers anything past the cap).
inline unsigned GridFor(int64_t n, int threads = kBlock) {
  const int64_t blocks = (n + threads - 1) / threads;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > (1 << 20) ? (1 << 20) : blocks));
}

inline cudaStream_t StreamOf(const OpContext& ctx) { return State(ctx).stream; }

#define PARITY_CUDA_LAUNCHED() PARITY_CUDA_CHECK(cudaGetLastError())

// Temporary device memory for one op call, allocated and freed in stream order (the device's
// memory pool keeps it cached, see cuda_device.cu), so ops need no host synchronisation.
template <typename T>
class Scratch {
 public:
  Scratch(cudaStream_t stream, int64_t n) : stream_(stream) {
    if (n > 0) {
      PARITY_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&ptr_), n * sizeof(T), stream));
    }
  }
  ~Scratch() {
    if (ptr_ != nullptr) (void)cudaFreeAsync(ptr_, stream_);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  T* get() const { return ptr_; }

 private:
  cudaStream_t stream_;
  T* ptr_ = nullptr;
};

// Element access for kernels templated on their storage type (float, or Bf16 in the bf16 mode):
// values are widened to float on load, and rounded to nearest-even only when stored as bf16. The
// float overloads are plain loads and stores, so the fp32 instantiations compile to the same code
// as before the templating.
static_assert(sizeof(Bf16) == sizeof(__nv_bfloat16) && alignof(Bf16) == alignof(__nv_bfloat16),
              "Bf16 must be layout-compatible with __nv_bfloat16");
__device__ __forceinline__ float Load(const float* p, int64_t i) { return p[i]; }
__device__ __forceinline__ float Load(const Bf16* p, int64_t i) {
  return __bfloat162float(reinterpret_cast<const __nv_bfloat16*>(p)[i]);
}
__device__ __forceinline__ void Store(float* p, int64_t i, float v) { p[i] = v; }
__device__ __forceinline__ void Store(Bf16* p, int64_t i, float v) {
  reinterpret_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v);
}

// Butterfly (xor) reductions: lane i adds lane i^o's value, and a+b == b+a exactly, so every lane
// ends with the same bits and the tree is the same on every run.
template <typename T>
__device__ __forceinline__ T WarpSum(T v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float WarpMax(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the result.
// `scratch` is shared memory for 32 values; all threads of the block must call this.
template <typename T>
__device__ T BlockSum(T v, T* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int warps = static_cast<int>(blockDim.x >> 5);
  v = WarpSum(v);
  __syncthreads();  // a previous BlockSum may still be reading `scratch`
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  return WarpSum(lane < warps ? scratch[lane] : T(0));
}

}  // namespace parity::kernels::cuda
