// The CUDA backend's per-device state (OpContext::backend points at it), the error checks every
// CUDA/cuBLAS call goes through, and RAII owners for every handle and device allocation.
//
// Errors inside ops: the op signatures return void (they mirror the CPU ops), and a failed
// launch or cuBLAS call leaves the CUDA context unusable anyway, so ops abort the process with the
// call, file, line and the CUDA error text (llm.c does the same). Only MakeCudaDevice and
// Device::Allocate report errors as absl::Status, because there the caller can act on them.
//
// Threading: one host thread drives a device at a time (the training loop's); the matmul plan
// cache is locked so that a stray second caller cannot corrupt it.
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <type_traits>
#include <vector>

#include "kernels/backend/op_table.h"

namespace parity::kernels::cuda {

[[noreturn]] void Die(const char* call, const char* detail, const char* file, int line);

inline void CheckCuda(cudaError_t e, const char* call, const char* file, int line) {
  if (e != cudaSuccess) Die(call, cudaGetErrorString(e), file, line);
}
inline void CheckCublas(cublasStatus_t s, const char* call, const char* file, int line) {
  if (s != CUBLAS_STATUS_SUCCESS) Die(call, cublasGetStatusString(s), file, line);
}

#define PARITY_CUDA_CHECK(expr) \
  ::parity::kernels::cuda::CheckCuda((expr), #expr, __FILE__, __LINE__)
#define PARITY_CUBLAS_CHECK(expr) \
  ::parity::kernels::cuda::CheckCublas((expr), #expr, __FILE__, __LINE__)

// unique_ptr over an opaque CUDA/cuBLAS handle type H (a pointer) with its destroy function.
template <typename H, auto Destroy>
struct HandleDeleter {
  void operator()(H h) const { (void)Destroy(h); }
};
template <typename H, auto Destroy>
using UniqueHandle = std::unique_ptr<std::remove_pointer_t<H>, HandleDeleter<H, Destroy>>;

using StreamHandle = UniqueHandle<cudaStream_t, &cudaStreamDestroy>;
using BlasHandle = UniqueHandle<cublasHandle_t, &cublasDestroy>;
using LtHandle = UniqueHandle<cublasLtHandle_t, &cublasLtDestroy>;
using LtMatmulDesc = UniqueHandle<cublasLtMatmulDesc_t, &cublasLtMatmulDescDestroy>;
using LtLayout = UniqueHandle<cublasLtMatrixLayout_t, &cublasLtMatrixLayoutDestroy>;
using LtPreference = UniqueHandle<cublasLtMatmulPreference_t, &cublasLtMatmulPreferenceDestroy>;

struct CudaFree {
  void operator()(void* p) const { (void)cudaFree(p); }
};
using DeviceMemory = std::unique_ptr<void, CudaFree>;

// One cuBLASLt configuration per GEMM shape, layout and pointer alignment, chosen once by the
// heuristic and then reused: a fixed algorithm per shape keeps results bit-identical run to run.
struct MatmulPlan {
  LtMatmulDesc desc;
  LtLayout a, b, c;
  cublasLtMatmulAlgo_t algo{};
  bool use_lt = false;  // no Lt algorithm for this shape: cublasSgemm (fp32, no TF32) or
                        // cublasGemmEx (bf16 inputs), CUBLAS_COMPUTE_32F either way
};
// transa, transb, m, n, k, lda, ldb, ldc, align_a, align_b, align_c (column-major terms), then
// the cudaDataType_t of A/B and of C/D (fp32/fp32, bf16/bf16 or bf16/fp32).
using MatmulKey = std::array<int64_t, 13>;

// The multi-tensor AdamW's chunk table on the device (ops_optim.cu): the tensor list of the last
// call, cut into chunks a block each. Built and uploaded when the list changes — once per run,
// since a model's tensors do not change — and reused by every later step.
struct AdamWChunkTable {
  bool built = false;
  std::vector<TensorSpan> tensors;  // the host list it was built from
  DeviceMemory chunks;              // the table (null when it has no chunk)
  int64_t num_chunks = 0;
};

// cuDNN's attention state (cudnn_sdpa_run.cc): its handle and plans per shape, made on first use.
struct SdpaState;
struct SdpaStateDeleter {
  void operator()(SdpaState* state) const;
};

}  // namespace parity::kernels::cuda

namespace parity::kernels {

struct BackendState {
  int ordinal = 0;
  // Declaration order is destruction order reversed: handles go before the workspace and stream.
  cudaStream_t stream = nullptr;  // owned by stream_owner
  cuda::StreamHandle stream_owner;
  cuda::DeviceMemory workspace;  // fixed cuBLAS/cuBLASLt workspace (determinism: never resized)
  size_t workspace_bytes = 0;
  cuda::LtHandle lt;
  cuda::BlasHandle blas;
  std::mutex plans_mu;
  std::map<cuda::MatmulKey, cuda::MatmulPlan> plans;  // guarded by plans_mu; ≤ 4096 (gemm.cc)
  cuda::AdamWChunkTable adamw_chunks;  // the driving thread's only (see Threading above)
  std::unique_ptr<cuda::SdpaState, cuda::SdpaStateDeleter> sdpa;  // the driving thread's only
};

}  // namespace parity::kernels

namespace parity::kernels::cuda {

inline BackendState& State(const OpContext& ctx) {
  if (ctx.backend == nullptr) {
    Die("OpContext::backend", "a CUDA op was called with a context that has no BackendState",
        __FILE__, __LINE__);
  }
  return *ctx.backend;
}

}  // namespace parity::kernels::cuda
