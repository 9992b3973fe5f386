// A time split of one training step by kind of work — what the GPU check reports beside
// throughput ("GEMM, attention, MoE routing, other"). Taken only when asked (parity-train
// --profile-step): the device is synchronised before and after every timed op, so each op's time
// is its own and not the queue's; that costs throughput, which is why it is one step, not all.
#pragma once

#include <array>
#include <cstddef>

namespace parity::kernels {

enum class OpBucket : int {
  kGemm = 0,        // every matmul: projections, FFN, router, head (forward and backward)
  kAttention = 1,   // RoPE and attention, forward and backward
  kMoeRouting = 2,  // router softmax/top-K, the routing plan and its offsets' readback
  kMoeExperts = 3,  // the grouped experts: permute, grouped GEMMs, SwiGLU, combine
  kOptimizer = 4,   // gradient norm, AdamW, loss-free bias update (and a gang's gradient sum)
};
inline constexpr size_t kNumOpBuckets = 5;

inline const char* OpBucketName(OpBucket b) {
  static const char* const kNames[kNumOpBuckets] = {"gemm", "attention", "moe_routing",
                                                    "moe_experts", "optimizer"};
  return kNames[static_cast<int>(b)];
}

// Seconds per bucket over the profiled step; the step's remainder (norms, SwiGLU, embedding,
// loss, copies, data) is its total less these.
struct StepProfile {
  std::array<double, kNumOpBuckets> seconds{};
  void Add(OpBucket b, double s) { seconds[static_cast<int>(b)] += s; }
  double Sum() const {
    double total = 0;
    for (double s : seconds) total += s;
    return total;
  }
};

}  // namespace parity::kernels
