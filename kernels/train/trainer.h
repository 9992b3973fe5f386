// The training loop for one run: model + AdamW + schedule + data + checkpoints + telemetry.
// RunTraining is the whole life of a parity-train process minus argument parsing; its parts live
// in session.* (setup, resume, checkpoint), step.* (one optimizer step, bias balancing,
// validation) and metrics.* (the JSON lines).
//
// Threading: RunTraining runs on the caller's thread; the device's pool parallelises inside ops.
// `stop` (may be null) is polled between steps — set it from a signal handler to checkpoint and
// return early with status kStopped.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/backend/device_choice.h"
#include "kernels/comm/communicator.h"
#include "kernels/data/batch_loader.h"
#include "kernels/model/config.h"

namespace parity::kernels {

// Where metric lines go (one JSON object per line, no trailing newline in `line`).
class MetricsSink {
 public:
  virtual ~MetricsSink() = default;
  virtual void Write(const std::string& line) = 0;
};

enum class ResumeMode { kFresh, kResumeIfPresent };

struct TrainerOptions {
  std::string out_dir;  // checkpoints go here
  ResumeMode resume = ResumeMode::kFresh;
  // When set, resume from exactly this checkpoint file (it may lie outside out_dir, e.g. in an
  // earlier attempt's directory), whatever `resume` says; NotFound if it is missing. A worker
  // names the checkpoint the scheduler recorded, whose metric points are all stored, rather
  // than the newest on disk, so a resumed run's curve has no hole.
  std::string resume_from = {};
  DeviceChoice device = {};                 // cpu unless told otherwise
  int threads = 1;                          // CPU pool threads (the CPU device only)
  MetricsSink* metrics = nullptr;           // required
  const std::atomic<bool>* stop = nullptr;  // may be null
  // Stop (checkpoint, outcome kStopped) after this many steps in this process; 0 = no limit.
  // For tests and for workers that slice long runs.
  int64_t max_steps = 0;
  // Take a time split of this step (1-based; 0 = none): its metrics line, always written, carries
  // "profile" (model/step_profile.h). The device is synchronised around every timed op of that
  // step, so its throughput is not representative; the others are untouched.
  int64_t profile_step = 0;
  // Replay each micro-batch's forward and backward from a recorded graph (Model::SetGraphReplay):
  // dense models; the same bits. Off by default until bench/gpu_check.sh has run it on a GPU.
  bool graph_replay = false;
  // Whether the next micro-batch is read on a loader thread while the current one computes
  // (data/batch_loader.h); the windows are the same either way.
  Prefetch prefetch = Prefetch::kOn;
  // This process's place in its gang (kernels/README.md, "Data parallelism"); world size 1 by
  // default. Rank r trains sequences [r·P, (r+1)·P) of every step (P = batch_sequences / W), in
  // micro-batches of at most batch_size; rank 0 alone writes checkpoints and metric lines.
  CommOptions comm = {};
};

enum class RunOutcome { kCompleted, kStopped };

struct TrainSummary {
  RunOutcome outcome = RunOutcome::kCompleted;
  int64_t steps = 0;
  int64_t tokens = 0;
  double final_train_bpc = 0;
  double final_val_bpc = 0;  // primary evaluation set; NaN when no evaluation ran
  // Every reported evaluation set's final BPC, in report order (empty when none ran).
  std::vector<std::pair<std::string, double>> final_eval_bpc;
  double data_wait_seconds = 0;         // trainer time spent waiting for batches
  double measured_flops_per_token = 0;  // counted kModel FLOPs of training steps / tokens
  double analytic_flops_per_token = 0;  // M
  std::string checkpoint_path;
  std::string json;  // the summary line as written to the sink

  // Records an evaluation: `bpc` per set of `corpus` in its report order (the first is primary).
  void SetEval(const TokenCorpus& corpus, const std::vector<double>& bpc);
};

// A 64-bit fingerprint of everything that determines the run's trajectory (model, optimizer,
// training and data settings, precision, the device that computes it — `device_name` is
// Device::Name(), backend and GPU model — and the dataset *content* via `dataset_digest` (the
// SHA-256 hex of TokenCorpus::Digest), not its path, so a resume on another machine with the data
// elsewhere is accepted); a checkpoint from a different spec, dataset, precision or kind of
// device is refused on resume. The evaluation sets are not in it: they change what is reported,
// not the trajectory.
uint64_t RunFingerprint(const RunConfig& config, const std::string& dataset_digest,
                        const std::string& device_name);

// Validates, trains, checkpoints. InvalidArgument for a bad spec or an unavailable device (before
// any work), FailedPrecondition for a checkpoint from a different spec or device, DataLoss for a
// corrupt one, OutOfRange when the loss or gradient becomes non-finite (diverged; nothing applied),
// PermissionDenied when the output directory cannot be created, other codes for I/O trouble.
absl::StatusOr<TrainSummary> RunTraining(const RunConfig& config, const TrainerOptions& options);

}  // namespace parity::kernels
