// Behavioural checks of the model: initial loss, overfitting, MoE equivalences, and the FLOP
// count against docs/domain.md's formula M = 3·(2·N_a + 4·D_m·S·L).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "kernels/backend/device.h"
#include "kernels/model/moe_experts.h"
#include "kernels/model/transformer.h"
#include "kernels/tests/test_util.h"

namespace parity::kernels {
namespace {

using testing::RandomVector;
using testing::TextTokens;

// The reference routing plan: the serial stable counting sort the engine built on the host before
// the routing_plan op existed. offsets [E+1], slot_of [T,K], token_of [P].
void ReferenceRoutingPlan(const ExpertShape& s, const int32_t* expert,
                          std::vector<int64_t>& offsets, int32_t* slot_of, int32_t* token_of) {
  offsets.assign(s.experts + 1, 0);
  for (int64_t i = 0; i < s.tokens * s.top_k; ++i) ++offsets[expert[i] + 1];
  for (int64_t e = 0; e < s.experts; ++e) offsets[e + 1] += offsets[e];
  std::vector<int64_t> cursor(offsets.begin(), offsets.end() - 1);
  for (int64_t i = 0; i < s.tokens * s.top_k; ++i) {
    const int64_t slot = cursor[expert[i]]++;
    slot_of[i] = static_cast<int32_t>(slot);
    token_of[slot] = static_cast<int32_t>(i / s.top_k);
  }
}

// K distinct experts per token out of the first `used` of E (the rest stay empty groups).
std::vector<int32_t> RandomExperts(const ExpertShape& s, int64_t used, uint64_t seed) {
  std::vector<int32_t> expert(s.tokens * s.top_k);
  Rng rng{.seed = seed};
  for (int64_t t = 0; t < s.tokens; ++t) {
    std::vector<int32_t> pool(used);
    for (int64_t e = 0; e < used; ++e) pool[e] = static_cast<int32_t>(e);
    for (int64_t k = 0; k < s.top_k; ++k) {
      const int64_t j = rng.Below(pool.size());
      expert[t * s.top_k + k] = pool[j];
      pool.erase(pool.begin() + j);
    }
  }
  return expert;
}

ModelConfig Small() {
  ModelConfig m;
  m.d_model = 32;
  m.n_layers = 2;
  m.n_heads = 4;
  m.n_kv_heads = 4;
  m.d_ffn = 64;
  m.seq_len = 32;
  return m;
}

TEST(ModelTest, InitialLossIsNearLn256) {
  auto device = MakeCpuDevice({.threads = 2});
  const int64_t batch = 4, n = batch * Small().seq_len;
  auto model = Transformer<float>::Create(Small(), *device, batch);
  ASSERT_TRUE(model.ok()) << model.status();
  Rng rng{.seed = 3};
  (*model)->InitParams(rng);
  const auto in = TextTokens(n, 0), out = TextTokens(n, 1);
  const double ce = (*model)->ForwardAndWait(in.data(), out.data(), batch).ce;
  EXPECT_NEAR(ce, std::log(256.0), 0.03 * std::log(256.0))
      << "a freshly initialised byte model should be close to uniform over 256 bytes";
}

// A Forward of fewer sequences than the model was sized for (an evaluation's last chunk, an uneven
// micro-batch) gives exactly what a model sized for just those sequences gives: the same loss and
// the same gradients, with and without recomputation (the activations are laid out for the
// maximum, and each op must find its slice there).
TEST(ModelTest, FewerSequencesThanTheMaximumTrainAsTheirOwnBatch) {
  auto device = MakeCpuDevice({.threads = 2});
  const ModelConfig m = Small();
  for (const bool recompute : {false, true}) {
    for (const int64_t batch : {1, 2}) {
      const int64_t n = batch * m.seq_len;
      auto sized = Transformer<float>::Create(m, *device, batch, recompute);
      auto larger = Transformer<float>::Create(m, *device, 3, recompute);
      ASSERT_TRUE(sized.ok() && larger.ok());
      for (auto* model : {&*sized, &*larger}) {
        Rng rng{.seed = 9};
        (*model)->InitParams(rng);
        (*model)->ZeroGrads();
      }
      const auto in = TextTokens(n, 0), out = TextTokens(n, 1);
      const double want = (*sized)->ForwardAndWait(in.data(), out.data(), batch).ce;
      (*sized)->Backward(1.0 / n, 1.0);
      const double got = (*larger)->ForwardAndWait(in.data(), out.data(), batch).ce;
      (*larger)->Backward(1.0 / n, 1.0);
      EXPECT_EQ(got, want) << batch << " sequences of 3, recompute " << recompute;
      const int64_t params = (*sized)->NumParams();
      EXPECT_EQ(std::memcmp((*sized)->Grads(), (*larger)->Grads(), params * sizeof(float)), 0)
          << batch << " sequences of 3, recompute " << recompute << ": gradients differ";
    }
  }
}

// Graph replay: a dense model runs its first micro-batch of a shape as usual, records the second
// and replays it from then on — gradients and FLOP counts identical to the eager path; an MoE
// model (its routing plan is read on the host) never records.
TEST(ModelTest, GraphReplayRecordsDenseMicroBatchesOnceAndNeverMoe) {
  auto device = MakeCpuDevice({.threads = 2});
  const int64_t batch = 2, n = batch * Small().seq_len;
  ModelConfig moe = Small();
  moe.layout = MoeLayout::kAllMoe;
  moe.n_experts = 4;
  moe.top_k = 2;
  moe.d_expert = 16;
  for (const ModelConfig& config : {Small(), moe}) {
    const bool dense = config.layout == MoeLayout::kDense;
    SCOPED_TRACE(dense ? "dense" : "moe");
    auto eager = Transformer<float>::Create(config, *device, batch);
    auto replayed = Transformer<float>::Create(config, *device, batch);
    ASSERT_TRUE(eager.ok() && replayed.ok());
    Rng r1{.seed = 5}, r2{.seed = 5};
    (*eager)->InitParams(r1);
    (*replayed)->InitParams(r2);
    (*replayed)->SetGraphReplay(true);
    std::vector<float> loss(n);
    std::vector<double> route(2 * (*eager)->NumMoeLayers() + 1);
    FlopCounter& flops = *device->Context().flops;
    for (int64_t i = 0; i < 4; ++i) {
      const auto in = TextTokens(n, 2 * i), out = TextTokens(n, 2 * i + 1);
      const MicroBatch<float> mb{.tokens = in.data(),
                                 .targets = out.data(),
                                 .batch = batch,
                                 .token_loss = loss.data(),
                                 .route_losses = route.data()};
      flops.Reset();
      ASSERT_TRUE((*eager)->TrainMicroBatch(mb, 1.0 / n, 0.5).ok());
      const FlopCounter counted = flops;
      const std::vector<float> eager_loss = loss;
      flops.Reset();
      ASSERT_TRUE((*replayed)->TrainMicroBatch(mb, 1.0 / n, 0.5).ok());
      EXPECT_EQ(flops.flops, counted.flops) << "micro-batch " << i << ": FLOPs as counted eagerly";
      EXPECT_EQ(loss, eager_loss) << "micro-batch " << i;
    }
    const int64_t params = (*eager)->NumParams();
    EXPECT_EQ(0, std::memcmp((*eager)->Grads(), (*replayed)->Grads(), params * sizeof(float)))
        << "accumulated gradients differ";
    EXPECT_EQ((*replayed)->RecordedGraphs(), dense ? 1 : 0);
    EXPECT_EQ((*eager)->RecordedGraphs(), 0) << "replay is off by default";
  }
}

// InitParams fills tensors on several host threads; Rng is counter-based, so the result must be
// the serial definition's bits (tensor by tensor, one Normal() per non-norm element) and leave the
// generator where the serial loop would.
TEST(ModelTest, InitParamsDrawsTheSerialSequenceOnManyThreads) {
  auto device = MakeCpuDevice({.threads = 1});
  ModelConfig m = Small();
  m.d_ffn = 4608;  // w13 holds 2·4608·32 ≈ 295k elements; the experts' w13 ≈ 1.2M: split in chunks
  m.layout = MoeLayout::kOneDenseShared;
  m.n_experts = 4;
  m.top_k = 2;
  m.d_expert = 4608;
  auto model = Transformer<float>::Create(m, *device, 1);
  ASSERT_TRUE(model.ok()) << model.status();
  Rng rng{.seed = 11, .counter = 3};
  (*model)->InitParams(rng);
  Rng serial{.seed = 11, .counter = 3};
  std::vector<float> expected((*model)->NumParams());
  for (const ParamTensor& t : (*model)->Tensors()) {
    const bool residual_out = t.name.ends_with("w_o") || t.name.ends_with("w2");
    const double std = m.init_std * (residual_out ? 1.0 / std::sqrt(2.0 * m.n_layers) : 1.0);
    for (int64_t i = 0; i < t.size; ++i) {
      expected[t.offset + i] =
          t.decay == WeightDecay::kSkip ? 1.0f : static_cast<float>(std * serial.Normal());
    }
  }
  EXPECT_EQ(0, std::memcmp((*model)->Params(), expected.data(), expected.size() * sizeof(float)))
      << "the threaded fill must equal the serial definition";
  EXPECT_EQ(rng.counter, serial.counter) << "the generator must end where the serial loop ends";
}

TEST(ModelTest, OverfitsOneBatchBelowPointTwoBpc) {
  auto device = MakeCpuDevice({.threads = 2});
  const ModelConfig m = Small();
  const int64_t batch = 2, n = batch * m.seq_len;
  auto model_or = Transformer<float>::Create(m, *device, batch);
  ASSERT_TRUE(model_or.ok());
  auto& model = **model_or;
  Rng rng{.seed = 5};
  model.InitParams(rng);
  const auto in = TextTokens(n, 0), out = TextTokens(n, 1);
  std::vector<float> adam_m(model.NumParams()), adam_v(model.NumParams());
  const OpTable<float>& ops = *device->OpsF32();
  double bpc = 0;
  for (int64_t step = 1; step <= 300 && !(bpc > 0 && bpc < 0.2); ++step) {
    model.ZeroGrads();
    bpc = model.ForwardAndWait(in.data(), out.data(), batch).ce / std::log(2.0);
    model.Backward(1.0 / n, 1.0);
    const AdamWArgs args{
        .lr = 1e-2, .beta1 = 0.9, .beta2 = 0.99, .eps = 1e-8, .weight_decay = 0.0, .step = step};
    ops.adamw_update(device->Context(), model.NumParams(), model.Params(), adam_m.data(),
                     adam_v.data(), model.Grads(), 1.0, args, WeightDecay::kSkip);
  }
  EXPECT_LT(bpc, 0.2) << "the model should memorise a single 64-token batch";
}

// With E = 1 and K = 1 the router's softmax is exactly 1, so the MoE layer is its one expert: the
// same weights must give the same loss and the same gradients as a dense SwiGLU layer.
TEST(ModelTest, MoeWithOneExpertEqualsDenseFfn) {
  auto device = MakeCpuDevice({.threads = 2});
  ModelConfig dense = Small();
  dense.seq_len = 8;
  ModelConfig moe = dense;
  moe.layout = MoeLayout::kAllMoe;
  moe.n_experts = 1;
  moe.top_k = 1;
  moe.d_expert = dense.d_ffn;
  moe.aux_loss_weight = 0;
  moe.z_loss_weight = 0;
  const int64_t batch = 2, n = batch * dense.seq_len;
  auto a = Transformer<double>::Create(dense, *device, batch);
  auto b = Transformer<double>::Create(moe, *device, batch);
  ASSERT_TRUE(a.ok() && b.ok());
  Rng rng{.seed = 9};
  (*a)->InitParams(rng);
  auto name_map = [](std::string name) {
    for (auto [from, to] : {std::pair{"experts.w13", "w13"}, std::pair{"experts.w2", "w2"}}) {
      if (auto pos = name.find(from); pos != std::string::npos) name.replace(pos, strlen(from), to);
    }
    return name;
  };
  for (const ParamTensor& tb : (*b)->Tensors()) {
    if (tb.name.ends_with("router")) continue;  // no dense counterpart; cannot matter at E = 1
    const std::string want = name_map(tb.name);
    bool found = false;
    for (const ParamTensor& ta : (*a)->Tensors()) {
      if (ta.name != want) continue;
      ASSERT_EQ(ta.size, tb.size) << tb.name;
      std::copy_n((*a)->Params() + ta.offset, ta.size, (*b)->Params() + tb.offset);
      found = true;
    }
    ASSERT_TRUE(found) << "no dense tensor for " << tb.name;
  }
  const auto in = TextTokens(n, 0), out = TextTokens(n, 1);
  const double la = (*a)->ForwardAndWait(in.data(), out.data(), batch).ce;
  const double lb = (*b)->ForwardAndWait(in.data(), out.data(), batch).ce;
  EXPECT_NEAR(la, lb, 1e-12) << "one-expert MoE loss differs from the dense FFN's";
  (*a)->ZeroGrads();
  (*b)->ZeroGrads();
  (*a)->Backward(1.0 / n, 1.0);
  (*b)->Backward(1.0 / n, 1.0);
  for (const ParamTensor& tb : (*b)->Tensors()) {
    for (const ParamTensor& ta : (*a)->Tensors()) {
      if (ta.name != name_map(tb.name)) continue;
      for (int64_t i = 0; i < ta.size; ++i) {
        ASSERT_NEAR((*a)->Grads()[ta.offset + i], (*b)->Grads()[tb.offset + i], 1e-12)
            << "gradient of " << tb.name << "[" << i << "]";
      }
    }
  }
}

// The grouped (permuted, one GEMM per expert) path against the obvious per-token loop.
TEST(ModelTest, GroupedDroplessPathEqualsPerExpertLoop) {
  auto device = MakeCpuDevice({.threads = 2});
  const OpTable<double>& ops = *device->OpsF64();
  const ExpertShape s{.tokens = 37, .top_k = 3, .experts = 6, .d_model = 8, .d_expert = 5};
  const int64_t T = s.tokens, K = s.top_k, E = s.experts, D = s.d_model, De = s.d_expert;
  const int64_t P = T * K;
  auto x = RandomVector(T * D, 1), w13 = RandomVector(E * 2 * De * D, 2, 0.5);
  auto w2 = RandomVector(E * D * De, 3, 0.5), gate = RandomVector(P, 4);
  const std::vector<int32_t> expert = RandomExperts(s, 5, 11);  // expert 5: an empty group
  std::vector<int64_t> offsets(E + 1);
  std::vector<int32_t> slot_of(P), token_of(P);
  ops.routing_plan(device->Context(), T, K, E, offsets.data(), slot_of.data(), token_of.data(),
                   expert.data());
  std::vector<double> xs(P * D), ab(P * 2 * De), g(P * De), ys(P * D), out(T * D, 0.0);
  GroupedExpertsForward(ops, device->Context(), s, offsets.data(), offsets, slot_of.data(),
                        token_of.data(), gate.data(), x.data(), w13.data(), w2.data(),
                        {xs.data(), ab.data(), g.data(), ys.data()}, out.data());
  for (int64_t t = 0; t < T; ++t) {
    std::vector<double> want(D, 0.0);
    for (int64_t k = 0; k < K; ++k) {
      const int64_t e = expert[t * K + k];
      std::vector<double> h(De);
      for (int64_t j = 0; j < De; ++j) {
        double a = 0, b = 0;
        for (int64_t c = 0; c < D; ++c) {
          a += w13[(e * 2 * De + j) * D + c] * x[t * D + c];
          b += w13[(e * 2 * De + De + j) * D + c] * x[t * D + c];
        }
        h[j] = a / (1 + std::exp(-a)) * b;
      }
      for (int64_t c = 0; c < D; ++c) {
        double y = 0;
        for (int64_t j = 0; j < De; ++j) y += w2[(e * D + c) * De + j] * h[j];
        want[c] += gate[t * K + k] * y;
      }
    }
    for (int64_t c = 0; c < D; ++c) {
      ASSERT_NEAR(out[t * D + c], want[c], 1e-12) << "token " << t << " feature " << c;
    }
  }
}

// The routing_plan op is the serial stable sort, whatever the pool size: 3000 tokens × 3 slots
// span several of its 4096-slot chunks, and two of the 7 experts stay empty.
TEST(ModelTest, RoutingPlanOpEqualsTheHostReference) {
  const ExpertShape s{.tokens = 3000, .top_k = 3, .experts = 7, .d_model = 1, .d_expert = 1};
  const int64_t P = s.tokens * s.top_k;
  const std::vector<int32_t> expert = RandomExperts(s, 5, 17);
  std::vector<int64_t> want_offsets;
  std::vector<int32_t> want_slot(P), want_token(P);
  ReferenceRoutingPlan(s, expert.data(), want_offsets, want_slot.data(), want_token.data());
  for (int threads : {1, 2, 3}) {
    auto device = MakeCpuDevice({.threads = threads});
    std::vector<int64_t> offsets(s.experts + 1, -1);
    std::vector<int32_t> slot_of(P, -1), token_of(P, -1);
    device->OpsF32()->routing_plan(device->Context(), s.tokens, s.top_k, s.experts, offsets.data(),
                                   slot_of.data(), token_of.data(), expert.data());
    EXPECT_EQ(offsets, want_offsets) << "offsets with " << threads << " threads";
    EXPECT_EQ(slot_of, want_slot) << "slot_of with " << threads << " threads";
    EXPECT_EQ(token_of, want_token) << "token_of with " << threads << " threads";
  }
}

// bias_update against the loop the trainer ran on the host: b_i += u·sign(mean − load_i), with a
// load equal to the mean left alone.
TEST(ModelTest, BiasUpdateOpEqualsTheHostLoop) {
  auto device = MakeCpuDevice({.threads = 2});
  const std::vector<int64_t> load = {10, 30, 20, 20, 0, 40};  // mean 20: two experts at the mean
  std::vector<float> bias = {0.5f, -0.25f, 0.125f, 0.0f, 1e-3f, -7.0f}, want = bias;
  const double rate = 1e-3;
  for (int round = 0; round < 3; ++round) {
    double mean = 0;
    for (int64_t l : load) mean += l;
    mean /= static_cast<double>(load.size());
    for (size_t e = 0; e < load.size(); ++e) {
      const double d = mean - load[e];
      want[e] += static_cast<float>(rate * ((d > 0) - (d < 0)));
    }
    device->OpsF32()->bias_update(device->Context(), static_cast<int64_t>(load.size()), bias.data(),
                                  load.data(), rate);
    for (size_t e = 0; e < load.size(); ++e) {
      EXPECT_EQ(bias[e], want[e]) << "bias of expert " << e << " after update " << round + 1;
    }
  }
}

// Attention keeps lse[B,H,S], not probabilities [B,H,S,S]: doubling S at most doubles what the
// model allocates, and one layer's worth of S×S floats is more than the whole model holds.
TEST(ModelTest, AllocationsGrowLinearlyInSequenceLength) {
  auto device = MakeCpuDevice({.threads = 1});
  ModelConfig m = Small();
  m.layout = MoeLayout::kInterleaved, m.n_experts = 4, m.top_k = 2, m.d_expert = 16;
  const int64_t batch = 2;
  auto bytes_at = [&](int64_t seq) {
    m.seq_len = seq;
    auto model = Transformer<float>::Create(m, *device, batch);
    EXPECT_TRUE(model.ok()) << model.status();
    return model.ok() ? static_cast<double>((*model)->AllocatedBytes()) : 0.0;
  };
  const double at_1k = bytes_at(1024), at_2k = bytes_at(2048);
  const double one_layer_probs = static_cast<double>(batch) * m.n_heads * 2048 * 2048 * 4;
  EXPECT_LE(at_2k, 2.0 * at_1k) << "allocations grow faster than S: " << at_1k << " B at S 1024, "
                                << at_2k << " B at S 2048";
  EXPECT_LT(at_2k, one_layer_probs)
      << "the model holds " << at_2k << " B, less would be needed for one layer's [B,H,S,S]";
}

struct FlopCase {
  const char* name;
  ModelConfig config;
};

class FlopCountTest : public ::testing::TestWithParam<FlopCase> {};

// The engine counts what it executes; over one forward+backward the non-vocabulary count per
// token must match M within 1%.
TEST_P(FlopCountTest, CountedTrainingFlopsMatchFormula) {
  const ModelConfig& m = GetParam().config;
  auto device = MakeCpuDevice({.threads = 2});
  const int64_t batch = 2, n = batch * m.seq_len;
  auto model = Transformer<float>::Create(m, *device, batch);
  ASSERT_TRUE(model.ok()) << model.status();
  Rng rng{.seed = 1};
  (*model)->InitParams(rng);
  const auto in = TextTokens(n, 0), out = TextTokens(n, 1);
  FlopCounter& flops = *device->Context().flops;
  flops.Reset();
  (*model)->ZeroGrads();
  (*model)->ForwardAndWait(in.data(), out.data(), batch);
  (*model)->Backward(1.0 / n, 1.0);
  const double measured = flops.Get(FlopKind::kModel) / n;
  const double analytic = ComputeAnalyticCounts(m).flops_per_token;
  EXPECT_NEAR(measured / analytic, 1.0, 0.01)
      << "counted " << measured << " FLOPs/token, formula M = " << analytic;
}

std::vector<FlopCase> FlopCases() {
  ModelConfig dense = Small();
  ModelConfig moe = Small();
  moe.layout = MoeLayout::kOneDenseShared, moe.n_experts = 8, moe.top_k = 2, moe.d_expert = 16;
  ModelConfig gqa = Small();
  gqa.n_kv_heads = 2, gqa.layout = MoeLayout::kAllMoe, gqa.n_experts = 4, gqa.top_k = 1;
  gqa.d_expert = 32, gqa.n_layers = 3;
  return {{"dense", dense}, {"one_dense_shared_e8_k2", moe}, {"all_moe_gqa_k1", gqa}};
}

INSTANTIATE_TEST_SUITE_P(Models, FlopCountTest, ::testing::ValuesIn(FlopCases()),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace parity::kernels
