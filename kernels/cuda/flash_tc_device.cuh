// The GPU's lane environment for flash_tc.h: CUDA builtins, `ldmatrix` and `mma.sync` by inline
// PTX (sm_80 and later; the project builds for sm_90), and the fast exp2/log2 the attention kernels
// use.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/cuda/flash_tc.h"

namespace parity::kernels::cuda {

struct DeviceLaneEnv {
  uint16_t* smem;

  __device__ __forceinline__ int Thread() const { return static_cast<int>(threadIdx.x); }
  __device__ __forceinline__ int Lane() const { return static_cast<int>(threadIdx.x & 31u); }
  __device__ __forceinline__ int Warp() const { return static_cast<int>(threadIdx.x >> 5); }
  __device__ __forceinline__ int64_t BlockX() const { return blockIdx.x; }
  __device__ __forceinline__ int64_t BlockY() const { return blockIdx.y; }
  __device__ __forceinline__ uint16_t* Smem() const { return smem; }
  __device__ __forceinline__ void SyncBlock() const { __syncthreads(); }
  __device__ __forceinline__ float ShflXor(float v, int mask) const {
    return __shfl_xor_sync(0xffffffffu, v, mask);
  }
  __device__ __forceinline__ float Max(float x, float y) const { return fmaxf(x, y); }
  __device__ __forceinline__ float Exp2(float x) const { return exp2f(x); }
  __device__ __forceinline__ float Log2(float x) const { return log2f(x); }
  __device__ __forceinline__ float SlopeLog2(int64_t h, int64_t heads) const {
    return static_cast<float>(exp2(-8.0 * static_cast<double>(h + 1) / static_cast<double>(heads)) *
                              1.4426950408889634);
  }
  // Round-to-nearest-even of two floats into one register, lo in the low half.
  __device__ __forceinline__ uint32_t Pack(float lo, float hi) const {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&v);
  }
  __device__ __forceinline__ uint32_t Ld32(const uint16_t* p) const {
    return *reinterpret_cast<const uint32_t*>(p);
  }
  __device__ __forceinline__ void St32(uint16_t* p, uint32_t v) const {
    *reinterpret_cast<uint32_t*>(p) = v;
  }
  __device__ __forceinline__ void Copy16(uint16_t* dst, const uint16_t* src) const {
    *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src);
  }
  __device__ __forceinline__ void Zero16(uint16_t* dst) const {
    *reinterpret_cast<uint4*>(dst) = make_uint4(0u, 0u, 0u, 0u);
  }
  // Four 8×8 b16 matrices from shared memory; `row` is this lane's 16-byte row (flash_tc.h).
  __device__ __forceinline__ void LdMatrix(const uint16_t* row, uint32_t (&r)[4]) const {
    const auto addr = static_cast<unsigned>(__cvta_generic_to_shared(row));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
  }
  __device__ __forceinline__ void LdMatrixTrans(const uint16_t* row, uint32_t (&r)[4]) const {
    const auto addr = static_cast<unsigned>(__cvta_generic_to_shared(row));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
  }
  // d (16×8 fp32 C tile) += a (16×16 bf16) · b (16×8 bf16), fp32 accumulation on the tensor cores.
  __device__ __forceinline__ void Mma(float (&d)[4], const uint32_t (&a)[4],
                                      const uint32_t (&b)[2]) const {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
};

}  // namespace parity::kernels::cuda
