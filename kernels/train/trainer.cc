#include "kernels/train/trainer.h"

#include <cmath>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/status_macros.h"
#include "kernels/train/checkpoint.h"
#include "kernels/train/metrics.h"
#include "kernels/train/session.h"
#include "kernels/train/step.h"

namespace parity::kernels {

namespace {

// The step's micro-batches in the fingerprint: the micro-batch count when the cap divides the
// step (the key fingerprints had when micro-batches had to be equal, so their checkpoints still
// resume), the step's sequences otherwise.
std::string MicroBatchesKey(const TrainConfig& t) {
  if (t.batch_sequences % t.batch_size == 0) return absl::StrCat(t.batch_sequences / t.batch_size);
  return absl::StrCat("ragged ", t.batch_sequences);
}

}  // namespace

uint64_t RunFingerprint(const RunConfig& c, const std::string& dataset_digest,
                        const std::string& device_name) {
  const ModelConfig& m = c.model;
  const OptimizerConfig& o = c.optimizer;
  const TrainConfig& t = c.train;
  const std::string s = absl::StrCat(
      m.d_model, ",", m.n_layers, ",", m.n_heads, ",", m.n_kv_heads, ",", m.d_ffn, ",", m.seq_len,
      ",", m.vocab_size, ",", static_cast<int>(m.positions), ",", m.rope_theta, ",",
      static_cast<int>(m.head), ",", static_cast<int>(m.layout), ",", m.interleave_every, ",",
      m.n_experts, ",", m.top_k, ",", m.d_expert, ",", m.SharedDim(), ",",
      static_cast<int>(m.gate_norm), ",", m.aux_loss_weight, ",", m.z_loss_weight, ",",
      m.bias_update_rate, "|", o.lr, ",", o.min_lr, ",", o.warmup_steps, ",",
      static_cast<int>(o.schedule), ",", o.decay_fraction, ",", o.beta1, ",", o.beta2, ",", o.eps,
      ",", o.weight_decay, ",", o.grad_clip, "|", t.batch_size, ",", MicroBatchesKey(t), ",",
      t.steps, ",", t.seed, ",", t.eval_tokens, "|", dataset_digest, ",",
      c.data.validation_fraction, ",", c.data.unique_tokens, ",", static_cast<int>(c.data.subset),
      "|", PrecisionName(c.precision), ",", device_name);
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char ch : s) h = (h ^ ch) * 1099511628211ULL;
  return h;
}

void TrainSummary::SetEval(const TokenCorpus& corpus, const std::vector<double>& bpc) {
  final_eval_bpc.clear();
  for (size_t i = 0; i < bpc.size(); ++i) {
    final_eval_bpc.emplace_back(corpus.EvalSetName(i), bpc[i]);
  }
  if (!bpc.empty()) final_val_bpc = bpc[0];
}

absl::StatusOr<TrainSummary> RunTraining(const RunConfig& config, const TrainerOptions& opt) {
  PARITY_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, OpenSession(config, opt));
  Session& s = *session;
  // In a gang rank 0 alone reads the checkpoint and hands its state to the others, which need
  // no copy of the file (they may run on other hosts).
  if (s.IsRankZero() && (opt.resume == ResumeMode::kResumeIfPresent || !opt.resume_from.empty())) {
    PARITY_RETURN_IF_ERROR(ResumeSession(s));
  }
  PARITY_RETURN_IF_ERROR(SyncRanks(s));
  const bool gang = s.Distributed();
  bool agreed_stop = false;  // a gang stops together, after the step at which one rank asked
  const TrainConfig& tc = s.config.train;
  TrainSummary summary;
  summary.final_val_bpc = std::nan("");
  Telemetry telemetry;
  absl::Time last_checkpoint = absl::Now();  // or the start of this process's training
  while (s.step < tc.steps) {
    const bool stop_asked = opt.stop != nullptr && opt.stop->load();
    if ((gang ? agreed_stop : stop_asked) ||
        (opt.max_steps > 0 && telemetry.trained_steps >= opt.max_steps)) {
      summary.outcome = RunOutcome::kStopped;
      break;
    }
    PARITY_ASSIGN_OR_RETURN(const StepResult step, TrainStep(s, stop_asked));
    agreed_stop = step.stop;
    telemetry.Add(step, s.StepTokens());
    summary.final_train_bpc = step.TrainBpc(s.StepTokens());
    const bool last = s.step == tc.steps;
    const bool eval = s.step % tc.eval_interval == 0 || last;
    std::vector<double> eval_bpc;
    if (eval) {
      PARITY_ASSIGN_OR_RETURN(eval_bpc, Evaluate(s));
      summary.SetEval(s.corpus, eval_bpc);
    }
    if (s.IsRankZero() && (s.step % tc.log_interval == 0 || s.step == 1 || last || eval ||
                           step.profile.has_value())) {
      opt.metrics->Write(MetricsLine(s, step, telemetry, eval_bpc).dump());
      telemetry.ResetWindow();
    }
    const bool by_time = tc.checkpoint_seconds > 0 &&
                         absl::Now() - last_checkpoint >= absl::Seconds(tc.checkpoint_seconds);
    if (s.IsRankZero() &&
        ((tc.checkpoint_interval > 0 && s.step % tc.checkpoint_interval == 0) || by_time || last)) {
      PARITY_ASSIGN_OR_RETURN(summary.checkpoint_path, SaveCheckpoint(s));
      last_checkpoint = absl::Now();
    }
  }
  if (s.IsRankZero() && summary.outcome == RunOutcome::kStopped && telemetry.trained_steps > 0) {
    PARITY_ASSIGN_OR_RETURN(summary.checkpoint_path, SaveCheckpoint(s));
  }
  if (summary.checkpoint_path.empty() && s.IsRankZero()) {
    summary.checkpoint_path = LatestCheckpointPath(opt.out_dir);
  }
  // Relaunched after completion (resume of a finished run): report the final validation anyway.
  if (telemetry.trained_steps == 0 && s.step == tc.steps && tc.steps > 0) {
    PARITY_ASSIGN_OR_RETURN(const std::vector<double> eval_bpc, Evaluate(s));
    summary.SetEval(s.corpus, eval_bpc);
  }
  summary.data_wait_seconds = s.loader->wait_seconds();
  summary.json = SummaryLine(s, telemetry, summary).dump();
  // No collective follows: this rank leaving now is the run's end, not a failure (gang_watch.h).
  s.comm->MarkFinished();
  // Ranks > 0 report nothing: the run's lines come from rank 0 exactly once.
  if (s.IsRankZero()) opt.metrics->Write(summary.json);
  return summary;
}

}  // namespace parity::kernels
