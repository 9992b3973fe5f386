// Engine throughput benchmark: trains one of three reference models on the bible corpus for a
// few steps through the real training loop (RunTraining) and reports tokens/s, achieved GFLOP/s
// (counted FLOPs, all ops), peak RSS and the analytic memory it should need. One model per
// process so getrusage's peak RSS belongs to that model alone.
//
//   engine_bench --model dense|moe16|moe64 --corpus /tmp/kjv.txt [--threads 2] [--steps 20]
#include <CLI/CLI.hpp>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "kernels/train/trainer.h"

namespace {

using namespace parity::kernels;

class Sink final : public MetricsSink {
 public:
  void Write(const std::string& line) override { lines.push_back(nlohmann::json::parse(line)); }
  std::vector<nlohmann::json> lines;
};

ModelConfig Model(const std::string& name) {
  ModelConfig m;
  m.d_model = 256;
  m.n_layers = 4;
  m.n_heads = 4;
  m.n_kv_heads = 4;
  m.d_ffn = 688;  // α ≈ 2.7
  m.seq_len = 256;
  m.head = HeadTying::kTied;
  if (name == "moe16") {
    m.layout = MoeLayout::kOneDenseShared, m.n_experts = 16, m.top_k = 2, m.d_expert = 128;
  } else if (name == "moe64") {
    m.layout = MoeLayout::kOneDenseShared, m.n_experts = 64, m.top_k = 4, m.d_expert = 64;
  }
  return m;
}

// Bytes the run must hold: fp32 weights, gradients and two AdamW moments, plus the activations
// saved for the backward (per layer: residuals, norms, qkv, attention probabilities, FFN or
// expert intermediates) and the logits, for one micro-batch of B sequences.
double AnalyticBytes(const ModelConfig& m, int64_t batch, double total_params) {
  const double T = static_cast<double>(batch * m.seq_len), D = m.d_model;
  const double qkv = (m.n_heads + 2 * m.n_kv_heads) * m.head_dim();
  double act = (m.n_layers + 1) * T * D;  // residual stream boundaries
  for (int64_t l = 0; l < m.n_layers; ++l) {
    act += T * (4 * D + qkv) + batch * m.n_heads * double(m.seq_len) * m.seq_len;
    if (m.IsMoeLayer(l)) {
      const double P = T * m.top_k;
      act += T * (2 * m.n_experts + m.top_k) + P * (2 * D + 3 * m.d_expert) + 3 * T * m.SharedDim();
    } else {
      act += 3 * T * m.d_ffn;
    }
  }
  act += 2 * T * m.vocab_size + T * D;  // logits and their gradient, final norm
  return 4.0 * (4 * total_params + act);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Parity engine benchmark"};
  std::string model = "dense", corpus = "/tmp/kjv.txt";
  int threads = 2;
  int64_t steps = 20, batch = 8;
  app.add_option("--model", model)->check(CLI::IsMember({"dense", "moe16", "moe64"}));
  app.add_option("--corpus", corpus);
  app.add_option("--threads", threads);
  app.add_option("--steps", steps);
  app.add_option("--batch", batch, "sequences per step");
  CLI11_PARSE(app, argc, argv);

  RunConfig c;
  c.run_id = "bench-" + model;
  c.model = Model(model);
  c.optimizer.lr = 1e-3;
  c.optimizer.warmup_steps = 2;
  c.train.batch_size = batch;
  c.train.batch_sequences = batch;
  c.train.steps = steps;
  c.train.log_interval = 5;
  c.train.eval_interval = 1000000;
  c.train.eval_tokens = 256;
  c.data.corpus_path = corpus;
  c.data.validation_fraction = 0.01;
  const std::string out = "/tmp/parity-engine-bench-" + model;
  Sink sink;
  auto r = RunTraining(c, {.out_dir = out, .threads = threads, .metrics = &sink});
  std::filesystem::remove_all(out);
  if (!r.ok()) {
    std::cerr << r.status() << "\n";
    return 1;
  }
  // Throughput over the logging windows after the first (allocation and cache warm-up).
  double tokens = 0, seconds = 0, flops = 0;
  for (const auto& j : sink.lines) {
    if (j["event"] != "metrics" || j["step"].get<int64_t>() <= 5) continue;
    const double tps = j["tokens_per_second"], window_tokens = 5.0 * batch * c.model.seq_len;
    tokens += window_tokens;
    seconds += window_tokens / tps;
    flops += window_tokens * j["flops_per_token_total"].get<double>();
  }
  const auto& s = sink.lines.back();
  double total_params = 0;
  {
    // Parameters including vocabulary and norms, as allocated.
    const AnalyticCounts a = ComputeAnalyticCounts(c.model);
    total_params = a.params + a.vocab_params + c.model.d_model * (2 * c.model.n_layers + 1);
  }
  const double analytic_bytes = AnalyticBytes(c.model, batch, total_params);
  const nlohmann::json result = {
      {"model", model},
      {"threads", threads},
      {"batch_tokens", batch * c.model.seq_len},
      {"params_N", s["params"]},
      {"active_params_Na", s["active_params"]},
      {"tokens_per_second", tokens / seconds},
      {"gflops_per_second", flops / seconds / 1e9},
      {"model_flops_per_token", s["measured_flops_per_token"]},
      {"flops_relative_error", s["flops_relative_error"]},
      {"peak_rss_mib", s["peak_memory_bytes"].get<double>() / (1 << 20)},
      {"analytic_mib", analytic_bytes / (1 << 20)},
      {"rss_over_analytic", s["peak_memory_bytes"].get<double>() / analytic_bytes},
      {"final_train_bpc", s["final_train_bpc"]},
  };
  std::cout << result.dump() << std::endl;
  return 0;
}
