// What the CUDA backend's kernels can take: the attention kernel's largest head dimension
// (kernels/cuda/ops_attention.cu dispatches 32, 64, 128 or 256; the tensor-core kernels less) and
// the routing kernels' largest expert count (ops_moe.cu; a 32-bit mask per lane). The kernels take
// their limits from here, the planner refuses a GPU run past them at submission naming the field
// (gpu_sizing.h), and the engine before it builds a CUDA model (kernels/train/session.cc) — never
// an abort inside an op.
#pragma once

#include <cstdint>

namespace parity::core {

inline constexpr int64_t kCudaMaxHeadDim = 256;
// The bf16 mode's tensor-core attention (kernels/cuda/flash_tc.h) takes head dims that are a
// multiple of kCudaTensorCoreHeadDimStep up to kCudaTensorCoreMaxHeadDim; other valid head dims
// run the fp32-math tiled kernel (correct, many times slower).
inline constexpr int64_t kCudaTensorCoreMaxHeadDim = 128;
inline constexpr int64_t kCudaTensorCoreHeadDimStep = 8;
inline constexpr int64_t kCudaMaxExperts = 1024;

}  // namespace parity::core
