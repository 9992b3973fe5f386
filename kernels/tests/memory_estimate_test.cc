// The planner's device-memory estimate (core/memory_estimate.h) against the bytes the engine
// actually allocates: the model built from a RunSpec the way parity-train builds it, plus the two
// AdamW moments and the step's expert loads the session allocates (kernels/train/session.cc),
// counted by the CPU device; and the engine's own mapping of its config to the estimate's shape.
#include "core/memory_estimate.h"

#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/gpu_sizing.h"
#include "kernels/backend/device.h"
#include "kernels/model/memory_shape.h"
#include "kernels/model/transformer.h"
#include "kernels/spec/run_spec_adapter.h"
#include "parity/v1/sweep.pb.h"

namespace parity::kernels {
namespace {

parity::v1::RunSpec LoadRunSpec(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  parity::v1::RunSpec spec;
  const auto status = google::protobuf::util::JsonStringToMessage(text.str(), &spec);
  EXPECT_TRUE(status.ok()) << path << ": " << status;
  return spec;
}

struct Measured {
  uint64_t allocated = 0;  // bytes the device handed out
  int64_t params = 0;
};

Measured AllocateLikeTheTrainer(const parity::v1::RunSpec& spec, Precision precision,
                                bool recompute) {
  absl::StatusOr<ParsedRunSpec> parsed = RunConfigFromRunSpec(spec);
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  if (!parsed.ok()) return {};
  const ModelConfig& mc = parsed->config.model;
  const int64_t batch = parsed->config.train.batch_size;
  auto device = MakeCpuDevice({.threads = 1});
  auto model = CreateModel(mc, precision, *device, batch, recompute);
  EXPECT_TRUE(model.ok()) << model.status();
  if (!model.ok()) return {};
  const int64_t n = (*model)->NumParams();
  auto adam_m = device->Allocate(n * sizeof(float));
  auto adam_v = device->Allocate(n * sizeof(float));
  // The step's expert loads the session sums for loss-free balancing (one element when dense).
  const int64_t loads = std::max<int64_t>((*model)->NumMoeLayers() * mc.n_experts, 1);
  auto step_load = device->Allocate(loads * sizeof(int64_t));
  EXPECT_TRUE(adam_m.ok() && adam_v.ok() && step_load.ok());
  Measured out;
  out.allocated = device->AllocatedBytes();
  out.params = n;
  return out;
}

// The engine's mapping of its resolved config (kernels/model/memory_shape.h, what a run's summary
// estimates with) equals the planner's of the spec, field by field.
void ExpectSameShape(const core::MemoryShape& engine, const core::MemoryShape& planner) {
  EXPECT_EQ(engine.d_model, planner.d_model);
  EXPECT_EQ(engine.n_heads, planner.n_heads);
  EXPECT_EQ(engine.n_kv_heads, planner.n_kv_heads);
  EXPECT_EQ(engine.head_dim, planner.head_dim);
  EXPECT_EQ(engine.d_ffn, planner.d_ffn);
  EXPECT_EQ(engine.moe_layer, planner.moe_layer) << "MoE placement";
  EXPECT_EQ(engine.n_experts, planner.n_experts);
  EXPECT_EQ(engine.top_k, planner.top_k);
  EXPECT_EQ(engine.d_expert, planner.d_expert);
  EXPECT_EQ(engine.d_shared, planner.d_shared) << "resolved D_se";
  EXPECT_EQ(engine.vocab, planner.vocab);
  EXPECT_EQ(engine.tied_head, planner.tied_head);
  EXPECT_EQ(engine.seq_len, planner.seq_len);
}

// In both precisions: the bf16 mode allocates its weight copy and bf16 activations, and the
// estimate that sizes GPU runs must know them buffer by buffer.
void ExpectEstimateMatches(const parity::v1::RunSpec& spec) {
  absl::StatusOr<core::MemoryShape> shape =
      core::MemoryShapeOf(spec.model(), spec.training().sequence_length());
  ASSERT_TRUE(shape.ok()) << shape.status();
  absl::StatusOr<ParsedRunSpec> parsed = RunConfigFromRunSpec(spec);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  {
    SCOPED_TRACE(absl::StrCat(spec.name(), ": the engine's MemoryShapeOf(ModelConfig)"));
    ExpectSameShape(MemoryShapeOf(parsed->config.model), *shape);
  }
  const int64_t micro = spec.training().micro_batch_sequences();
  for (const auto& [precision, estimated] :
       {std::pair{Precision::kFp32, core::MemoryPrecision::kFp32},
        std::pair{Precision::kBf16, core::MemoryPrecision::kBf16}}) {
    for (const bool recompute : {false, true}) {
      SCOPED_TRACE(absl::StrCat(spec.name(), " in ", PrecisionName(precision),
                                recompute ? ", recomputing activations" : ""));
      const Measured measured = AllocateLikeTheTrainer(spec, precision, recompute);
      ASSERT_GT(measured.allocated, 0u) << "the CPU device counts what it allocates";
      core::MemoryShape s = *shape;
      s.recompute = recompute;
      const core::MemoryEstimate estimate = core::EstimateTrainingMemory(s, micro, estimated);
      EXPECT_EQ(estimate.params, measured.params) << "the estimate counts the engine's parameters";
      // Exact: the estimate mirrors the engine's allocation list, precision by precision.
      EXPECT_EQ(estimate.BufferBytes(), measured.allocated)
          << "estimate " << estimate.Describe() << " vs " << measured.allocated
          << " bytes allocated";
    }
  }
  const core::MemoryEstimate fp32 =
      core::EstimateTrainingMemory(*shape, micro, core::MemoryPrecision::kFp32);
  const core::MemoryEstimate bf16 =
      core::EstimateTrainingMemory(*shape, micro, core::MemoryPrecision::kBf16);
  EXPECT_EQ(bf16.weight_copies, fp32.params * 2u) << "BF16 adds a bf16 copy of the weights";
  EXPECT_LT(bf16.activations, fp32.activations) << "BF16 halves most activations";
  EXPECT_GT(2 * bf16.activations, fp32.activations) << "the residual stream stays fp32";
  core::MemoryShape recomputed = *shape;
  recomputed.recompute = true;
  int64_t layers_of_kind[2] = {0, 0};
  for (const bool moe : shape->moe_layer) ++layers_of_kind[moe ? 1 : 0];
  const uint64_t kept =
      core::EstimateTrainingMemory(recomputed, micro, core::MemoryPrecision::kFp32).activations;
  if (std::max(layers_of_kind[0], layers_of_kind[1]) > 1) {
    EXPECT_LT(kept, fp32.activations) << "recomputation keeps one layer's activations of each kind";
  } else {
    EXPECT_EQ(kept, fp32.activations) << "one layer of each kind: nothing to share";
  }
}

TEST(MemoryEstimateTest, MatchesTheEngineOnTheMicroExamples) {
  for (const char* path :
       {"kernels/examples/micro_dense.json", "kernels/examples/micro_moe.json"}) {
    ExpectEstimateMatches(LoadRunSpec(path));
  }
}

// Shapes the examples leave out: an untied head, grouped-query attention, interleaved MoE layers
// with an explicit shared expert, all-MoE without one, a micro-batch of one.
TEST(MemoryEstimateTest, MatchesTheEngineOnOtherLayouts) {
  parity::v1::RunSpec moe = LoadRunSpec("kernels/examples/micro_moe.json");
  moe.mutable_model()->set_tie_embeddings(false);
  moe.mutable_model()->set_num_kv_heads(2);
  moe.mutable_model()->set_attention(parity::v1::ATTENTION_KIND_GROUPED_QUERY);
  moe.mutable_model()->set_num_layers(4);
  auto& m = *moe.mutable_model()->mutable_moe();
  m.set_layout(parity::v1::MOE_LAYOUT_INTERLEAVED);
  m.set_interleave_every(2);
  m.set_shared_expert_hidden(96);
  moe.set_name("interleaved-untied-gqa");
  ExpectEstimateMatches(moe);

  m.set_layout(parity::v1::MOE_LAYOUT_ALL_MOE);
  m.set_shared_expert_hidden(0);
  moe.mutable_training()->set_micro_batch_sequences(1);
  moe.set_name("all-moe-micro1");
  ExpectEstimateMatches(moe);

  // A SentencePiece vocabulary: embedding, untied head and logits scale with V.
  moe.mutable_model()->set_vocab_size(5000);
  moe.set_name("all-moe-vocab5000");
  ExpectEstimateMatches(moe);
}

TEST(MemoryEstimateTest, GrowsWithTheMicroBatch) {
  const parity::v1::RunSpec spec = LoadRunSpec("kernels/examples/micro_moe.json");
  absl::StatusOr<core::MemoryShape> shape = core::MemoryShapeOf(spec.model(), 128);
  ASSERT_TRUE(shape.ok()) << shape.status();
  const auto one = core::EstimateTrainingMemory(*shape, 1, core::MemoryPrecision::kFp32);
  const auto two = core::EstimateTrainingMemory(*shape, 2, core::MemoryPrecision::kFp32);
  EXPECT_EQ(two.weights, one.weights) << "weights do not depend on the micro-batch";
  // One MoE layer of 16 experts: load[E] and plan offsets[E+1] (int64), biases[E] (float) and
  // the router's {aux, z} (double) do not grow with the tokens.
  const uint64_t fixed = 8 * 16 + 8 * 17 + 4 * 16 + 8 * 2;
  EXPECT_EQ(two.activations + two.scratch, 2 * (one.activations + one.scratch) - fixed)
      << "activations and scratch are linear in the micro-batch (less the per-layer routing "
         "arrays)";
}

}  // namespace
}  // namespace parity::kernels
