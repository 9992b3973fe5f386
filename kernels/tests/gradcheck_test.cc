// Finite-difference gradient checks, in double precision, for every op in the CPU op table and
// for whole tiny dense and MoE models (every layout, K = 1 and K > 1, shared expert, each
// balance option). A failure names the op/tensor, the element, and both gradient values.
#include <gtest/gtest.h>

#include "kernels/backend/device.h"
#include "kernels/model/transformer.h"
#include "kernels/tests/test_util.h"

namespace parity::kernels {
namespace {

using testing::ExpectGradientsMatch;
using testing::RandomVector;

class OpGradTest : public ::testing::Test {
 protected:
  std::unique_ptr<Device> device_ = MakeCpuDevice({.threads = 2});
  const OpTable<double>& ops_ = *device_->OpsF64();
  const OpContext& ctx_ = device_->Context();
};

double Dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

TEST_F(OpGradTest, Matmul) {
  const MatmulShape s{.rows = 70, .in = 12, .out = 9};
  auto x = RandomVector(s.rows * s.in, 1), w = RandomVector(s.out * s.in, 2);
  auto r = RandomVector(s.rows * s.out, 3);
  auto loss = [&] {
    std::vector<double> y(s.rows * s.out);
    ops_.matmul_forward(ctx_, s, y.data(), x.data(), w.data(), Accumulate::kNo, FlopKind::kModel);
    return Dot(y, r);
  };
  std::vector<double> dx(x.size()), dw(w.size());
  ops_.matmul_backward(ctx_, s, dx.data(), dw.data(), r.data(), x.data(), w.data(), Accumulate::kNo,
                       FlopKind::kModel);
  ExpectGradientsMatch("matmul dx", x.data(), x.size(), dx, loss);
  ExpectGradientsMatch("matmul dweight", w.data(), w.size(), dw, loss);
}

TEST_F(OpGradTest, RmsNorm) {
  const int64_t t = 9, d = 16;
  auto x = RandomVector(t * d, 4), w = RandomVector(d, 5), r = RandomVector(t * d, 6);
  auto loss = [&] {
    std::vector<double> y(t * d), rstd(t);
    ops_.rmsnorm_forward(ctx_, t, d, y.data(), rstd.data(), x.data(), w.data());
    return Dot(y, r);
  };
  std::vector<double> y(t * d), rstd(t), dx(t * d), dw(d);
  ops_.rmsnorm_forward(ctx_, t, d, y.data(), rstd.data(), x.data(), w.data());
  ops_.rmsnorm_backward(ctx_, t, d, dx.data(), dw.data(), r.data(), x.data(), w.data(),
                        rstd.data());
  ExpectGradientsMatch("rmsnorm dx", x.data(), x.size(), dx, loss);
  ExpectGradientsMatch("rmsnorm dweight", w.data(), w.size(), dw, loss);
}

TEST_F(OpGradTest, SwiGlu) {
  const int64_t t = 7, f = 10;
  auto ab = RandomVector(t * 2 * f, 7), r = RandomVector(t * f, 8);
  auto loss = [&] {
    std::vector<double> g(t * f);
    ops_.swiglu_forward(ctx_, t, f, g.data(), ab.data());
    return Dot(g, r);
  };
  std::vector<double> dab(ab.size());
  ops_.swiglu_backward(ctx_, t, f, dab.data(), r.data(), ab.data());
  ExpectGradientsMatch("swiglu dab", ab.data(), ab.size(), dab, loss);
}

TEST_F(OpGradTest, CrossEntropyAndEmbedding) {
  const int64_t t = 6, v = kByteVocab, d = 5;
  auto logits = RandomVector(t * v, 9);
  std::vector<int32_t> targets = {3, 200, 17, 17, 255, 0};
  auto loss = [&] {
    std::vector<double> l(t);
    ops_.cross_entropy_forward(ctx_, t, v, l.data(), logits.data(), targets.data());
    double s = 0;
    for (double x : l) s += x;
    return 0.5 * s;
  };
  std::vector<double> dlogits(logits.size());
  ops_.cross_entropy_backward(ctx_, t, v, dlogits.data(), logits.data(), targets.data(), 0.5);
  ExpectGradientsMatch("cross_entropy dlogits", logits.data(), logits.size(), dlogits, loss, 200);

  auto table = RandomVector(v * d, 10), r = RandomVector(t * d, 11);
  auto eloss = [&] {
    std::vector<double> out(t * d);
    ops_.embedding_forward(ctx_, t, d, out.data(), targets.data(), table.data());
    return Dot(out, r);
  };
  std::vector<double> dtable(table.size());
  ops_.embedding_backward(ctx_, t, d, v, dtable.data(), r.data(), targets.data());
  ExpectGradientsMatch("embedding dtable", table.data(), table.size(), dtable, eloss, 2000);
}

struct AttnCase {
  const char* name;
  int64_t heads, kv_heads;
  Positions positions;
};

class AttentionGradTest : public OpGradTest, public ::testing::WithParamInterface<AttnCase> {};

TEST_P(AttentionGradTest, RopeAndAttention) {
  const AttnCase c = GetParam();
  const AttentionShape s{.batch = 2,
                         .seq = 7,
                         .heads = c.heads,
                         .kv_heads = c.kv_heads,
                         .head_dim = 4,
                         .positions = c.positions,
                         .rope_theta = 100.0};
  const int64_t t = s.batch * s.seq, width = (s.heads + 2 * s.kv_heads) * s.head_dim;
  const int64_t out_width = s.heads * s.head_dim;
  auto qkv = RandomVector(t * width, 12), r = RandomVector(t * out_width, 13);
  std::vector<double> lse(s.batch * s.heads * s.seq), out(t * out_width);
  auto forward = [&](std::vector<double>& rotated) {
    rotated = qkv;
    ops_.rope_forward(ctx_, s, rotated.data());
    ops_.attention_forward(ctx_, s, out.data(), lse.data(), rotated.data());
    return Dot(out, r);
  };
  std::vector<double> rotated;
  auto loss = [&] { return forward(rotated); };
  forward(rotated);
  std::vector<double> dqkv(qkv.size());
  ops_.attention_backward(ctx_, s, dqkv.data(), r.data(), out.data(), lse.data(), rotated.data());
  ops_.rope_backward(ctx_, s, dqkv.data());
  ExpectGradientsMatch(std::string(c.name) + " dqkv", qkv.data(), qkv.size(), dqkv, loss, 400);
}

// The forward against the definition: out = softmax(scores)·v and lse = log Σ_j≤i exp(score),
// computed directly per row (the kernel saves lse instead of the probabilities).
TEST_P(AttentionGradTest, ForwardMatchesDefinitionAndSavesRowLogSumExp) {
  const AttnCase c = GetParam();
  const AttentionShape s{.batch = 2,
                         .seq = 9,
                         .heads = c.heads,
                         .kv_heads = c.kv_heads,
                         .head_dim = 4,
                         .positions = c.positions,
                         .rope_theta = 100.0};
  const int64_t S = s.seq, Dh = s.head_dim, width = (s.heads + 2 * s.kv_heads) * Dh;
  const int64_t ldo = s.heads * Dh;
  auto qkv = RandomVector(s.batch * S * width, 21);
  std::vector<double> lse(s.batch * s.heads * S), out(s.batch * S * ldo);
  ops_.attention_forward(ctx_, s, out.data(), lse.data(), qkv.data());
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < s.heads; ++h) {
      const int64_t g = h / (s.heads / s.kv_heads);
      const double slope =
          c.positions == Positions::kAlibi ? std::pow(2.0, -8.0 * (h + 1) / s.heads) : 0.0;
      for (int64_t i = 0; i < S; ++i) {
        std::vector<double> score(i + 1);
        double sum = 0;
        for (int64_t j = 0; j <= i; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < Dh; ++d) {
            dot += qkv[(b * S + i) * width + h * Dh + d] *
                   qkv[(b * S + j) * width + (s.heads + g) * Dh + d];
          }
          score[j] = dot / std::sqrt(static_cast<double>(Dh)) - slope * (i - j);
          sum += std::exp(score[j]);
        }
        ASSERT_NEAR(lse[(b * s.heads + h) * S + i], std::log(sum), 1e-12)
            << c.name << " lse of sequence " << b << " head " << h << " row " << i;
        for (int64_t d = 0; d < Dh; ++d) {
          double want = 0;
          for (int64_t j = 0; j <= i; ++j) {
            want += std::exp(score[j]) / sum *
                    qkv[(b * S + j) * width + (s.heads + s.kv_heads + g) * Dh + d];
          }
          ASSERT_NEAR(out[(b * S + i) * ldo + h * Dh + d], want, 1e-12)
              << c.name << " out of sequence " << b << " head " << h << " row " << i;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Variants, AttentionGradTest,
                         ::testing::Values(AttnCase{"mha_rope", 2, 2, Positions::kRotary},
                                           AttnCase{"gqa_rope", 4, 2, Positions::kRotary},
                                           AttnCase{"mqa_alibi", 3, 1, Positions::kAlibi},
                                           AttnCase{"gqa_alibi", 4, 2, Positions::kAlibi}),
                         [](const auto& info) { return std::string(info.param.name); });

TEST_F(OpGradTest, RoutePermuteCombine) {
  for (bool renorm : {false, true}) {
    const RouteShape s{.tokens = 11,
                       .experts = 5,
                       .top_k = 2,
                       .renormalize = renorm,
                       .aux_weight = 0.3,
                       .z_weight = 0.2,
                       .grad_scale = 1.0};
    const int64_t d = 3, P = s.tokens * s.top_k;
    auto logits = RandomVector(s.tokens * s.experts, 14), r = RandomVector(s.tokens * s.top_k, 15);
    std::vector<float> bias = {0.05f, -0.02f, 0.0f, 0.1f, -0.1f};
    std::vector<double> probs(logits.size()), lse(s.tokens), gate(P);
    std::vector<int32_t> expert(P);
    std::vector<int64_t> load(s.experts);
    auto loss = [&] {
      double losses[2];
      ops_.route_forward(ctx_, s, probs.data(), lse.data(), expert.data(), gate.data(), load.data(),
                         losses, logits.data(), bias.data());
      return Dot(gate, r) + losses[0] + losses[1];
    };
    loss();
    std::vector<double> dlogits(logits.size());
    ops_.route_backward(ctx_, s, dlogits.data(), r.data(), probs.data(), lse.data(), expert.data(),
                        load.data());
    ExpectGradientsMatch(renorm ? "route(renormalised) dlogits" : "route dlogits", logits.data(),
                         logits.size(), dlogits, loss, 100);

    // permute → combine with a fixed plan: slot = t·K + k reversed, any bijection will do.
    std::vector<int32_t> slot_of(P), token_of(P);
    for (int64_t i = 0; i < P; ++i) slot_of[i] = static_cast<int32_t>(P - 1 - i);
    for (int64_t i = 0; i < P; ++i) token_of[slot_of[i]] = static_cast<int32_t>(i / s.top_k);
    auto x = RandomVector(s.tokens * d, 16), ry = RandomVector(s.tokens * d, 17);
    auto closs = [&] {
      std::vector<double> xs(P * d), y(s.tokens * d);
      ops_.permute_forward(ctx_, P, d, xs.data(), x.data(), token_of.data());
      for (auto& v : xs) v = v * v;  // a nonlinear "expert" so the gate gradient is informative
      ops_.combine_forward(ctx_, s.tokens, s.top_k, d, y.data(), xs.data(), gate.data(),
                           slot_of.data());
      return Dot(y, ry);
    };
    std::vector<double> xs(P * d), dys(P * d), dgate(P), dx(x.size());
    ops_.permute_forward(ctx_, P, d, xs.data(), x.data(), token_of.data());
    std::vector<double> ys = xs;
    for (auto& v : ys) v = v * v;
    ops_.combine_backward(ctx_, s.tokens, s.top_k, d, dys.data(), dgate.data(), ry.data(),
                          ys.data(), gate.data(), slot_of.data());
    for (int64_t i = 0; i < P * d; ++i) dys[i] *= 2 * xs[i];
    ops_.permute_backward(ctx_, s.tokens, s.top_k, d, dx.data(), dys.data(), slot_of.data());
    ExpectGradientsMatch("permute+combine dx", x.data(), x.size(), dx, closs);
    ExpectGradientsMatch("combine dgate", gate.data(), gate.size(), dgate, closs);
  }
}

// ---- whole models ------------------------------------------------------------------------------

struct ModelCase {
  const char* name;
  ModelConfig config;
};

ModelConfig Tiny() {
  ModelConfig m;
  m.d_model = 8;
  m.n_layers = 2;
  m.n_heads = 2;
  m.n_kv_heads = 2;
  m.d_ffn = 12;
  m.seq_len = 6;
  return m;
}

ModelConfig TinyMoe(MoeLayout layout, int64_t e, int64_t k) {
  ModelConfig m = Tiny();
  m.layout = layout;
  m.n_experts = e;
  m.top_k = k;
  m.d_expert = 6;
  m.aux_loss_weight = 0.1;
  m.z_loss_weight = 0.05;
  return m;
}

std::vector<ModelCase> ModelCases() {
  std::vector<ModelCase> cases;
  cases.push_back({"dense_mha_rope_tied", Tiny()});
  ModelConfig gqa = Tiny();
  gqa.n_heads = 4, gqa.n_kv_heads = 2, gqa.positions = Positions::kAlibi;
  gqa.head = HeadTying::kUntied;
  cases.push_back({"dense_gqa_alibi_untied", gqa});
  cases.push_back({"all_moe_k1", TinyMoe(MoeLayout::kAllMoe, 4, 1)});
  ModelConfig renorm = TinyMoe(MoeLayout::kAllMoe, 4, 2);
  renorm.gate_norm = GateNorm::kRenormalize;
  cases.push_back({"all_moe_k2_renormalised", renorm});
  cases.push_back({"one_dense_shared_k2", TinyMoe(MoeLayout::kOneDenseShared, 4, 2)});
  ModelConfig inter = TinyMoe(MoeLayout::kInterleaved, 3, 2);
  inter.n_layers = 4;
  inter.bias_update_rate = 0.01;  // loss-free balancing: biases steer selection only
  inter.aux_loss_weight = 0.0;
  cases.push_back({"interleaved_loss_free_bias", inter});
  return cases;
}

class ModelGradTest : public ::testing::TestWithParam<ModelCase> {};

TEST_P(ModelGradTest, AllParametersMatchFiniteDifferences) {
  const ModelCase& c = GetParam();
  auto device = MakeCpuDevice({.threads = 2});
  const int64_t batch = 2, tokens = batch * c.config.seq_len;
  auto model_or = Transformer<double>::Create(c.config, *device, batch);
  ASSERT_TRUE(model_or.ok()) << model_or.status();
  auto& model = **model_or;
  Rng rng{.seed = 42};
  model.InitParams(rng);
  // Larger weights than the training init so every path carries signal.
  for (int64_t i = 0; i < model.NumParams(); ++i) model.Params()[i] *= 10;
  for (int64_t i = 0; i < model.NumMoeLayers(); ++i) {
    std::vector<float> bias(c.config.n_experts);
    for (size_t e = 0; e < bias.size(); ++e) bias[e] = 0.01f * static_cast<float>(e % 3);
    device->FromHost(model.BalanceBias(i), bias.data(), bias.size() * sizeof(float));
  }
  std::vector<int32_t> in(tokens), out(tokens);
  for (int64_t i = 0; i < tokens; ++i) in[i] = (i * 37 + 11) % 256, out[i] = (i * 53 + 5) % 256;
  auto loss = [&] {
    ForwardResult r = model.ForwardAndWait(in.data(), out.data(), batch);
    return r.ce + r.aux + r.z;
  };
  loss();
  model.ZeroGrads();
  model.Backward(1.0 / tokens, 1.0);
  std::vector<double> grads(model.Grads(), model.Grads() + model.NumParams());
  for (const ParamTensor& t : model.Tensors()) {
    std::vector<double> g(grads.begin() + t.offset, grads.begin() + t.offset + t.size);
    ExpectGradientsMatch(std::string(c.name) + " " + t.name, model.Params() + t.offset, t.size, g,
                         loss, 12, 1e-4, 1e-9);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, ModelGradTest, ::testing::ValuesIn(ModelCases()),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace parity::kernels
