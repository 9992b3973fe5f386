// CUDA kernels for the dense ops (embedding, RMSNorm, matmul, SwiGLU, cross-entropy), mirroring
// cpu/ops_dense.h operation for operation. Cross-token reductions (embedding rows, RMSNorm weight
// gradients) use no atomics: each output element is summed by one thread in a fixed order, or in
// two passes (fixed chunks, then the chunks in order), so results repeat bit for bit. RMSNorm and
// SwiGLU are templated on the element types the bf16 mode stores in bf16 (float math, one
// rounding per bf16 store); the matmuls pick the bf16 GEMM overloads of gemm.h.
#include <cmath>
#include <type_traits>

#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/ops.h"

namespace parity::kernels::cuda {
namespace {

constexpr double kRmsNormEps = 1e-5;  // cpu::kRmsNormEps
constexpr int kEmbeddingTokenTile = 2048;
constexpr int64_t kDwRowsPerChunk = 64;

__global__ void EmbeddingForwardKernel(int64_t t, int64_t d, float* out, const int32_t* tokens,
                                       const float* table) {
  const int64_t n = t * d;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = i / d;
    out[i] = table[static_cast<int64_t>(tokens[row]) * d + (i - row * d)];
  }
}

// Block (column tile, vocabulary row): one thread per column adds, in token order, the dout rows
// of the tokens equal to this row — the same float additions in the same order as the CPU loop.
__global__ void EmbeddingBackwardKernel(int64_t t, int64_t d, float* dtable, const float* dout,
                                        const int32_t* tokens) {
  __shared__ int32_t tile[kEmbeddingTokenTile];
  const int64_t row = blockIdx.y;
  const int64_t col = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  float acc = col < d ? dtable[row * d + col] : 0.0f;
  for (int64_t base = 0; base < t; base += kEmbeddingTokenTile) {
    const int n = static_cast<int>(t - base < kEmbeddingTokenTile ? t - base : kEmbeddingTokenTile);
    __syncthreads();  // the previous tile is no longer read
    for (int i = threadIdx.x; i < n; i += blockDim.x) tile[i] = tokens[base + i];
    __syncthreads();
    if (col < d) {
      for (int i = 0; i < n; ++i) {
        if (tile[i] == row) acc += dout[(base + i) * d + col];
      }
    }
  }
  if (col < d) dtable[row * d + col] = acc;
}

// One block per row. TOut: float, or Bf16 in the bf16 mode (x, w and rstd stay fp32).
template <typename TOut>
__global__ void RmsNormForwardKernel(int64_t d, TOut* out, float* rstd, const float* x,
                                     const float* w) {
  __shared__ double red[32];
  const int64_t i = blockIdx.x;
  const float* xi = x + i * d;
  double ss = 0.0;
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) ss += static_cast<double>(xi[j]) * xi[j];
  ss = BlockSum(ss, red);
  const float r = static_cast<float>(1.0 / sqrt(ss / static_cast<double>(d) + kRmsNormEps));
  if (threadIdx.x == 0) rstd[i] = r;
  TOut* oi = out + i * d;
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) Store(oi, j, xi[j] * r * w[j]);
}

// dx[i,:] += r·w·g − r³/D·x·Σ_j x·w·g, one block per row. TG (dout): float or Bf16.
template <typename TG>
__global__ void RmsNormBackwardDxKernel(int64_t d, float* dx, const TG* dout, const float* x,
                                        const float* w, const float* rstd) {
  __shared__ double red[32];
  const int64_t i = blockIdx.x;
  const float* xi = x + i * d;
  const TG* gi = dout + i * d;
  const float r = rstd[i];
  double dot = 0.0;
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) dot += xi[j] * w[j] * Load(gi, j);
  const float dotf = static_cast<float>(BlockSum(dot, red));
  const float coef = r * r * r * dotf / static_cast<float>(d);
  float* dxi = dx + i * d;
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
    dxi[j] += r * w[j] * Load(gi, j) - coef * xi[j];
  }
}

// Pass 1 of dw: partial[chunk, j] = Σ over the chunk's rows of g·x·r (one thread per column).
template <typename TG>
__global__ void RmsNormDwPartialKernel(int64_t t, int64_t d, double* partial, const TG* dout,
                                       const float* x, const float* rstd) {
  const int64_t chunk = blockIdx.x;
  const int64_t col = blockIdx.y * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (col >= d) return;
  const int64_t r0 = chunk * kDwRowsPerChunk;
  const int64_t r1 = r0 + kDwRowsPerChunk < t ? r0 + kDwRowsPerChunk : t;
  double acc = 0.0;
  for (int64_t i = r0; i < r1; ++i) acc += Load(dout, i * d + col) * x[i * d + col] * rstd[i];
  partial[chunk * d + col] = acc;
}

// Pass 2: dw[j] += Σ_chunks partial[chunk, j], chunks in order.
__global__ void RmsNormDwFinalKernel(int64_t chunks, int64_t d, float* dw, const double* partial) {
  const int64_t col = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (col >= d) return;
  double acc = 0.0;
  for (int64_t c = 0; c < chunks; ++c) acc += partial[c * d + col];
  dw[col] += static_cast<float>(acc);
}

__device__ __forceinline__ float Sigmoid(float a) { return 1.0f / (1.0f + expf(-a)); }

// T: float, or Bf16 in the bf16 mode (g, ab, dg, dab all bf16; the math in float).
template <typename T>
__global__ void SwiGluForwardKernel(int64_t t, int64_t f, T* g, const T* ab) {
  const int64_t n = t * f;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < n;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = idx / f, j = idx - i * f;
    const float a = Load(ab, i * 2 * f + j), b = Load(ab, i * 2 * f + f + j);
    Store(g, idx, a * Sigmoid(a) * b);
  }
}

template <typename T>
__global__ void SwiGluBackwardKernel(int64_t t, int64_t f, T* dab, const T* dg, const T* ab) {
  const int64_t n = t * f;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < n;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = idx / f, j = idx - i * f;
    const float a = Load(ab, i * 2 * f + j), b = Load(ab, i * 2 * f + f + j), d = Load(dg, idx);
    const float sg = Sigmoid(a);
    Store(dab, i * 2 * f + f + j, d * a * sg);
    Store(dab, i * 2 * f + j, d * b * sg * (1.0f + a * (1.0f - sg)));
  }
}

// One warp per row: max, Σ exp in double, as cpu::CrossEntropyForward.
constexpr int kRowsPerBlock = kBlock / 32;

__global__ void CrossEntropyForwardKernel(int64_t t, int64_t v, float* loss, const float* logits,
                                          const int32_t* targets) {
  const int64_t row = blockIdx.x * static_cast<int64_t>(kRowsPerBlock) + threadIdx.x / 32;
  const int lane = threadIdx.x & 31;
  if (row >= t) return;  // uniform per warp
  const float* li = logits + row * v;
  float mx = -INFINITY;
  for (int64_t j = lane; j < v; j += 32) mx = fmaxf(mx, li[j]);
  mx = WarpMax(mx);
  double sum = 0.0;
  for (int64_t j = lane; j < v; j += 32) sum += exp(static_cast<double>(li[j] - mx));
  sum = WarpSum(sum);
  if (lane == 0) {
    loss[row] = static_cast<float>(log(sum) + mx - static_cast<double>(li[targets[row]]));
  }
}

__global__ void CrossEntropyBackwardKernel(int64_t t, int64_t v, float* dlogits,
                                           const float* logits, const int32_t* targets,
                                           double scale) {
  const int64_t row = blockIdx.x * static_cast<int64_t>(kRowsPerBlock) + threadIdx.x / 32;
  const int lane = threadIdx.x & 31;
  if (row >= t) return;
  const float* li = logits + row * v;
  float* di = dlogits + row * v;
  float mx = -INFINITY;
  for (int64_t j = lane; j < v; j += 32) mx = fmaxf(mx, li[j]);
  mx = WarpMax(mx);
  double sum = 0.0;
  for (int64_t j = lane; j < v; j += 32) sum += exp(static_cast<double>(li[j] - mx));
  const double inv = 1.0 / WarpSum(sum);
  const int64_t target = targets[row];
  for (int64_t j = lane; j < v; j += 32) {
    float val = static_cast<float>(scale * exp(static_cast<double>(li[j] - mx)) * inv);
    if (j == target) val -= static_cast<float>(scale);
    di[j] = val;
  }
}

unsigned WarpRowBlocks(int64_t rows) {
  return static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
}

}  // namespace

void EmbeddingForward(const OpContext& ctx, int64_t t, int64_t d, float* out, const int32_t* tokens,
                      const float* table) {
  if (t * d == 0) return;
  EmbeddingForwardKernel<<<GridFor(t * d), kBlock, 0, StreamOf(ctx)>>>(t, d, out, tokens, table);
  PARITY_CUDA_LAUNCHED();
}

void EmbeddingBackward(const OpContext& ctx, int64_t t, int64_t d, int64_t v, float* dtable,
                       const float* dout, const int32_t* tokens) {
  if (t > 0 && d > 0) {
    const dim3 grid(static_cast<unsigned>((d + kBlock - 1) / kBlock), static_cast<unsigned>(v));
    EmbeddingBackwardKernel<<<grid, kBlock, 0, StreamOf(ctx)>>>(t, d, dtable, dout, tokens);
    PARITY_CUDA_LAUNCHED();
  }
  ctx.Count(FlopKind::kVocab, static_cast<double>(t) * d);
}

namespace {

// Host halves shared by the fp32 ops and the bf16 mode's: the element types pick the kernel
// instance and the Gemm overload; shapes, launches and FLOP counts are the same for both.
template <typename TOut>
void RmsNormForwardImpl(const OpContext& ctx, int64_t t, int64_t d, TOut* out, float* rstd,
                        const float* x, const float* w) {
  if (t > 0) {
    RmsNormForwardKernel<<<static_cast<unsigned>(t), kBlock, 0, StreamOf(ctx)>>>(d, out, rstd, x,
                                                                                 w);
    PARITY_CUDA_LAUNCHED();
  }
  ctx.Count(FlopKind::kElementwise, 4.0 * t * d);
}

template <typename TG>
void RmsNormBackwardImpl(const OpContext& ctx, int64_t t, int64_t d, float* dx, float* dw,
                         const TG* dout, const float* x, const float* w, const float* rstd) {
  if (t > 0) {
    const cudaStream_t stream = StreamOf(ctx);
    RmsNormBackwardDxKernel<<<static_cast<unsigned>(t), kBlock, 0, stream>>>(d, dx, dout, x, w,
                                                                             rstd);
    PARITY_CUDA_LAUNCHED();
    const int64_t chunks = (t + kDwRowsPerChunk - 1) / kDwRowsPerChunk;
    const auto col_tiles = static_cast<unsigned>((d + kBlock - 1) / kBlock);
    Scratch<double> partial(stream, chunks * d);
    RmsNormDwPartialKernel<<<dim3(static_cast<unsigned>(chunks), col_tiles), kBlock, 0, stream>>>(
        t, d, partial.get(), dout, x, rstd);
    PARITY_CUDA_LAUNCHED();
    RmsNormDwFinalKernel<<<col_tiles, kBlock, 0, stream>>>(chunks, d, dw, partial.get());
    PARITY_CUDA_LAUNCHED();
  }
  ctx.Count(FlopKind::kElementwise, 10.0 * t * d);
}

// y[i] = bf16(y[i] + add[i]): the one rounding of an accumulated bf16 product.
__global__ void AddIntoBf16Kernel(int64_t n, Bf16* y, const float* add) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    Store(y, i, Load(y, i) + add[i]);
  }
}

// c[m,n] (=|+=) op(a)·op(b), c contiguous (ldc = n). A bf16 c that accumulates is rounded once:
// cuBLASLt's sm_90 kernels round the product to bf16 before they add a bf16 C (two roundings;
// measured on an H200, bench/RESULTS.md "GPU check"), so the product goes to fp32 scratch and
// one kernel adds it and rounds. Anything else is one GEMM.
template <typename TC, typename TX>
void GemmInto(BackendState& st, Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, const TX* a,
              int64_t lda, const TX* b, int64_t ldb, Accumulate acc, TC* c) {
  if constexpr (std::is_same_v<TC, Bf16>) {
    if (acc == Accumulate::kYes && m * n > 0 && k > 0) {
      Scratch<float> product(st.stream, m * n);
      Gemm(st, ta, tb, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, product.get(), n);
      AddIntoBf16Kernel<<<GridFor(m * n), kBlock, 0, st.stream>>>(m * n, c, product.get());
      PARITY_CUDA_LAUNCHED();
      return;
    }
  }
  Gemm(st, ta, tb, m, n, k, 1.0f, a, lda, b, ldb, acc == Accumulate::kYes ? 1.0f : 0.0f, c, n);
}

// y[T,N] (=|+=) x[T,K]·W[N,K]^T.
template <typename TY, typename TX>
void MatmulForwardImpl(const OpContext& ctx, const MatmulShape& s, TY* y, const TX* x, const TX* w,
                       Accumulate acc, FlopKind kind) {
  GemmInto(State(ctx), Trans::kNo, Trans::kYes, s.rows, s.out, s.in, x, s.in, w, s.in, acc, y);
  ctx.Count(kind, 2.0 * s.rows * s.out * s.in);
}

// dx[T,K] (=|+=) dy·W (skipped when dx is null);  dW[N,K] += dy^T·x (always fp32).
template <typename T>
void MatmulBackwardImpl(const OpContext& ctx, const MatmulShape& s, T* dx, float* dw, const T* dy,
                        const T* x, const T* w, Accumulate acc, FlopKind kind) {
  BackendState& st = State(ctx);
  if (dx != nullptr) {
    GemmInto(st, Trans::kNo, Trans::kNo, s.rows, s.in, s.out, dy, s.out, w, s.in, acc, dx);
    ctx.Count(kind, 2.0 * s.rows * s.out * s.in);
  }
  Gemm(st, Trans::kYes, Trans::kNo, s.out, s.in, s.rows, 1.0f, dy, s.out, x, s.in, 1.0f, dw, s.in);
  ctx.Count(kind, 2.0 * s.rows * s.out * s.in);
}

template <typename T>
void SwiGluForwardImpl(const OpContext& ctx, int64_t t, int64_t f, T* g, const T* ab) {
  if (t * f > 0) {
    SwiGluForwardKernel<<<GridFor(t * f), kBlock, 0, StreamOf(ctx)>>>(t, f, g, ab);
    PARITY_CUDA_LAUNCHED();
  }
  ctx.Count(FlopKind::kElementwise, 5.0 * t * f);
}

template <typename T>
void SwiGluBackwardImpl(const OpContext& ctx, int64_t t, int64_t f, T* dab, const T* dg,
                        const T* ab) {
  if (t * f > 0) {
    SwiGluBackwardKernel<<<GridFor(t * f), kBlock, 0, StreamOf(ctx)>>>(t, f, dab, dg, ab);
    PARITY_CUDA_LAUNCHED();
  }
  ctx.Count(FlopKind::kElementwise, 10.0 * t * f);
}

}  // namespace

void RmsNormForward(const OpContext& ctx, int64_t t, int64_t d, float* out, float* rstd,
                    const float* x, const float* w) {
  RmsNormForwardImpl(ctx, t, d, out, rstd, x, w);
}
void RmsNormBackward(const OpContext& ctx, int64_t t, int64_t d, float* dx, float* dw,
                     const float* dout, const float* x, const float* w, const float* rstd) {
  RmsNormBackwardImpl(ctx, t, d, dx, dw, dout, x, w, rstd);
}
void MatmulForward(const OpContext& ctx, const MatmulShape& s, float* y, const float* x,
                   const float* w, Accumulate acc, FlopKind kind) {
  MatmulForwardImpl(ctx, s, y, x, w, acc, kind);
}
void MatmulBackward(const OpContext& ctx, const MatmulShape& s, float* dx, float* dw,
                    const float* dy, const float* x, const float* w, Accumulate acc,
                    FlopKind kind) {
  MatmulBackwardImpl(ctx, s, dx, dw, dy, x, w, acc, kind);
}
void SwiGluForward(const OpContext& ctx, int64_t t, int64_t f, float* g, const float* ab) {
  SwiGluForwardImpl(ctx, t, f, g, ab);
}
void SwiGluBackward(const OpContext& ctx, int64_t t, int64_t f, float* dab, const float* dg,
                    const float* ab) {
  SwiGluBackwardImpl(ctx, t, f, dab, dg, ab);
}

// ---- the bf16 mode (op_table_bf16.h) -----------------------------------------------------------
void RmsNormForward(const OpContext& ctx, int64_t t, int64_t d, Bf16* out, float* rstd,
                    const float* x, const float* w) {
  RmsNormForwardImpl(ctx, t, d, out, rstd, x, w);
}
void RmsNormBackward(const OpContext& ctx, int64_t t, int64_t d, float* dx, float* dw,
                     const Bf16* dout, const float* x, const float* w, const float* rstd) {
  RmsNormBackwardImpl(ctx, t, d, dx, dw, dout, x, w, rstd);
}
void MatmulForward(const OpContext& ctx, const MatmulShape& s, Bf16* y, const Bf16* x,
                   const Bf16* w, Accumulate acc, FlopKind kind) {
  MatmulForwardImpl(ctx, s, y, x, w, acc, kind);
}
void MatmulForward(const OpContext& ctx, const MatmulShape& s, float* y, const Bf16* x,
                   const Bf16* w, Accumulate acc, FlopKind kind) {
  MatmulForwardImpl(ctx, s, y, x, w, acc, kind);
}
void MatmulBackward(const OpContext& ctx, const MatmulShape& s, Bf16* dx, float* dw, const Bf16* dy,
                    const Bf16* x, const Bf16* w, Accumulate acc, FlopKind kind) {
  MatmulBackwardImpl(ctx, s, dx, dw, dy, x, w, acc, kind);
}
// The tensor cores take bf16 operands only, so the fp32 dy is rounded to bf16 (a stream-ordered
// scratch copy) and both products run as in the bf16-dy op: dx = bf16(dy)·W, dW += bf16(dy)^T·x.
void MatmulBackward(const OpContext& ctx, const MatmulShape& s, Bf16* dx, float* dw,
                    const float* dy, const Bf16* x, const Bf16* w, Accumulate acc, FlopKind kind) {
  const int64_t n = s.rows * s.out;
  Scratch<Bf16> dy16(StreamOf(ctx), n);
  CastToBf16(ctx, n, dy16.get(), dy);
  MatmulBackwardImpl(ctx, s, dx, dw, static_cast<const Bf16*>(dy16.get()), x, w, acc, kind);
}
void SwiGluForward(const OpContext& ctx, int64_t t, int64_t f, Bf16* g, const Bf16* ab) {
  SwiGluForwardImpl(ctx, t, f, g, ab);
}
void SwiGluBackward(const OpContext& ctx, int64_t t, int64_t f, Bf16* dab, const Bf16* dg,
                    const Bf16* ab) {
  SwiGluBackwardImpl(ctx, t, f, dab, dg, ab);
}

void CrossEntropyForward(const OpContext& ctx, int64_t t, int64_t v, float* loss,
                         const float* logits, const int32_t* targets) {
  if (t > 0) {
    CrossEntropyForwardKernel<<<WarpRowBlocks(t), kBlock, 0, StreamOf(ctx)>>>(t, v, loss, logits,
                                                                              targets);
    PARITY_CUDA_LAUNCHED();
  }
  ctx.Count(FlopKind::kElementwise, 3.0 * t * v);
}

void CrossEntropyBackward(const OpContext& ctx, int64_t t, int64_t v, float* dlogits,
                          const float* logits, const int32_t* targets, double scale) {
  if (t > 0) {
    CrossEntropyBackwardKernel<<<WarpRowBlocks(t), kBlock, 0, StreamOf(ctx)>>>(
        t, v, dlogits, logits, targets, scale);
    PARITY_CUDA_LAUNCHED();
  }
  ctx.Count(FlopKind::kElementwise, 4.0 * t * v);
}

}  // namespace parity::kernels::cuda
