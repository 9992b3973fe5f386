// The op registry: one list (PARITY_OPS) names every op the model calls and its paired
// forward/backward signatures. From that single list come the OpKind enum, the per-backend
// function table OpTable<T>, and OpTable<T>::Supports(). A backend fills the table; the model
// dispatches only through it and checks Supports() for every op it needs at construction, so the
// dispatch and the capability answer cannot drift apart (ggml keeps two switches that can).
//
// Shape legend used in every signature:
//   T  tokens in a micro-batch (B·S rows)     D  model width D_m
//   B  sequences, S sequence length           V  vocabulary (256)
//   N, K  output / input features of a matmul  H, Hkv, Dh  heads, key/value heads, head dim
//   E  routed experts, Kr experts per token    P  routing slots T·Kr
//   G  row groups of a grouped matmul (the experts), n_g the rows of group g
// Gradient convention: a parameter gradient (dweight) always ACCUMULATES (+=) so micro-batches
// sum without extra buffers; an activation gradient overwrites unless the op takes Accumulate.
#pragma once

#include <array>
#include <cstdint>
#include <type_traits>

#include "kernels/backend/thread_pool.h"

namespace parity::kernels {

// Which bucket an op's FLOPs go to. kModel is what the accounting formula M counts (non-vocabulary
// matmuls, router, attention scores and weighted sums); kVocab is embedding/output head;
// kElementwise is norms, activations, softmax (reported, not compared); kRecompute is everything
// a layer's forward executes again in the backward under activation checkpointing (the model
// moves it there; no op counts into it), so kModel stays M and MFU counts model FLOPs only.
enum class FlopKind : int { kModel = 0, kVocab = 1, kElementwise = 2, kRecompute = 3 };
inline constexpr int kNumFlopKinds = 4;

// Counted FLOPs, per bucket. Ops add to it from the calling thread only (never inside workers).
struct FlopCounter {
  std::array<double, kNumFlopKinds> flops{};
  void Add(FlopKind kind, double f) { flops[static_cast<int>(kind)] += f; }
  double Get(FlopKind kind) const { return flops[static_cast<int>(kind)]; }
  double Total() const { return flops[0] + flops[1] + flops[2] + flops[3]; }
  void Reset() { flops.fill(0.0); }
};

// A backend's own per-device state (CUDA: stream, cuBLAS/cuBLASLt handles, workspace). Defined
// only by the backend that uses it; the CPU backend leaves OpContext::backend null.
struct BackendState;

// What every op receives: where to run its loops, where to count, and the backend's state.
// `flops` may be null; `pool` is null on backends that do not run host loops.
struct OpContext {
  ThreadPool* pool;
  FlopCounter* flops;
  BackendState* backend = nullptr;
  void Count(FlopKind kind, double f) const {
    if (flops != nullptr) flops->Add(kind, f);
  }
};

enum class Accumulate { kNo, kYes };  // whether an output is overwritten or added to
enum class Positions { kRotary, kAlibi };
enum class WeightDecay { kApply, kSkip };  // norm weights are never decayed

struct MatmulShape {
  int64_t rows;  // T: rows of x and y
  int64_t in;    // K: columns of x, columns of W
  int64_t out;   // N: columns of y, rows of W
};

// G groups of rows sharing one matmul shape, one weight each: group g's rows are
// [offsets[g], offsets[g+1]) of x and y (or dy and dx), its weight W_g = w + g·N·K. Rows outside
// [offsets[0], offsets[G]) are not touched. The boundaries come twice, as the same numbers: on
// the device (a GPU builds its per-group pointers there, without a host sync) and on the host
// (GEMM shapes, and which groups are empty and skipped). On the CPU both point at host memory.
struct GroupedMatmulShape {
  int64_t groups;               // G (E for the experts)
  int64_t in;                   // K: columns of x, columns of each W_g
  int64_t out;                  // N: columns of y, rows of each W_g
  const int64_t* offsets;       // [G+1] device
  const int64_t* host_offsets;  // [G+1] host
};

struct AttentionShape {
  int64_t batch, seq, heads, kv_heads, head_dim;
  Positions positions;
  double rope_theta;
};

struct RouteShape {
  int64_t tokens, experts, top_k;
  bool renormalize;   // gates renormalised over the chosen K
  double aux_weight;  // λ of the balance loss
  double z_weight;    // λ_z of the router z-loss
  double grad_scale;  // multiplies the aux/z loss gradients (1/micro-batches)
};

// PARITY_OPS(X, T): X(kind, forward, backward, forward signature, backward signature).
#define PARITY_OPS(X, T)                                                                          \
  /* out[T,D] = table[tokens[t]];  dtable[V,D] += scatter of dout */                              \
  X(kEmbedding, embedding_forward, embedding_backward,                                            \
    void(const OpContext&, int64_t t, int64_t d, T* out, const int32_t* tokens, const T* table),  \
    void(const OpContext&, int64_t t, int64_t d, int64_t v, T* dtable, const T* dout,             \
         const int32_t* tokens))                                                                  \
  /* out = x·rstd·w; rstd[T] saved. dx (+=), dw (+=) */                                         \
  X(kRmsNorm, rmsnorm_forward, rmsnorm_backward,                                                  \
    void(const OpContext&, int64_t t, int64_t d, T* out, T* rstd, const T* x, const T* w),        \
    void(const OpContext&, int64_t t, int64_t d, T* dx, T* dw, const T* dout, const T* x,         \
         const T* w, const T* rstd))                                                              \
  /* y[T,N] (=|+=) x[T,K]·W[N,K]^T.  dx[T,K] (=|+=) dy·W;  dW[N,K] += dy^T·x */                \
  X(kMatmul, matmul_forward, matmul_backward,                                                     \
    void(const OpContext&, const MatmulShape&, T* y, const T* x, const T* w, Accumulate,          \
         FlopKind),                                                                               \
    void(const OpContext&, const MatmulShape&, T* dx, T* dw, const T* dy, const T* x, const T* w, \
         Accumulate, FlopKind))                                                                   \
  /* g[T,F] = silu(ab[:, :F])·ab[:, F:];  dab[T,2F] = */                                         \
  X(kSwiGlu, swiglu_forward, swiglu_backward,                                                     \
    void(const OpContext&, int64_t t, int64_t f, T* g, const T* ab),                              \
    void(const OpContext&, int64_t t, int64_t f, T* dab, const T* dg, const T* ab))               \
  /* Rotary positions applied in place to q and k inside qkv[T, (H+2Hkv)·Dh]; backward rotates   \
     the gradient back (the rotation is orthogonal). */                                           \
  X(kRope, rope_forward, rope_backward, void(const OpContext&, const AttentionShape&, T* qkv),    \
    void(const OpContext&, const AttentionShape&, T* dqkv))                                       \
  /* out[T,H·Dh] = causal softmax(q·k^T/√Dh [+ alibi])·v; only lse[B,H,S] (natural-log       \
     sum-exp of each query row's scaled, masked scores) is saved, never the S×S probabilities;   \
     backward recomputes them from q, k and lse (FlashAttention-2). dqkv = */                     \
  X(kAttention, attention_forward, attention_backward,                                            \
    void(const OpContext&, const AttentionShape&, T* out, T* lse, const T* qkv),                  \
    void(const OpContext&, const AttentionShape&, T* dqkv, const T* dout, const T* out,           \
         const T* lse, const T* qkv))                                                             \
  /* loss[T] = -log softmax(logits)[target];  dlogits[T,V] = scale·(softmax - onehot) */         \
  X(kCrossEntropy, cross_entropy_forward, cross_entropy_backward,                                 \
    void(const OpContext&, int64_t t, int64_t v, T* loss, const T* logits,                        \
         const int32_t* targets),                                                                 \
    void(const OpContext&, int64_t t, int64_t v, T* dlogits, const T* logits,                     \
         const int32_t* targets, double scale))                                                   \
  /* Router: probs[T,E] = softmax(logits); top-K of probs+bias[E] -> expert[T,Kr], gate[T,Kr];    \
     lse[T]; load[E] (slot counts); losses[2] = {aux, z}. Backward: dlogits[T,E] = from dgate     \
     plus the aux and z loss gradients. */                                                        \
  X(kRoute, route_forward, route_backward,                                                        \
    void(const OpContext&, const RouteShape&, T* probs, T* lse, int32_t* expert, T* gate,         \
         int64_t* load, double* losses, const T* logits, const float* bias),                      \
    void(const OpContext&, const RouteShape&, T* dlogits, const T* dgate, const T* probs,         \
         const T* lse, const int32_t* expert, const int64_t* load))                               \
  /* Grouping: xs[P,D] = x[token_of[p]];  dx[T,D] += Σ over the token's slots (slot_of[T,Kr]) */ \
  X(kPermute, permute_forward, permute_backward,                                                  \
    void(const OpContext&, int64_t p, int64_t d, T* xs, const T* x, const int32_t* token_of),     \
    void(const OpContext&, int64_t t, int64_t k, int64_t d, T* dx, const T* dxs,                  \
         const int32_t* slot_of))                                                                 \
  /* y[T,D] += Σ_k gate[t,k]·ys[slot_of[t,k]];  dys[P,D] =, dgate[T,Kr] = */                    \
  X(kCombine, combine_forward, combine_backward,                                                  \
    void(const OpContext&, int64_t t, int64_t k, int64_t d, T* y, const T* ys, const T* gate,     \
         const int32_t* slot_of),                                                                 \
    void(const OpContext&, int64_t t, int64_t k, int64_t d, T* dys, T* dgate, const T* dy,        \
         const T* ys, const T* gate, const int32_t* slot_of))                                     \
  /* Per group g (GroupedMatmulShape): y_g[n_g,N] = x_g·W_g^T (=);  dx_g[n_g,K] = dy_g·W_g (=); \
     dW_g[N,K] += dy_g^T·x_g. FLOPs as matmul_forward/backward count them, group by group. */    \
  X(kGroupedMatmul, grouped_matmul_forward, grouped_matmul_backward,                              \
    void(const OpContext&, const GroupedMatmulShape&, T* y, const T* x, const T* w, FlopKind),    \
    void(const OpContext&, const GroupedMatmulShape&, T* dx, T* dw, const T* dy, const T* x,      \
         const T* w, FlopKind))

// Ops without a backward: the routing plan, the loss-free bias update, the gradient norm and the
// optimizer step.
struct AdamWArgs {
  double lr, beta1, beta2, eps, weight_decay;
  int64_t step;  // 1-based, for bias correction
};
// One tensor of a flat parameter buffer, for the multi-tensor update: elements
// [offset, offset + size) and whether they decay.
struct TensorSpan {
  int64_t offset = 0;
  int64_t size = 0;
  WeightDecay decay = WeightDecay::kApply;
  bool operator==(const TensorSpan&) const = default;
};
#define PARITY_UPDATE_OPS(X, T)                                                                 \
  /* Stable counting sort of the P = T·Kr slots by expert, on the device: offsets[E+1]         \
     (offsets[0] = 0; expert e's rows are [offsets[e], offsets[e+1])), slot_of[T,Kr],           \
     token_of[P]; within an expert, slots keep (token, k) order. */                             \
  X(kRoutingPlan, routing_plan,                                                                 \
    void(const OpContext&, int64_t t, int64_t k, int64_t e, int64_t* offsets, int32_t* slot_of, \
         int32_t* token_of, const int32_t* expert))                                             \
  /* Loss-free balancing: bias[i] += rate·sign(mean(load) − load[i]), load[E] the            \
     step's summed slot counts (sign 0 → no change). */                                       \
  X(kBiasUpdate, bias_update,                                                                   \
    void(const OpContext&, int64_t e, float* bias, const int64_t* load, double rate))           \
  /* *sum = Σ g[n]², accumulated in double in a fixed order. `sum` is HOST memory: the        \
     result is copied there in stream order, valid once the stream is next synchronised         \
     (the gradient norm shares the step's one wait; AllocateHost memory keeps it async). */     \
  X(kSumSquares, sum_squares, void(const OpContext&, int64_t n, const T* g, double* sum))       \
  /* p, m, v updated in place from g·grad_scale; decoupled weight decay if kApply */           \
  X(kAdamW, adamw_update,                                                                       \
    void(const OpContext&, int64_t n, T* p, T* m, T* v, const T* g, double grad_scale,          \
         const AdamWArgs&, WeightDecay))                                                        \
  /* adamw_update of n tensors of a flat buffer in one call: for each tensors[i] (a HOST        \
     array), elements [offset, offset + size) of p, m, v, g with the tensor's decay. The        \
     same float operations per element as adamw_update, so the same bits. */                    \
  X(kAdamWMultiTensor, adamw_multi_tensor,                                                      \
    void(const OpContext&, int64_t n, const TensorSpan* tensors, T* p, T* m, T* v, const T* g,  \
         double grad_scale, const AdamWArgs&))

enum class OpKind : int {
#define PARITY_ENUM_PAIRED(kind, f, b, fs, bs) kind,
#define PARITY_ENUM_UPDATE(kind, f, fs) kind,
  PARITY_OPS(PARITY_ENUM_PAIRED, float) PARITY_UPDATE_OPS(PARITY_ENUM_UPDATE, float)
#undef PARITY_ENUM_PAIRED
#undef PARITY_ENUM_UPDATE
      kCount
};

const char* OpName(OpKind kind);

template <typename T>
struct OpTable {
#define PARITY_FIELD_PAIRED(kind, f, b, fs, bs) \
  std::add_pointer_t<fs> f = nullptr;           \
  std::add_pointer_t<bs> b = nullptr;
#define PARITY_FIELD_UPDATE(kind, f, fs) std::add_pointer_t<fs> f = nullptr;
  PARITY_OPS(PARITY_FIELD_PAIRED, T)
  PARITY_UPDATE_OPS(PARITY_FIELD_UPDATE, T)
#undef PARITY_FIELD_PAIRED
#undef PARITY_FIELD_UPDATE

  // True iff this table can run `kind` (both halves for a paired op).
  bool Supports(OpKind kind) const {
    switch (kind) {
#define PARITY_CASE_PAIRED(k, f, b, fs, bs) \
  case OpKind::k:                           \
    return f != nullptr && b != nullptr;
#define PARITY_CASE_UPDATE(k, f, fs) \
  case OpKind::k:                    \
    return f != nullptr;
      PARITY_OPS(PARITY_CASE_PAIRED, T)
      PARITY_UPDATE_OPS(PARITY_CASE_UPDATE, T)
#undef PARITY_CASE_PAIRED
#undef PARITY_CASE_UPDATE
      case OpKind::kCount:
        break;
    }
    return false;
  }
};

}  // namespace parity::kernels
