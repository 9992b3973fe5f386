// The GEMM ceiling: OpenBLAS sgemm at the matrix sizes of the dense reference model (D_m 256,
// D_ffn 688, 2048 tokens per step), forward and both backward products, timed with Google
// Benchmark. Run with OPENBLAS_NUM_THREADS=2 for the 2-core ceiling the engine is compared with.
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <vector>

namespace {

// C[M,N] = op(A)·op(B) with the engine's three layouts: y = x·W^T, dx = dy·W, dW = dy^T·x.
void Sgemm(benchmark::State& state) {
  const int m = static_cast<int>(state.range(0)), n = static_cast<int>(state.range(1));
  const int k = static_cast<int>(state.range(2)), layout = static_cast<int>(state.range(3));
  std::vector<float> a(static_cast<size_t>(m) * k, 0.5f), b(static_cast<size_t>(n) * k, 0.25f);
  std::vector<float> c(static_cast<size_t>(m) * n);
  for (auto _ : state) {
    if (layout == 0) {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1, a.data(), k, b.data(), k, 0,
                  c.data(), n);
    } else if (layout == 1) {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1, a.data(), k, b.data(), n,
                  0, c.data(), n);
    } else {
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, m, n, k, 1, a.data(), m, b.data(), n, 1,
                  c.data(), n);
    }
    benchmark::ClobberMemory();
  }
  state.counters["GFLOPS"] =
      benchmark::Counter(2.0 * m * n * k * state.iterations() / 1e9, benchmark::Counter::kIsRate);
}

// {M, N, K, layout}: T = 2048 tokens; qkv (768), out proj (256), FFN up (1376), down (688).
BENCHMARK(Sgemm)
    ->Args({2048, 768, 256, 0})
    ->Args({2048, 256, 256, 0})
    ->Args({2048, 1376, 256, 0})
    ->Args({2048, 256, 688, 0})
    ->Args({2048, 256, 1376, 1})
    ->Args({1376, 256, 2048, 2})
    ->Args({256, 256, 256, 0})
    ->Args({256, 256, 64, 0})
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
