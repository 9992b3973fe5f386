// cuBLASLt plans, cached per (shape, layout, pointer alignment, data types). Row-major
// C = op(A)·op(B) is computed as the column-major product C^T = op(B)^T·op(A)^T, so no data is
// transposed.
#include "kernels/cuda/gemm.h"

#include <algorithm>
#include <climits>

namespace parity::kernels::cuda {
namespace {

// Largest power of two (≤ 256) dividing the address: cuBLASLt assumes 256-byte alignment unless
// told otherwise, and expert slices or row offsets are often only 4-byte aligned.
int64_t Alignment(const void* p) {
  const auto v = reinterpret_cast<uintptr_t>(p);
  if (v == 0) return 256;
  return std::min<int64_t>(256, static_cast<int64_t>(v & (~v + 1)));
}

void SetPref(cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr,
             uint32_t value) {
  PARITY_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attr, &value, sizeof(value)));
}

LtLayout MakeLayout(cudaDataType_t type, int64_t rows, int64_t cols, int64_t ld) {
  cublasLtMatrixLayout_t layout = nullptr;
  PARITY_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&layout, type, static_cast<uint64_t>(rows),
                                                 static_cast<uint64_t>(cols), ld));
  return LtLayout(layout);
}

// Column-major plan: C[m,n] = op(A)·op(B), A stored m×k (ta = N) or k×m (ta = T), likewise B.
MatmulPlan MakePlan(BackendState& st, const MatmulKey& key) {
  const auto [ta, tb, m, n, k, lda, ldb, ldc, align_a, align_b, align_c, ab_type, c_type] = key;
  const auto ab = static_cast<cudaDataType_t>(ab_type), ct = static_cast<cudaDataType_t>(c_type);
  MatmulPlan plan;
  cublasLtMatmulDesc_t desc = nullptr;
  PARITY_CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  plan.desc = LtMatmulDesc(desc);
  const cublasOperation_t op_a = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  PARITY_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)));
  PARITY_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)));
  plan.a = ta ? MakeLayout(ab, k, m, lda) : MakeLayout(ab, m, k, lda);
  plan.b = tb ? MakeLayout(ab, n, k, ldb) : MakeLayout(ab, k, n, ldb);
  plan.c = MakeLayout(ct, m, n, ldc);

  cublasLtMatmulPreference_t raw_pref = nullptr;
  PARITY_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&raw_pref));
  LtPreference pref(raw_pref);
  const uint64_t ws = st.workspace_bytes;
  PARITY_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      raw_pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
  SetPref(raw_pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, static_cast<uint32_t>(align_a));
  SetPref(raw_pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, static_cast<uint32_t>(align_b));
  SetPref(raw_pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, static_cast<uint32_t>(align_c));
  SetPref(raw_pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, static_cast<uint32_t>(align_c));
  // A bf16 output is rounded once: split-K may keep its partial sums only in the fp32 compute
  // type (not "in place" in the output buffer, nor in the output type). fp32 plans keep the
  // default mask, so the parity path chooses exactly what it chose before.
  if (ct == CUDA_R_16BF) {
    SetPref(raw_pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
            CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE);
  }
  cublasLtMatmulHeuristicResult_t result{};
  int returned = 0;
  const cublasStatus_t s =
      cublasLtMatmulAlgoGetHeuristic(st.lt.get(), desc, plan.a.get(), plan.b.get(), plan.c.get(),
                                     plan.c.get(), raw_pref, 1, &result, &returned);
  if (s == CUBLAS_STATUS_SUCCESS && returned > 0 && result.workspaceSize <= st.workspace_bytes) {
    plan.algo = result.algo;
    plan.use_lt = true;
  }
  return plan;
}

// The types of one GEMM: A and B share a type; C (= D) has its own.
struct GemmTypes {
  cudaDataType_t ab, c;
};

size_t ElementBytes(cudaDataType_t t) { return t == CUDA_R_16BF ? 2 : 4; }

// The cuBLAS fallback where Lt offers no algorithm for a shape: cublasSgemm for fp32 (as before),
// cublasGemmEx with the same types and CUBLAS_COMPUTE_32F for bf16 (the handle's math mode keeps
// its reductions in fp32 and fp32 free of TF32: cuda_device.cu).
void FallbackGemm(BackendState& st, GemmTypes types, Trans ta, Trans tb, int m, int n, int k,
                  const float* alpha, const void* a, int lda, const void* b, int ldb,
                  const float* beta, void* c, int ldc) {
  const cublasOperation_t op_b = tb == Trans::kYes ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_a = ta == Trans::kYes ? CUBLAS_OP_T : CUBLAS_OP_N;
  if (types.ab == CUDA_R_32F) {
    PARITY_CUBLAS_CHECK(cublasSgemm(st.blas.get(), op_b, op_a, n, m, k, alpha,
                                    static_cast<const float*>(b), ldb, static_cast<const float*>(a),
                                    lda, beta, static_cast<float*>(c), ldc));
    return;
  }
  PARITY_CUBLAS_CHECK(cublasGemmEx(st.blas.get(), op_b, op_a, n, m, k, alpha, b, types.ab, ldb, a,
                                   types.ab, lda, beta, c, types.c, ldc, CUBLAS_COMPUTE_32F,
                                   CUBLAS_GEMM_DEFAULT));
}

void GemmTyped(BackendState& st, GemmTypes types, Trans ta, Trans tb, int64_t m, int64_t n,
               int64_t k, float alpha, const void* a, int64_t lda, const void* b, int64_t ldb,
               float beta, void* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {          // C = beta·C: only the cases the engine can produce
    if (beta == 0.0f) {  // all-zero bits are +0 in fp32 and in bf16
      const size_t e = ElementBytes(types.c);
      PARITY_CUDA_CHECK(cudaMemset2DAsync(c, ldc * e, 0, n * e, static_cast<size_t>(m), st.stream));
      return;
    }
    if (beta == 1.0f) return;
    Die("Gemm", "k = 0 with beta other than 0 or 1", __FILE__, __LINE__);
  }
  if (m > INT_MAX || n > INT_MAX || k > INT_MAX) {
    Die("Gemm", "a dimension exceeds INT_MAX", __FILE__, __LINE__);
  }
  // Row-major C[m,n] = op(A)·op(B)  ⇔  column-major C^T[n,m] = op(B)^T·op(A)^T.
  const MatmulKey key{
      tb == Trans::kYes, ta == Trans::kYes, n,        m,      k, ldb, lda, ldc, Alignment(b),
      Alignment(a),      Alignment(c),      types.ab, types.c};
  // Expert GEMMs bring a new row count with every routing, so the cache is bounded. Dropping it
  // whole is safe: the heuristic gives a key the same algorithm again, so no result changes.
  constexpr size_t kMaxMatmulPlans = 4096;
  std::lock_guard<std::mutex> lock(st.plans_mu);
  auto it = st.plans.find(key);
  if (it == st.plans.end()) {
    if (st.plans.size() >= kMaxMatmulPlans) st.plans.clear();
    it = st.plans.emplace(key, MakePlan(st, key)).first;
  }
  const MatmulPlan& plan = it->second;
  if (plan.use_lt) {
    PARITY_CUBLAS_CHECK(cublasLtMatmul(st.lt.get(), plan.desc.get(), &alpha, b, plan.a.get(), a,
                                       plan.b.get(), &beta, c, plan.c.get(), c, plan.c.get(),
                                       &plan.algo, st.workspace.get(), st.workspace_bytes,
                                       st.stream));
  } else {
    FallbackGemm(st, types, ta, tb, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k),
                 &alpha, a, static_cast<int>(lda), b, static_cast<int>(ldb), &beta, c,
                 static_cast<int>(ldc));
  }
}

}  // namespace

void Gemm(BackendState& st, Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, float alpha,
          const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
          int64_t ldc) {
  GemmTyped(st, {CUDA_R_32F, CUDA_R_32F}, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void Gemm(BackendState& st, Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, float alpha,
          const Bf16* a, int64_t lda, const Bf16* b, int64_t ldb, float beta, Bf16* c,
          int64_t ldc) {
  GemmTyped(st, {CUDA_R_16BF, CUDA_R_16BF}, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void Gemm(BackendState& st, Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, float alpha,
          const Bf16* a, int64_t lda, const Bf16* b, int64_t ldb, float beta, float* c,
          int64_t ldc) {
  GemmTyped(st, {CUDA_R_16BF, CUDA_R_32F}, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace parity::kernels::cuda
