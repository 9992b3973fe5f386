// Device memory of one training process, per GPU, from a resolved model shape, the micro-batch and
// the precision: what the planner sizes micro-batches with (gpu_sizing.h) and what a run's
// `resources.gpu_memory_bytes` asks a worker for.
//
// The breakdown mirrors the engine's allocation list (kernels/model/transformer_memory.cc,
// AdamW's two moments and the step's expert loads in kernels/train/session.cc) buffer by buffer, so
// the sum of the buffer parts is the bytes the engine allocates, in FP32 and in BF16 alike
// (kernels/tests/memory_estimate_test.cc checks both to the byte). Attention is counted with the
// log-sum-exp layout (`lse[B,H,S]` per layer, what a fused attention keeps for its backward). What
// is not a model buffer (CUDA context, cuBLAS workspaces, allocator slack) is the documented
// constant kWorkspaceBytes, plus the headroom the planner leaves (kUsableBudgetFraction).
//
// Data parallelism keeps a full replica per GPU (weights, gradients, moments), so this is also the
// per-GPU figure of a multi-GPU run whose micro-batch is per rank.
//
// Pure C++: no protobuf, so the engine's tests can link it without the planner.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace parity::core {

// The precision a run trains in (kept here so this file does not depend on the RunSpec's enum):
//   kFp32 — everything fp32.
//   kBf16 — fp32 master weights, gradients and AdamW moments plus a bf16 copy of the weights;
//           bf16 activations except the fp32 residual stream, norm statistics, router, attention
//           log-sum-exp, logits and loss; backward scratch in the precision of the activation it
//           is the gradient of.
enum class MemoryPrecision { kFp32, kBf16 };

// A resolved model shape (symbols as in core/symbols.h).
struct MemoryShape {
  int64_t d_model = 0;          // D_m
  int64_t n_heads = 0;          // H
  int64_t n_kv_heads = 0;       // H_kv
  int64_t head_dim = 0;         // D_h
  int64_t d_ffn = 0;            // D_ffn of the dense layers
  std::vector<bool> moe_layer;  // [L]: whether layer l routes to experts
  int64_t n_experts = 0;        // E
  int64_t top_k = 0;            // K
  int64_t d_expert = 0;         // D_e
  int64_t d_shared = 0;         // D_se (resolved; 0 = no shared expert)
  int64_t vocab = 256;          // V (bytes)
  bool tied_head = true;        // the head reuses the embedding
  int64_t seq_len = 0;          // S
  // training.recompute_activations: the layers of a kind share one set of saved activations (the
  // engine recomputes each layer in the backward); the residual stream and each MoE layer's
  // balancing biases stay per layer.
  bool recompute = false;

  int64_t n_layers() const { return static_cast<int64_t>(moe_layer.size()); }
};

// CUDA context, cuBLAS/cuBLASLt workspaces, ops' stream-ordered scratch (the bf16 mode's casts of
// fp32 gradients included) and the caching allocator's fragmentation: a fixed 2 GiB per process,
// whatever the model. Counted in `total`.
inline constexpr uint64_t kWorkspaceBytes = uint64_t{2} << 30;
// Of that, the most one attention backward may take for itself: cuDNN's deterministic fused
// attention keeps B·H·S² bf16 values in its workspace, so the CUDA backend splits a micro-batch
// whose call would need more into slices that fit (kernels/cuda/cudnn_sdpa_run.cc).
inline constexpr uint64_t kCudaAttentionWorkspaceBytes = uint64_t{512} << 20;

// Bytes per part. `weight_copies` is 0 in FP32. `activations` is everything a forward saves for
// the backward (the residual stream at each layer boundary, per-layer saved tensors, token ids,
// routing indices, logits and per-token loss); `scratch` the backward's reused gradient buffers.
struct MemoryEstimate {
  int64_t params = 0;  // every parameter the engine holds (incl. embedding, head, norm weights)
  uint64_t weights = 0;
  uint64_t weight_copies = 0;
  uint64_t gradients = 0;
  uint64_t optimizer = 0;
  uint64_t activations = 0;
  uint64_t scratch = 0;
  uint64_t workspace = kWorkspaceBytes;
  uint64_t total = 0;

  // Every model buffer: total less the workspace constant.
  uint64_t BufferBytes() const { return total - workspace; }
  // "weights 34.1 GB, gradients 8.5 GB, ...", for error messages and logs.
  std::string Describe() const;
};

MemoryEstimate EstimateTrainingMemory(const MemoryShape& shape, int64_t micro_batch_sequences,
                                      MemoryPrecision precision);

// Bytes as "141 GB" (decimal units, three significant figures).
std::string HumanBytes(uint64_t bytes);

}  // namespace parity::core
