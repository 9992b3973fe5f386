// Row-major fp32 GEMM on the backend's stream through cuBLASLt, with the CPU backend's argument
// convention (cpu/gemm.h): C[m,n] = alpha·op(A)·op(B) + beta·C. Accumulation is fp32
// (CUBLAS_COMPUTE_32F, never the TF32 "fast" modes): this is the parity path.
#pragma once

#include <cstdint>

#include "kernels/cuda/backend_state.h"

namespace parity::kernels::cuda {

enum class Trans { kNo, kYes };

void Gemm(BackendState& st, Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, float alpha,
          const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
          int64_t ldc);

}  // namespace parity::kernels::cuda
