// Row-major GEMM for the CPU backend: C[M,N] = alpha·op(A)·op(B) + beta·C, float → cblas_sgemm,
// double → cblas_dgemm. OpenBLAS is kept single-threaded (cpu_device.cc) and the M dimension is
// split across our own pool instead: that keeps one owner of the cores and makes results depend
// only on the pool size, never on OpenBLAS's internal scheduling.
#pragma once

#include <cblas.h>

#include <cstdint>

#include "kernels/backend/thread_pool.h"

namespace parity::kernels::cpu {

enum class Trans { kNo, kYes };

template <typename T>
void GemmSerial(Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a,
                int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  const auto cta = ta == Trans::kYes ? CblasTrans : CblasNoTrans;
  const auto ctb = tb == Trans::kYes ? CblasTrans : CblasNoTrans;
  if constexpr (sizeof(T) == sizeof(float)) {
    cblas_sgemm(CblasRowMajor, cta, ctb, static_cast<int>(m), static_cast<int>(n),
                static_cast<int>(k), alpha, a, static_cast<int>(lda), b, static_cast<int>(ldb),
                beta, c, static_cast<int>(ldc));
  } else {
    cblas_dgemm(CblasRowMajor, cta, ctb, static_cast<int>(m), static_cast<int>(n),
                static_cast<int>(k), alpha, a, static_cast<int>(lda), b, static_cast<int>(ldb),
                beta, c, static_cast<int>(ldc));
  }
}

// The same product with rows of C split across the pool (each chunk one serial GEMM).
template <typename T>
void Gemm(ThreadPool& pool, Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, T alpha,
          const T* a, int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  // Below ~64 rows per chunk the per-call overhead of splitting outweighs the gain.
  pool.ParallelFor(m, 64, [&](int, int64_t r0, int64_t r1) {
    const T* a0 = ta == Trans::kNo ? a + r0 * lda : a + r0;
    GemmSerial<T>(ta, tb, r1 - r0, n, k, alpha, a0, lda, b, ldb, beta, c + r0 * ldc, ldc);
  });
}

}  // namespace parity::kernels::cpu
