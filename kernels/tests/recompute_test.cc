// Activation checkpointing (Transformer's `recompute`): the backward recomputes each layer from
// its input, so gradients, losses and routing are the same bits as keeping every activation, in
// both precisions; the recomputed FLOPs are counted apart from the model's M.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "kernels/backend/device.h"
#include "kernels/model/transformer.h"
#include "kernels/tests/test_util.h"

namespace parity::kernels {
namespace {

using testing::TextTokens;

ModelConfig ThreeLayers(MoeLayout layout) {
  ModelConfig m;
  m.d_model = 32;
  m.n_layers = 3;
  m.n_heads = 4;
  m.n_kv_heads = 2;
  m.d_ffn = 64;
  m.seq_len = 16;
  m.layout = layout;
  if (layout != MoeLayout::kDense) {
    m.n_experts = 4;
    m.top_k = 2;
    m.d_expert = 16;
    m.bias_update_rate = 1e-3;
  }
  return m;
}

struct Pass {
  ForwardResult losses;
  std::vector<float> grads;
  std::vector<std::vector<int64_t>> loads;
  FlopCounter flops;
};

Pass TrainTwoMicroBatches(const ModelConfig& m, Precision precision, bool recompute) {
  auto device = MakeCpuDevice({.threads = 2});
  const int64_t batch = 2, n = batch * m.seq_len;
  auto model = CreateModel(m, precision, *device, batch, recompute);
  EXPECT_TRUE(model.ok()) << model.status();
  if (!model.ok()) return {};
  Rng rng{.seed = 5};
  (*model)->InitParams(rng);
  const auto in = TextTokens(n, 0), out = TextTokens(n, 1);
  FlopCounter& flops = *device->Context().flops;
  Pass p;
  // Two micro-batches, so the second forward overwrites the shared buffers the first used.
  for (int micro = 0; micro < 2; ++micro) {
    flops.Reset();
    (*model)->ZeroGrads();
    p.losses = (*model)->ForwardAndWait(in.data(), out.data(), batch);
    (*model)->Backward(1.0 / static_cast<double>(n), 1.0);
  }
  p.flops = flops;
  p.grads.assign((*model)->Grads(), (*model)->Grads() + (*model)->NumParams());
  for (int64_t i = 0; i < (*model)->NumMoeLayers(); ++i) {
    p.loads.push_back((*model)->Routing(i).load);
  }
  return p;
}

TEST(RecomputeTest, GradientsAreTheSameBitsAsKeepingEveryActivation) {
  for (const MoeLayout layout :
       {MoeLayout::kDense, MoeLayout::kOneDenseShared, MoeLayout::kAllMoe}) {
    for (const Precision precision : {Precision::kFp32, Precision::kBf16}) {
      SCOPED_TRACE(std::string(PrecisionName(precision)) + " layout " +
                   std::to_string(static_cast<int>(layout)));
      const ModelConfig m = ThreeLayers(layout);
      const Pass kept = TrainTwoMicroBatches(m, precision, false);
      const Pass again = TrainTwoMicroBatches(m, precision, true);
      ASSERT_EQ(kept.grads.size(), again.grads.size());
      ASSERT_FALSE(kept.grads.empty());
      EXPECT_EQ(
          std::memcmp(kept.grads.data(), again.grads.data(), kept.grads.size() * sizeof(float)), 0)
          << "recomputed activations must give the gradient's exact bits";
      EXPECT_EQ(kept.losses.ce, again.losses.ce);
      EXPECT_EQ(kept.losses.aux, again.losses.aux);
      EXPECT_EQ(kept.loads, again.loads) << "routing is recomputed identically";
      // M counts the model once; the recomputation is reported apart (two of the three layers:
      // the top one's activations are still the forward's).
      EXPECT_EQ(kept.flops.Get(FlopKind::kModel), again.flops.Get(FlopKind::kModel));
      EXPECT_EQ(kept.flops.Get(FlopKind::kRecompute), 0.0);
      EXPECT_GT(again.flops.Get(FlopKind::kRecompute), 0.0);
      EXPECT_LT(again.flops.Get(FlopKind::kRecompute), kept.flops.Get(FlopKind::kModel) / 3.0)
          << "at most the forward of the layers below the top one";
    }
  }
}

TEST(RecomputeTest, KeepsOneSetOfActivationsPerLayerKind) {
  const ModelConfig m = ThreeLayers(MoeLayout::kDense);
  for (const Precision precision : {Precision::kFp32, Precision::kBf16}) {
    auto device = MakeCpuDevice({.threads = 1});
    auto kept = CreateModel(m, precision, *device, 4, false);
    auto again = CreateModel(m, precision, *device, 4, true);
    ASSERT_TRUE(kept.ok() && again.ok());
    EXPECT_LT((*again)->AllocatedBytes(), (*kept)->AllocatedBytes())
        << PrecisionName(precision) << ": three dense layers share one set of activations";
  }
}

}  // namespace
}  // namespace parity::kernels
