// The grouped matmul (GroupedMatmulShape, backend/op_table.h; the MoE experts' GEMMs) as one
// cublasGemmGroupedBatchedEx call per product instead of one GEMM per group.
//
// Every group's GEMM is a row-major product in gemm.h's convention, mapped to column-major as
// gemm.cc maps it: row-major C[m,n] = op(A)·op(B) is column-major C^T[n,m] = op(B)^T·op(A)^T, so
// cuBLAS gets transa = tb, transb = ta, (m, n) swapped, A ↔ B swapped, and the row-major leading
// dimensions unchanged. With n_g the group's rows, K = in, N = out:
//   forward  y_g[n_g,N]  = x_g[n_g,K]·W_g[N,K]^T   row-major (N,T, m=n_g, n=N, k=K)
//            → cuBLAS (T,N, m=N, n=n_g, k=K, A=W_g lda=K, B=x_g ldb=K, C=y_g ldc=N)
//   dx       dx_g[n_g,K] = dy_g[n_g,N]·W_g[N,K]    row-major (N,N, m=n_g, n=K, k=N)
//            → cuBLAS (N,N, m=K, n=n_g, k=N, A=W_g lda=K, B=dy_g ldb=N, C=dx_g ldc=K)
//   dW       dW_g[N,K] += dy_g^T·x_g               row-major (T,N, m=N, n=K, k=n_g), beta 1
//            → cuBLAS (N,T, m=K, n=N, k=n_g, A=x_g lda=K, B=dy_g ldb=N, C=dW_g ldc=K)
// Each group is its own cuBLAS "group" of one problem (the row counts differ). Empty groups are
// left out on the host (shape arrays) and on the device (pointer arrays) by the same rule, so the
// two lists stay in step. The pointer arrays are written on the device by a one-block kernel from
// the device offsets and the base pointers (kernel arguments, copied at launch), into
// stream-ordered scratch: no host buffer outlives the call and nothing synchronises.
//
// Types (cuBLAS's table for cublasGemmGroupedBatchedEx): CUBLAS_COMPUTE_32F with fp32 A/B/C (the
// parity path; never the TF32 compute type) and with bf16 A/B/C (the bf16 mode's y and dx, rounded
// once from the fp32 result). bf16 A/B with an fp32 C (the bf16 mode's dW) is not in that table:
// those products, bf16 matrices that miss cuBLAS's pointer alignment rule (MeetsAlignment), and
// any call cuBLAS answers CUBLAS_STATUS_NOT_SUPPORTED run as per-group GEMMs through gemm.cc. FLOPs
// are counted on the host per non-empty group, as the matmul ops count.
#include <climits>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/flash_tc_device.cuh"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/grouped_wgrad_tc.h"
#include "kernels/cuda/ops.h"

namespace parity::kernels::cuda {

extern __shared__ __align__(16) unsigned char wgrad_smem[];

namespace {

constexpr int kPointerThreads = 1024;  // one block builds the pointer arrays

// Where group g's matrix of one operand starts: base + offsets[g]·row_bytes + g·group_bytes (the
// row-indexed arrays x, y, dy, dx step by rows; the weights by whole [N,K] slices).
struct GroupOperand {
  const char* base;
  int64_t row_bytes;
  int64_t group_bytes;
};
// The row-major A, B and C of every group's GEMM.
struct GroupOperands {
  GroupOperand a, b, c;
};

__device__ void* GroupAddress(const GroupOperand& o, int64_t row, int64_t g) {
  return const_cast<char*>(o.base) + row * o.row_bytes + g * o.group_bytes;
}

// ptrs[0, live) = the A of each non-empty group in group order, ptrs[live, 2·live) its B,
// ptrs[2·live, 3·live) its C. A group's index among the non-empty ones is a block-wide prefix
// count (warp ballots, then the warps before it), chunk by chunk of blockDim.x groups.
__global__ void GroupPointersKernel(int64_t groups, const int64_t* offsets, GroupOperands op,
                                    int64_t live, void** ptrs) {
  __shared__ int warp_live[kPointerThreads / 32];
  __shared__ int64_t before;  // non-empty groups in earlier chunks
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (threadIdx.x == 0) before = 0;
  __syncthreads();
  for (int64_t g0 = 0; g0 < groups; g0 += blockDim.x) {  // uniform trip count
    const int64_t g = g0 + threadIdx.x;
    const int64_t row = g < groups ? offsets[g] : 0;
    const bool nonempty = g < groups && offsets[g + 1] > row;
    const unsigned mask = __ballot_sync(0xffffffffu, nonempty);
    if (lane == 0) warp_live[warp] = __popc(mask);
    __syncthreads();
    int64_t index = before + __popc(mask & ((1u << lane) - 1u));
    for (int w = 0; w < warp; ++w) index += warp_live[w];
    if (nonempty && index < live) {
      ptrs[index] = GroupAddress(op.a, row, g);
      ptrs[live + index] = GroupAddress(op.b, row, g);
      ptrs[2 * live + index] = GroupAddress(op.c, row, g);
    }
    __syncthreads();  // everyone has read warp_live and before
    if (threadIdx.x == 0) {
      for (int w = 0; w < static_cast<int>(blockDim.x >> 5); ++w) before += warp_live[w];
    }
    __syncthreads();
  }
}

// One row-major GEMM per group (gemm.h's convention); the group's row count is m (forward, dx)
// or k (dW), the other two dimensions are fixed.
enum class RowsAre { kM, kK };
struct GroupedGemm {
  Trans ta, tb;
  RowsAre rows_are;
  int64_t fixed0, fixed1;  // (n, k) when rows are m; (m, n) when rows are k
  GroupOperands op;
  int64_t lda, ldb, ldc;
  float beta;
};

template <typename T>
constexpr cudaDataType_t DataType() {
  return std::is_same_v<T, float> ? CUDA_R_32F : CUDA_R_16BF;
}

cublasOperation_t Op(Trans t) { return t == Trans::kYes ? CUBLAS_OP_T : CUBLAS_OP_N; }

// The non-empty groups' row-major shapes, in group order.
struct GroupShapes {
  std::vector<int64_t> group, m, n, k;
};
GroupShapes ShapesOf(const GroupedMatmulShape& s, const GroupedGemm& gg) {
  GroupShapes out;
  for (int64_t g = 0; g < s.groups; ++g) {
    const int64_t rows = s.host_offsets[g + 1] - s.host_offsets[g];
    if (rows == 0) continue;
    out.group.push_back(g);
    const bool m_rows = gg.rows_are == RowsAre::kM;
    out.m.push_back(m_rows ? rows : gg.fixed0);
    out.n.push_back(m_rows ? gg.fixed0 : gg.fixed1);
    out.k.push_back(m_rows ? gg.fixed1 : rows);
  }
  return out;
}

// The groups one by one through gemm.cc (host pointers from the host offsets).
template <typename TAB, typename TC>
void PerGroupGemms(BackendState& st, const GroupedMatmulShape& s, const GroupedGemm& gg,
                   const GroupShapes& sh) {
  const auto at = [&](const GroupOperand& o, int64_t g) {
    return o.base + s.host_offsets[g] * o.row_bytes + g * o.group_bytes;
  };
  for (size_t i = 0; i < sh.group.size(); ++i) {
    const int64_t g = sh.group[i];
    Gemm(st, gg.ta, gg.tb, sh.m[i], sh.n[i], sh.k[i], 1.0f,
         reinterpret_cast<const TAB*>(at(gg.op.a, g)), gg.lda,
         reinterpret_cast<const TAB*>(at(gg.op.b, g)), gg.ldb, gg.beta,
         reinterpret_cast<TC*>(const_cast<char*>(at(gg.op.c, g))), gg.ldc);
  }
}

// cuBLAS's pointer rule for 16-bit A/B in the grouped call: a matrix whose k·(element size) is a
// multiple of 16 bytes must start 16-byte aligned, one whose k·size is a multiple of 4 must start
// 4-byte aligned (vectorised loads are chosen from k). Expert slices of the flat bf16 weights or
// of odd-width activations can miss that; the caller then runs the per-group GEMMs, whose
// cuBLASLt plans are told each pointer's alignment. fp32 under CUBLAS_COMPUTE_32F has no rule.
template <typename T>
bool MeetsAlignment(const GroupedMatmulShape& s, const GroupedGemm& gg, const GroupShapes& sh) {
  if constexpr (sizeof(T) == sizeof(float)) return true;
  const auto aligned = [&](const GroupOperand& o, int64_t g, int64_t bytes) {
    const auto at =
        reinterpret_cast<uintptr_t>(o.base + s.host_offsets[g] * o.row_bytes + g * o.group_bytes);
    return at % static_cast<uintptr_t>(bytes) == 0;
  };
  for (size_t i = 0; i < sh.group.size(); ++i) {
    const int64_t kb = sh.k[i] * static_cast<int64_t>(sizeof(T));
    const int64_t need = kb % 16 == 0 ? 16 : (kb % 4 == 0 ? 4 : 1);
    const int64_t g = sh.group[i];
    if (!aligned(gg.op.a, g, need) || !aligned(gg.op.b, g, need) || !aligned(gg.op.c, g, need)) {
      return false;
    }
  }
  return true;
}

// One cublasGemmGroupedBatchedEx over the non-empty groups; false when cuBLAS does not support
// the call (the caller falls back), aborts on any other error.
template <typename T>
bool GroupedCall(const OpContext& ctx, const GroupedMatmulShape& s, const GroupedGemm& gg,
                 const GroupShapes& sh) {
  BackendState& st = State(ctx);
  const int64_t live = static_cast<int64_t>(sh.group.size());
  Scratch<void*> ptrs(st.stream, 3 * live);
  GroupPointersKernel<<<1, kPointerThreads, 0, st.stream>>>(s.groups, s.offsets, gg.op, live,
                                                            ptrs.get());
  PARITY_CUDA_LAUNCHED();
  // Column-major (see the top of the file): transa = tb, transb = ta, m ↔ n, A ↔ B.
  const std::vector<cublasOperation_t> transa(live, Op(gg.tb)), transb(live, Op(gg.ta));
  std::vector<int> m(live), n(live), k(live);
  for (int64_t i = 0; i < live; ++i) {
    m[i] = static_cast<int>(sh.n[i]);
    n[i] = static_cast<int>(sh.m[i]);
    k[i] = static_cast<int>(sh.k[i]);
  }
  const std::vector<int> lda(live, static_cast<int>(gg.ldb)), ldb(live, static_cast<int>(gg.lda));
  const std::vector<int> ldc(live, static_cast<int>(gg.ldc)), size(live, 1);
  const std::vector<float> alpha(live, 1.0f), beta(live, gg.beta);
  void* const* p = ptrs.get();
  const cublasStatus_t status = cublasGemmGroupedBatchedEx(
      st.blas.get(), transa.data(), transb.data(), m.data(), n.data(), k.data(), alpha.data(),
      p + live, DataType<T>(), lda.data(), p, DataType<T>(), ldb.data(), beta.data(), p + 2 * live,
      DataType<T>(), ldc.data(), static_cast<int>(live), size.data(), CUBLAS_COMPUTE_32F);
  if (status == CUBLAS_STATUS_NOT_SUPPORTED) return false;
  PARITY_CUBLAS_CHECK(status);
  return true;
}

// The grouped GEMM with A/B of type TAB and C of type TC: one grouped call where cuBLAS has one
// for the types, per-group GEMMs otherwise.
template <typename TAB, typename TC>
void RunGrouped(const OpContext& ctx, const GroupedMatmulShape& s, const GroupedGemm& gg) {
  const int64_t rows = s.host_offsets[s.groups] - s.host_offsets[0];
  if (rows == 0 || s.in == 0 || s.out == 0) return;
  if (rows > INT_MAX || s.in > INT_MAX || s.out > INT_MAX || s.groups > INT_MAX) {
    Die("GroupedMatmul", "a dimension exceeds INT_MAX", __FILE__, __LINE__);
  }
  const GroupShapes sh = ShapesOf(s, gg);
  if constexpr (std::is_same_v<TAB, TC>) {
    if (MeetsAlignment<TAB>(s, gg, sh) && GroupedCall<TAB>(ctx, s, gg, sh)) return;
  }
  PerGroupGemms<TAB, TC>(State(ctx), s, gg, sh);
}

// The bf16 mode's dW (bf16 dy and x, fp32 dW +=) as one tensor-core launch over every group
// (grouped_wgrad_tc.h), where cuBLAS's grouped call has no such type combination.
__global__ void __launch_bounds__(kFlashThreads) GroupedWgradKernel(WgradArgs a) {
  DeviceLaneEnv env{reinterpret_cast<uint16_t*>(wgrad_smem)};
  GroupedWgradBlock(env, a);
}

// 16-byte rows: N and K multiples of 8 and dy, x 16-byte aligned; the grid's limits.
bool WgradTcSupports(const GroupedMatmulShape& s, const void* dy, const void* x) {
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  return s.out % 8 == 0 && s.in % 8 == 0 && aligned(dy) && aligned(x) && s.groups <= 65535 &&
         GroupedWgradTiles(s.out, s.in) <= INT_MAX;
}

void GroupedWgradTc(const OpContext& ctx, const GroupedMatmulShape& s, float* dw, const Bf16* dy,
                    const Bf16* x) {
  if (s.groups == 0 || s.in == 0 || s.out == 0) return;
  const WgradArgs a{.n = s.out,
                    .k = s.in,
                    .offsets = s.offsets,
                    .dy = reinterpret_cast<const uint16_t*>(dy),
                    .x = reinterpret_cast<const uint16_t*>(x),
                    .dw = dw};
  GroupedWgradKernel<<<dim3(static_cast<unsigned>(GroupedWgradTiles(s.out, s.in)),
                            static_cast<unsigned>(s.groups)),
                       kFlashThreads, GroupedWgradSmem(), State(ctx).stream>>>(a);
  PARITY_CUDA_LAUNCHED();
}

void CountPerGroup(const OpContext& ctx, const GroupedMatmulShape& s, FlopKind kind, int times) {
  for (int64_t g = 0; g < s.groups; ++g) {
    const int64_t n = s.host_offsets[g + 1] - s.host_offsets[g];
    if (n == 0) continue;
    for (int i = 0; i < times; ++i) ctx.Count(kind, 2.0 * n * s.out * s.in);
  }
}

template <typename T>
void ForwardImpl(const OpContext& ctx, const GroupedMatmulShape& s, T* y, const T* x, const T* w,
                 FlopKind kind) {
  const int64_t K = s.in, N = s.out, e = sizeof(T);
  const GroupOperands op{.a = {reinterpret_cast<const char*>(x), K * e, 0},
                         .b = {reinterpret_cast<const char*>(w), 0, N * K * e},
                         .c = {reinterpret_cast<const char*>(y), N * e, 0}};
  RunGrouped<T, T>(ctx, s,
                   {.ta = Trans::kNo,
                    .tb = Trans::kYes,
                    .rows_are = RowsAre::kM,
                    .fixed0 = N,
                    .fixed1 = K,
                    .op = op,
                    .lda = K,
                    .ldb = K,
                    .ldc = N,
                    .beta = 0.0f});
  CountPerGroup(ctx, s, kind, 1);
}

template <typename T>
void BackwardImpl(const OpContext& ctx, const GroupedMatmulShape& s, T* dx, float* dw, const T* dy,
                  const T* x, const T* w, FlopKind kind) {
  const int64_t K = s.in, N = s.out, e = sizeof(T);
  const auto bytes = [](const auto* p) { return reinterpret_cast<const char*>(p); };
  RunGrouped<T, T>(ctx, s,
                   {.ta = Trans::kNo,
                    .tb = Trans::kNo,
                    .rows_are = RowsAre::kM,
                    .fixed0 = K,
                    .fixed1 = N,
                    .op = {.a = {bytes(dy), N * e, 0},
                           .b = {bytes(w), 0, N * K * e},
                           .c = {bytes(dx), K * e, 0}},
                    .lda = N,
                    .ldb = K,
                    .ldc = K,
                    .beta = 0.0f});
  if constexpr (std::is_same_v<T, Bf16>) {
    if (WgradTcSupports(s, dy, x)) {
      GroupedWgradTc(ctx, s, dw, dy, x);
      CountPerGroup(ctx, s, kind, 2);
      return;
    }
  }
  RunGrouped<T, float>(ctx, s,
                       {.ta = Trans::kYes,
                        .tb = Trans::kNo,
                        .rows_are = RowsAre::kK,
                        .fixed0 = N,
                        .fixed1 = K,
                        .op = {.a = {bytes(dy), N * e, 0},
                               .b = {bytes(x), K * e, 0},
                               .c = {bytes(dw), 0, N * K * int64_t{sizeof(float)}}},
                        .lda = N,
                        .ldb = K,
                        .ldc = K,
                        .beta = 1.0f});
  CountPerGroup(ctx, s, kind, 2);
}

}  // namespace

void GroupedMatmulForward(const OpContext& ctx, const GroupedMatmulShape& s, float* y,
                          const float* x, const float* w, FlopKind kind) {
  ForwardImpl(ctx, s, y, x, w, kind);
}
void GroupedMatmulBackward(const OpContext& ctx, const GroupedMatmulShape& s, float* dx, float* dw,
                           const float* dy, const float* x, const float* w, FlopKind kind) {
  BackwardImpl(ctx, s, dx, dw, dy, x, w, kind);
}
void GroupedMatmulForward(const OpContext& ctx, const GroupedMatmulShape& s, Bf16* y, const Bf16* x,
                          const Bf16* w, FlopKind kind) {
  ForwardImpl(ctx, s, y, x, w, kind);
}
void GroupedMatmulBackward(const OpContext& ctx, const GroupedMatmulShape& s, Bf16* dx, float* dw,
                           const Bf16* dy, const Bf16* x, const Bf16* w, FlopKind kind) {
  BackwardImpl(ctx, s, dx, dw, dy, x, w, kind);
}

}  // namespace parity::kernels::cuda
