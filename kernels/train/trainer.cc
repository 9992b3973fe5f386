#include "kernels/train/trainer.h"

#include <sys/resource.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "kernels/data/byte_corpus.h"
#include "kernels/model/transformer.h"
#include "kernels/train/checkpoint.h"
#include "kernels/train/schedule.h"

namespace parity::kernels {
namespace {

constexpr double kLn2 = 0.6931471805599453;
using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

int64_t PeakRssBytes() {
  struct rusage u {};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<int64_t>(u.ru_maxrss) * 1024;
}

// Per-layer expert load summary over one optimizer step.
nlohmann::json ExpertLoadJson(int64_t layer, const std::vector<int64_t>& load) {
  double total = 0, mn = 1e300, mx = 0;
  int64_t dead = 0;
  for (int64_t l : load) {
    total += l;
    mn = std::min<double>(mn, l);
    mx = std::max<double>(mx, l);
    dead += l == 0;
  }
  const double mean = total / load.size();
  double var = 0;
  for (int64_t l : load) var += (l - mean) * (l - mean);
  var /= load.size();
  nlohmann::json shares = nlohmann::json::array();
  for (int64_t l : load) shares.push_back(total > 0 ? l / total : 0.0);
  return {{"layer", layer},
          {"min_share", total > 0 ? mn / total : 0.0},
          {"max_share", total > 0 ? mx / total : 0.0},
          {"coefficient_of_variation", mean > 0 ? std::sqrt(var) / mean : 0.0},
          {"dead_experts", dead},
          {"shares", shares}};
}

}  // namespace

uint64_t RunFingerprint(const RunConfig& c, uint64_t corpus_digest) {
  const ModelConfig& m = c.model;
  const OptimizerConfig& o = c.optimizer;
  const TrainConfig& t = c.train;
  const std::string s = absl::StrCat(
      m.d_model, ",", m.n_layers, ",", m.n_heads, ",", m.n_kv_heads, ",", m.d_ffn, ",", m.seq_len,
      ",", static_cast<int>(m.positions), ",", m.rope_theta, ",", static_cast<int>(m.head), ",",
      static_cast<int>(m.layout), ",", m.interleave_every, ",", m.n_experts, ",", m.top_k, ",",
      m.d_expert, ",", m.SharedDim(), ",", static_cast<int>(m.gate_norm), ",", m.aux_loss_weight,
      ",", m.z_loss_weight, ",", m.bias_update_rate, "|", o.lr, ",", o.min_lr, ",", o.warmup_steps,
      ",", static_cast<int>(o.schedule), ",", o.decay_fraction, ",", o.beta1, ",", o.beta2, ",",
      o.eps, ",", o.weight_decay, ",", o.grad_clip, "|", t.batch_size, ",", t.grad_accum, ",",
      t.steps, ",", t.seed, ",", t.eval_tokens, "|", corpus_digest, ",", c.data.validation_fraction,
      ",", c.data.unique_tokens, ",", static_cast<int>(c.data.subset));
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char ch : s) h = (h ^ ch) * 1099511628211ULL;
  return h;
}

absl::StatusOr<TrainSummary> RunTraining(const RunConfig& config, const TrainerOptions& opt) {
  if (auto s = ValidateRunConfig(config); !s.ok()) return s;
  if (opt.metrics == nullptr) return absl::InvalidArgumentError("options.metrics is required");
  const ModelConfig& mc = config.model;
  const TrainConfig& tc = config.train;
  const int64_t S = mc.seq_len, B = tc.batch_size, accum = tc.grad_accum;
  const int64_t step_tokens = tc.TokensPerStep(S);
  const int64_t total_steps = tc.steps;

  // Fail before any work if checkpoints could not be written.
  std::error_code ec;
  std::filesystem::create_directories(opt.out_dir, ec);
  if (ec || opt.out_dir.empty()) {
    return absl::PermissionDeniedError(
        absl::StrCat("--out '", opt.out_dir, "': cannot create: ", ec.message()));
  }
  auto corpus_or = ByteCorpus::Load(config.data, S, tc.seed);
  if (!corpus_or.ok()) return corpus_or.status();
  ByteCorpus& corpus = *corpus_or;

  auto device = MakeCpuDevice({.threads = std::max(1, opt.threads)});
  auto model_or = Transformer<float>::Create(mc, *device, B);
  if (!model_or.ok()) return model_or.status();
  Transformer<float>& model = **model_or;
  const OpTable<float>& ops = *device->OpsF32();
  OpContext& ctx = device->Context();
  FlopCounter& flops = *ctx.flops;
  const int64_t n = model.NumParams();
  auto m_buf = device->Allocate(n * sizeof(float));
  auto v_buf = device->Allocate(n * sizeof(float));
  if (!m_buf.ok()) return m_buf.status();
  if (!v_buf.ok()) return v_buf.status();
  float* adam_m = (*m_buf)->as<float>();
  float* adam_v = (*v_buf)->as<float>();

  // State: fresh, or from the latest checkpoint.
  const uint64_t fingerprint = RunFingerprint(config, corpus.Digest());
  int64_t step = 0, cursor = 0;
  Rng rng{.seed = tc.seed};
  model.InitParams(rng);
  if (opt.resume == ResumeMode::kResumeIfPresent) {
    auto ckpt_or = ReadLatestCheckpoint(opt.out_dir);
    if (!ckpt_or.ok()) return ckpt_or.status();
    if (ckpt_or->has_value()) {
      Checkpoint& c = **ckpt_or;
      if (c.fingerprint != fingerprint || static_cast<int64_t>(c.params.size()) != n ||
          static_cast<int64_t>(c.balance_bias.size()) != model.NumMoeLayers()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "checkpoint in ", opt.out_dir, " belongs to a different run spec; refusing to resume"));
      }
      device->FromHost(model.Params(), c.params.data(), n * sizeof(float));
      device->FromHost(adam_m, c.adam_m.data(), n * sizeof(float));
      device->FromHost(adam_v, c.adam_v.data(), n * sizeof(float));
      for (int64_t i = 0; i < model.NumMoeLayers(); ++i) model.BalanceBias(i) = c.balance_bias[i];
      step = c.step;
      cursor = c.cursor;
      rng = c.rng;
    }
  }

  const AnalyticCounts analytic = ComputeAnalyticCounts(mc);
  const int64_t eval_windows = std::min(corpus.NumValidationWindows(), tc.eval_tokens / S);
  std::vector<int32_t> inputs(B * S), targets(B * S);
  auto evaluate = [&]() {
    double sum = 0;
    int64_t done = 0;
    while (done < eval_windows) {
      const int64_t b = std::min(B, eval_windows - done);
      for (int64_t i = 0; i < b; ++i) {
        corpus.FillValidation(done + i, inputs.data() + i * S, targets.data() + i * S);
      }
      sum += model.Forward(inputs.data(), targets.data(), b).ce * b;
      done += b;
    }
    return sum / eval_windows / kLn2;
  };
  auto save = [&]() -> absl::StatusOr<std::string> {
    CheckpointHeader c;
    c.fingerprint = fingerprint;
    c.step = step;
    c.cursor = cursor;
    c.rng = rng;
    for (int64_t i = 0; i < model.NumMoeLayers(); ++i)
      c.balance_bias.push_back(model.BalanceBias(i));
    const float* arrays[3] = {model.Params(), adam_m, adam_v};
    auto read = [&](CheckpointArray a, int64_t offset, int64_t count, float* dst) {
      device->ToHost(dst, arrays[static_cast<int>(a)] + offset, count * sizeof(float));
    };
    return WriteCheckpoint(opt.out_dir, c, n, read, tc.keep_checkpoints);
  };

  TrainSummary summary;
  summary.analytic_flops_per_token = analytic.flops_per_token;
  double train_model_flops = 0, train_total_flops = 0, train_seconds = 0;
  double window_seconds = 0, window_flops = 0;
  int64_t window_tokens = 0, trained_steps = 0;
  double last_val = std::nan("");
  const auto run_start = Clock::now();
  std::vector<std::vector<int64_t>> loads(model.NumMoeLayers());

  while (step < total_steps) {
    if ((opt.stop != nullptr && opt.stop->load()) ||
        (opt.max_steps > 0 && trained_steps >= opt.max_steps)) {
      summary.outcome = RunOutcome::kStopped;
      break;
    }
    const auto t0 = Clock::now();
    flops.Reset();
    model.ZeroGrads();
    double ce = 0, aux = 0, z = 0;
    for (auto& l : loads) l.assign(mc.n_experts, 0);
    for (int64_t micro = 0; micro < accum; ++micro) {
      corpus.FillTraining(cursor, B, inputs.data(), targets.data());
      cursor += B;
      const ForwardResult r = model.Forward(inputs.data(), targets.data(), B);
      model.Backward(1.0 / static_cast<double>(step_tokens), 1.0 / static_cast<double>(accum));
      ce += r.ce / accum, aux += r.aux / accum, z += r.z / accum;
      for (int64_t i = 0; i < model.NumMoeLayers(); ++i) {
        for (int64_t e = 0; e < mc.n_experts; ++e) loads[i][e] += model.Routing(i).load[e];
      }
    }
    // Global-norm clipping folded into the optimizer's gradient scale.
    const double grad_norm = std::sqrt(ops.sum_squares(ctx, n, model.Grads()));
    if (!std::isfinite(ce) || !std::isfinite(grad_norm)) {
      // Nothing is applied: the last checkpoint stays the last good state.
      return absl::OutOfRangeError(absl::StrCat("training diverged at step ", step + 1, ": loss ",
                                                ce, ", gradient norm ", grad_norm));
    }
    const double clip = config.optimizer.grad_clip > 0 && grad_norm > config.optimizer.grad_clip
                            ? config.optimizer.grad_clip / grad_norm
                            : 1.0;
    const double lr = LearningRate(config.optimizer, step, total_steps);
    const AdamWArgs args{.lr = lr,
                         .beta1 = config.optimizer.beta1,
                         .beta2 = config.optimizer.beta2,
                         .eps = config.optimizer.eps,
                         .weight_decay = config.optimizer.weight_decay,
                         .step = step + 1};
    for (const ParamTensor& t : model.Tensors()) {
      ops.adamw_update(ctx, t.size, model.Params() + t.offset, adam_m + t.offset, adam_v + t.offset,
                       model.Grads() + t.offset, clip, args, t.decay);
    }
    // Loss-free balancing: nudge under-loaded experts up, over-loaded down (DESIGN §1).
    if (mc.bias_update_rate > 0) {
      for (int64_t i = 0; i < model.NumMoeLayers(); ++i) {
        double mean = 0;
        for (int64_t l : loads[i]) mean += l;
        mean /= mc.n_experts;
        auto& bias = model.BalanceBias(i);
        for (int64_t e = 0; e < mc.n_experts; ++e) {
          const double d = mean - loads[i][e];
          bias[e] += static_cast<float>(mc.bias_update_rate * ((d > 0) - (d < 0)));
        }
      }
    }
    ++step;
    ++trained_steps;
    const double dt = Seconds(Clock::now() - t0);
    const double step_model_flops = flops.Get(FlopKind::kModel);
    const double step_flops =
        step_model_flops + flops.Get(FlopKind::kVocab) + flops.Get(FlopKind::kElementwise);
    train_model_flops += step_model_flops;
    train_total_flops += step_flops;
    train_seconds += dt;
    window_seconds += dt, window_flops += step_flops, window_tokens += step_tokens;
    summary.final_train_bpc = ce / kLn2;

    const bool last = step == total_steps;
    const bool do_eval = step % tc.eval_interval == 0 || last;
    if (do_eval) last_val = evaluate();
    if (step % tc.log_interval == 0 || step == 1 || last || do_eval) {
      nlohmann::json j = {
          {"event", "metrics"},
          {"run_id", config.run_id},
          {"step", step},
          {"total_steps", total_steps},
          {"tokens", step * step_tokens},
          {"unique_tokens", std::min(cursor, corpus.NumUniqueWindows()) * S},
          {"unique_budget_tokens", corpus.UniqueTokens()},
          {"epoch", static_cast<double>(cursor) / corpus.NumUniqueWindows()},
          {"train_bpc", ce / kLn2},
          {"learning_rate", lr},
          {"grad_norm", grad_norm},
          {"aux_loss", aux},
          {"z_loss", z},
          {"tokens_per_second", window_tokens / window_seconds},
          {"flops_per_second", window_flops / window_seconds},
          {"flops_per_token", step_model_flops / step_tokens},
          {"flops_per_token_total", step_flops / step_tokens},
          // Cumulative training compute in the accounting's sense (kModel FLOPs, C = M·D so
          // far); every step of a model executes the same count, so this survives resumes.
          {"flops", static_cast<double>(step) * step_model_flops},
          {"time", absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(), absl::UTCTimeZone())},
      };
      if (do_eval) j["val_bpc"] = last_val;
      if (model.NumMoeLayers() > 0) {
        nlohmann::json experts = nlohmann::json::array();
        for (int64_t i = 0; i < model.NumMoeLayers(); ++i) {
          experts.push_back(ExpertLoadJson(model.MoeLayerIndex(i), loads[i]));
        }
        j["expert_load"] = experts;
      }
      opt.metrics->Write(j.dump());
      window_seconds = window_flops = 0, window_tokens = 0;
    }
    if ((tc.checkpoint_interval > 0 && step % tc.checkpoint_interval == 0) || last) {
      auto path = save();
      if (!path.ok()) return path.status();
      summary.checkpoint_path = *path;
    }
  }
  if (summary.outcome == RunOutcome::kStopped && trained_steps > 0) {
    auto path = save();
    if (!path.ok()) return path.status();
    summary.checkpoint_path = *path;
  }
  if (summary.checkpoint_path.empty()) summary.checkpoint_path = LatestCheckpointPath(opt.out_dir);
  // Relaunched after completion (resume of a finished run): report the final validation anyway.
  if (trained_steps == 0 && step == total_steps && total_steps > 0) last_val = evaluate();

  summary.steps = step;
  summary.tokens = step * step_tokens;
  summary.final_val_bpc = last_val;
  const double trained_tokens = static_cast<double>(trained_steps * step_tokens);
  summary.measured_flops_per_token = trained_tokens > 0 ? train_model_flops / trained_tokens : 0;
  nlohmann::json j = {
      {"event", "summary"},
      {"run_id", config.run_id},
      {"status", summary.outcome == RunOutcome::kCompleted ? "completed" : "stopped"},
      {"steps", step},
      {"total_steps", total_steps},
      {"tokens", summary.tokens},
      {"unique_tokens", corpus.UniqueTokens()},
      {"epochs", static_cast<double>(cursor) / corpus.NumUniqueWindows()},
      {"params", analytic.params},
      {"active_params", analytic.active_params},
      {"vocab_params", analytic.vocab_params},
      {"analytic_flops_per_token", analytic.flops_per_token},
      {"measured_flops_per_token", summary.measured_flops_per_token},
      {"measured_flops_per_token_total",
       trained_tokens > 0 ? train_total_flops / trained_tokens : 0.0},
      {"flops_relative_error",
       trained_tokens > 0 ? summary.measured_flops_per_token / analytic.flops_per_token - 1 : 0.0},
      {"training_flops", train_total_flops},
      {"train_seconds", train_seconds},
      {"wall_seconds", Seconds(Clock::now() - run_start)},
      {"wall_time", absl::StrFormat("%.3fs", Seconds(Clock::now() - run_start))},  // proto Duration
      {"tokens_per_second", train_seconds > 0 ? trained_tokens / train_seconds : 0.0},
      {"peak_memory_bytes", PeakRssBytes()},
      {"checkpoint", summary.checkpoint_path},
  };
  if (trained_steps > 0) j["final_train_bpc"] = summary.final_train_bpc;
  if (!std::isnan(last_val)) j["final_val_bpc"] = last_val;
  summary.json = j.dump();
  opt.metrics->Write(summary.json);
  return summary;
}

}  // namespace parity::kernels
