// Row-major GEMMs on the backend's stream through cuBLASLt, with the CPU backend's argument
// convention (cpu/gemm.h): C[m,n] = alpha·op(A)·op(B) + beta·C.
//   fp32 (the parity path): fp32 A, B, C with fp32 accumulation (CUBLAS_COMPUTE_32F, never the
//     TF32 "fast" modes).
//   bf16 (the throughput mode): bf16 A and B on tensor cores with fp32 accumulation
//     (CUBLAS_COMPUTE_32F, fp32 alpha/beta); C is fp32, or bf16 rounded to nearest-even once,
//     after alpha·op(A)·op(B) + beta·C is formed in fp32 (split-K partial sums are never kept in
//     bf16). Products of two bf16 values are exact in fp32, so a bf16 GEMM differs from the fp32
//     GEMM of the same (widened) values only in summation order.
// Every shape runs one fixed algorithm for the life of the process (see gemm.cc), so results
// repeat bit for bit on the same GPU model.
#pragma once

#include <cstdint>

#include "kernels/backend/bf16.h"
#include "kernels/cuda/backend_state.h"

namespace parity::kernels::cuda {

enum class Trans { kNo, kYes };

void Gemm(BackendState& st, Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, float alpha,
          const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
          int64_t ldc);
void Gemm(BackendState& st, Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, float alpha,
          const Bf16* a, int64_t lda, const Bf16* b, int64_t ldb, float beta, Bf16* c, int64_t ldc);
void Gemm(BackendState& st, Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, float alpha,
          const Bf16* a, int64_t lda, const Bf16* b, int64_t ldb, float beta, float* c,
          int64_t ldc);

}  // namespace parity::kernels::cuda
