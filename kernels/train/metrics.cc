#include "kernels/train/metrics.h"

#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "kernels/model/memory_shape.h"

namespace parity::kernels {
namespace {

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

void Telemetry::Add(const StepResult& step, int64_t step_tokens) {
  ++trained_steps;
  model_flops += step.model_flops;
  total_flops += step.total_flops;
  seconds += step.seconds;
  data_wait_seconds += step.data_wait_seconds;
  comm_seconds += step.comm_seconds;
  window_seconds += step.seconds, window_flops += step.total_flops, window_tokens += step_tokens;
}

double Telemetry::WallSeconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

nlohmann::json MetricsLine(const Session& s, const StepResult& r, const Telemetry& t,
                           const std::vector<double>& eval_bpc) {
  const int64_t step_tokens = s.StepTokens(), windows = s.corpus.NumUniqueWindows();
  nlohmann::json j = {
      {"event", "metrics"},
      {"run_id", s.config.run_id},
      {"step", s.step},
      {"total_steps", s.config.train.steps},
      {"tokens", s.step * step_tokens},
      {"unique_tokens", std::min(s.cursor, windows) * s.config.model.seq_len},
      {"unique_budget_tokens", s.corpus.UniqueTokens()},
      {"epoch", static_cast<double>(s.cursor) / windows},
      {"train_bpc", r.TrainBpc(step_tokens)},
      {"learning_rate", r.learning_rate},
      {"grad_norm", r.grad_norm},
      {"aux_loss", r.aux},
      {"z_loss", r.z},
      {"tokens_per_second", t.window_tokens / t.window_seconds},
      {"flops_per_second", t.window_flops / t.window_seconds},
      {"flops_per_token", r.model_flops / step_tokens},
      {"flops_per_token_total", r.total_flops / step_tokens},
      // Cumulative training compute in the accounting's sense (kModel FLOPs, C = M·D so far);
      // every step of a model executes the same count, so this survives resumes.
      {"flops", static_cast<double>(s.step) * r.model_flops},
      {"time", absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(), absl::UTCTimeZone())},
  };
  if (r.profile.has_value()) {
    // Seconds of the step by kind of work; "other" is the rest (norms, SwiGLU, embedding, loss,
    // copies, waiting for data).
    nlohmann::json p = nlohmann::json::object();
    for (size_t b = 0; b < kNumOpBuckets; ++b) {
      p[std::string(OpBucketName(static_cast<OpBucket>(b))) + "_seconds"] = r.profile->seconds[b];
    }
    p["other_seconds"] = std::max(0.0, r.seconds - r.profile->Sum());
    p["step_seconds"] = r.seconds;
    j["profile"] = p;
  }
  if (!eval_bpc.empty()) {
    j["val_bpc"] = eval_bpc[0];
    nlohmann::json sets = nlohmann::json::object();
    for (size_t i = 0; i < eval_bpc.size(); ++i) sets[s.corpus.EvalSetName(i)] = eval_bpc[i];
    j["eval_bpc"] = sets;
  }
  if (!r.loads.empty()) {
    nlohmann::json experts = nlohmann::json::array();
    for (size_t i = 0; i < r.loads.size(); ++i) {
      experts.push_back(
          ExpertLoadJson(s.model->MoeLayerIndex(static_cast<int64_t>(i)), r.loads[i]));
    }
    j["expert_load"] = experts;
  }
  return j;
}

nlohmann::json SummaryLine(const Session& s, const Telemetry& t, TrainSummary& summary) {
  const AnalyticCounts analytic = ComputeAnalyticCounts(s.config.model);
  const int64_t step_tokens = s.StepTokens();
  const double trained_tokens = static_cast<double>(t.trained_steps * step_tokens);
  const double wall = t.WallSeconds();
  summary.steps = s.step;
  summary.tokens = s.step * step_tokens;
  summary.analytic_flops_per_token = analytic.flops_per_token;
  summary.measured_flops_per_token = trained_tokens > 0 ? t.model_flops / trained_tokens : 0;
  nlohmann::json j = {
      {"event", "summary"},
      {"run_id", s.config.run_id},
      {"status", summary.outcome == RunOutcome::kCompleted ? "completed" : "stopped"},
      {"steps", s.step},
      {"total_steps", s.config.train.steps},
      {"tokens", summary.tokens},
      {"unique_tokens", s.corpus.UniqueTokens()},
      {"epochs", static_cast<double>(s.cursor) / s.corpus.NumUniqueWindows()},
      {"params", analytic.params},
      {"active_params", analytic.active_params},
      {"vocab_params", analytic.vocab_params},
      {"analytic_flops_per_token", analytic.flops_per_token},
      {"measured_flops_per_token", summary.measured_flops_per_token},
      {"measured_flops_per_token_total", trained_tokens > 0 ? t.total_flops / trained_tokens : 0.0},
      {"flops_relative_error",
       trained_tokens > 0 ? summary.measured_flops_per_token / analytic.flops_per_token - 1 : 0.0},
      {"training_flops", t.total_flops},
      {"train_seconds", t.seconds},
      {"wall_seconds", wall},
      {"wall_time", absl::StrFormat("%.3fs", wall)},  // a proto Duration
      {"tokens_per_second", t.seconds > 0 ? trained_tokens / t.seconds : 0.0},
      // The host process's peak RSS; the device's high-water mark beside the planner's estimate
      // for this config (kernels/model/memory_shape.h), which the lent-GPU check compares.
      {"peak_memory_bytes", PeakRssBytes()},
      {"peak_device_memory_bytes", s.device->PeakBytes()},
      {"estimated_device_memory_bytes",
       EstimatedDeviceBytes(s.config, s.options.device.kind == DeviceKind::kCuda
                                          ? Workspace::kCuda
                                          : Workspace::kNone)},
      {"checkpoint", summary.checkpoint_path},
      {"device", std::string(s.device->Name())},
      {"precision", PrecisionName(s.config.precision)},
      {"dataset_digest", s.corpus.Digest()},
      // Of train_seconds, the time the trainer waited for batches (the data loader's share).
      {"data_wait_seconds", t.data_wait_seconds},
  };
  if (s.Distributed()) {
    // Of train_seconds, rank 0's time in the gang's collectives after its backward (the gradient
    // not summed during it, the statistics sum, waiting for slower ranks).
    j["world_size"] = s.comm->world_size();
    // Which library summed (gloo or nccl): a gang of one must show it really ran the backend's.
    j["communicator"] = std::string(s.comm->Name());
    j["comm_seconds"] = t.comm_seconds;
  }
  if (t.trained_steps > 0) j["final_train_bpc"] = summary.final_train_bpc;
  if (!std::isnan(summary.final_val_bpc)) j["final_val_bpc"] = summary.final_val_bpc;
  if (!summary.final_eval_bpc.empty()) {
    nlohmann::json sets = nlohmann::json::object();
    for (const auto& [name, bpc] : summary.final_eval_bpc) sets[name] = bpc;
    j["final_eval_bpc"] = sets;
  }
  return j;
}

}  // namespace parity::kernels
