// The tensor-core attention kernels' entry points: flash_tc.h's block bodies with the device lane
// environment, instantiated for head dims up to 32, 64 and 128 (smaller dims are zero-padded).
#include <cmath>

#include "kernels/cuda/backend_state.h"
#include "kernels/cuda/flash_tc_device.cuh"
#include "kernels/cuda/flash_tc_launch.h"

namespace parity::kernels::cuda {

extern __shared__ __align__(16) unsigned char flash_smem[];

namespace {

template <int kDh>
__global__ void __launch_bounds__(kFlashThreads)
    FlashForwardKernel(FlashArgs a, uint16_t* out, float* lse, const uint16_t* qkv) {
  DeviceLaneEnv env{reinterpret_cast<uint16_t*>(flash_smem)};
  FlashForwardBlock<kDh>(env, a, out, lse, qkv);
}

template <int kDh>
__global__ void __launch_bounds__(kFlashThreads)
    FlashDqKernel(FlashArgs a, uint16_t* dqkv, const uint16_t* dout, const float* lse,
                  const float* delta, const uint16_t* qkv) {
  DeviceLaneEnv env{reinterpret_cast<uint16_t*>(flash_smem)};
  FlashDqBlock<kDh>(env, a, dqkv, dout, lse, delta, qkv);
}

template <int kDh>
__global__ void __launch_bounds__(kFlashThreads)
    FlashDkDvKernel(FlashArgs a, uint16_t* dqkv, const uint16_t* dout, const float* lse,
                    const float* delta, const uint16_t* qkv) {
  DeviceLaneEnv env{reinterpret_cast<uint16_t*>(flash_smem)};
  FlashDkDvBlock<kDh>(env, a, dqkv, dout, lse, delta, qkv);
}

// Above 48 KiB of dynamic shared memory a kernel must opt in (sm_90 allows 227 KiB): once per
// head-dim instance, for its three kernels. (A static keyed by the kernel's function-pointer type
// would be shared by the instances: they have the same signature.)
template <int kDh>
void OptInSharedMemory() {
  static const bool opted = [] {
    PARITY_CUDA_CHECK(cudaFuncSetAttribute(FlashForwardKernel<kDh>,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           FlashForwardSmem<kDh>()));
    PARITY_CUDA_CHECK(cudaFuncSetAttribute(
        FlashDqKernel<kDh>, cudaFuncAttributeMaxDynamicSharedMemorySize, FlashDqSmem<kDh>()));
    PARITY_CUDA_CHECK(cudaFuncSetAttribute(
        FlashDkDvKernel<kDh>, cudaFuncAttributeMaxDynamicSharedMemorySize, FlashDkDvSmem<kDh>()));
    return true;
  }();
  (void)opted;
}

template <typename Kernel, typename... Args>
void Launch(Kernel kernel, dim3 grid, int smem, cudaStream_t stream, Args... args) {
  kernel<<<grid, kFlashThreads, smem, stream>>>(args...);
  PARITY_CUDA_CHECK(cudaGetLastError());
}

// Calls fn.template operator()<kDh>() with the smallest instance ≥ head_dim.
template <typename Fn>
void DispatchFlashHeadDim(int64_t head_dim, Fn&& fn) {
  static_assert(kFlashMaxHeadDim == 128, "the instances below end at 128");
  if (head_dim <= 32) return fn.template operator()<32>();
  if (head_dim <= 64) return fn.template operator()<64>();
  return fn.template operator()<128>();
}

bool Aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

bool FlashTcSupports(const AttentionShape& s, const void* qkv, const void* out) {
  const int64_t tiles = (s.seq + kFlashRows - 1) / kFlashRows;
  return s.head_dim >= 8 && s.head_dim <= kFlashMaxHeadDim &&
         s.head_dim % core::kCudaTensorCoreHeadDimStep == 0 && s.kv_heads > 0 &&
         s.heads % s.kv_heads == 0 && tiles <= 65535 && s.batch * s.heads <= 0x7fffffff &&
         Aligned16(qkv) && Aligned16(out);
}

void FlashTcForward(const OpContext& ctx, const AttentionShape& s, Bf16* out, float* lse,
                    const Bf16* qkv) {
  if (s.batch * s.heads * s.seq == 0) return;
  const FlashArgs a = MakeFlashArgs(s);
  const cudaStream_t stream = State(ctx).stream;
  const dim3 grid(static_cast<unsigned>(s.batch * s.heads),
                  static_cast<unsigned>((s.seq + kFlashRows - 1) / kFlashRows));
  DispatchFlashHeadDim(s.head_dim, [&]<int kDh>() {
    OptInSharedMemory<kDh>();
    Launch(FlashForwardKernel<kDh>, grid, FlashForwardSmem<kDh>(), stream, a,
           reinterpret_cast<uint16_t*>(out), lse, reinterpret_cast<const uint16_t*>(qkv));
  });
}

void FlashTcBackward(const OpContext& ctx, const AttentionShape& s, Bf16* dqkv, const Bf16* dout,
                     const float* lse, const float* delta, const Bf16* qkv) {
  if (s.batch * s.heads * s.seq == 0) return;
  const FlashArgs a = MakeFlashArgs(s);
  const cudaStream_t stream = State(ctx).stream;
  auto* dst = reinterpret_cast<uint16_t*>(dqkv);
  const auto* go = reinterpret_cast<const uint16_t*>(dout);
  const auto* src = reinterpret_cast<const uint16_t*>(qkv);
  const auto query_tiles = static_cast<unsigned>((s.seq + kFlashRows - 1) / kFlashRows);
  const auto key_tiles = static_cast<unsigned>((s.seq + kFlashKeys - 1) / kFlashKeys);
  DispatchFlashHeadDim(s.head_dim, [&]<int kDh>() {
    OptInSharedMemory<kDh>();
    Launch(FlashDqKernel<kDh>, dim3(static_cast<unsigned>(s.batch * s.heads), query_tiles),
           FlashDqSmem<kDh>(), stream, a, dst, go, lse, delta, src);
    Launch(FlashDkDvKernel<kDh>, dim3(static_cast<unsigned>(s.batch * s.kv_heads), key_tiles),
           FlashDkDvSmem<kDh>(), stream, a, dst, go, lse, delta, src);
  });
}

}  // namespace parity::kernels::cuda
