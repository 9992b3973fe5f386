// One leased run, from spawn to CompleteRun: the engine child, heartbeats, metric forwarding,
// checkpoints, cancellation, preemption and loss of the lease.
//
// Knows the scheduler only through SchedulerClient (no gRPC) and the engine only through
// engine_protocol.h. A scheduler that cannot be reached does not stop training: heartbeats and
// metric batches are retried with backoff while the lease may still be valid (until one lease TTL
// after the last known expiry); the first FAILED_PRECONDITION or NOT_FOUND means another worker
// owns the run, and the engine is killed at once.
#pragma once

#include <array>
#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/backoff.h"
#include "parity/v1/run.pb.h"
#include "worker/child_process.h"
#include "worker/dataset_inventory.h"
#include "worker/dataset_resolver.h"
#include "worker/device_inventory.h"
#include "worker/engine_protocol.h"
#include "worker/gang_ranks.h"
#include "worker/metric_buffer.h"
#include "worker/scheduler_client.h"

namespace parity::worker {

class WorkerMetrics;

// The worker's credentials, which no engine inherits (names, or prefixes ending in '*'): its
// bearer token and the file holding it, and every TLS setting (the client key among them).
inline constexpr std::array<const char*, 3> kEngineWithheldEnv = {
    "PARITY_TOKEN", "PARITY_TOKEN_FILE", "PARITY_TLS_*"};

struct RunSupervisorOptions {
  std::string worker_id;
  // The engine executable (path or name on PATH).
  std::string train_binary = "parity-train";
  // Checkpoint store: a lease's checkpoints go to <checkpoint_root>/<run_id>/epoch-<lease epoch>/.
  std::string checkpoint_root;
  // Scratch: <work_root>/<run_id>/ holds the spec JSON and engine.log.
  std::string work_root;
  // Where dataset names resolve, and nowhere else: "kjv" → <corpus_dir>/kjv.txt
  // (dataset_resolver.h). Empty = no dataset is found.
  std::string corpus_dir;
  // The largest dataset file this worker lets an engine read (also passed to the engine).
  DatasetLimits dataset_limits;
  // How the run's dataset is verified against the sweep's pinned digest before the engine starts
  // (dataset_inventory.h). A null cache = a cache of this run's own (everything is hashed).
  DatasetCheck dataset_check;
  absl::Duration heartbeat_interval = absl::Seconds(10);
  absl::Duration lease_ttl = absl::Seconds(60);
  // SIGTERM → SIGKILL grace after a cancellation or a preemption (the engine checkpoints
  // meanwhile).
  absl::Duration kill_grace = absl::Seconds(30);
  // How long to keep trying to deliver the last metrics and CompleteRun when preempted.
  absl::Duration preempt_report_timeout = absl::Seconds(15);
  // How long to keep trying otherwise (the scheduler is away after the engine finished).
  absl::Duration report_timeout = absl::Minutes(10);
  // Progress liveness. An engine that prints no new step for this long (or for 4× the longest
  // gap it has shown between two steps, whichever is longer: a step of a large model can take
  // minutes) is killed and the attempt fails as HUNG.
  absl::Duration progress_timeout = absl::Minutes(5);
  // The allowance until the engine has shown one gap between two steps: loading the corpus and
  // building the model come first, and the first interval says how long a step takes.
  absl::Duration startup_timeout = absl::Minutes(30);
  // Where a gang's rank 0 here serves its rendezvous store (--rendezvous-host).
  std::string rendezvous_host = "0.0.0.0";
  // Extra environment for the engine (on top of the worker's and the PARITY_* / thread variables).
  std::vector<std::pair<std::string, std::string>> engine_env;
  // Descriptor the engine writes metric lines to.
  int metrics_fd = 3;
  MetricBufferOptions metrics;
  core::BackoffOptions backoff;
  // Called on the supervisor thread once the outcome is final, so the lease loop can take the
  // next run at once instead of polling for a free slot. Must not block.
  std::function<void()> on_finished;
  // Where the run's progress and the scheduler calls are counted (Prometheus); may be null, else
  // must outlive the supervisor.
  WorkerMetrics* worker_metrics = nullptr;
};

enum class RunOutcome {
  kRunning,
  kSucceeded,  // CompleteRun(success) accepted; a gang follower: its ranks ended well (rank 0's
               // worker reports the success)
  kFailed,     // CompleteRun(failure) accepted (the scheduler may retry the run)
  kCancelled,  // cancelled by a user; nothing to report
  kPreempted,  // the worker is stopping; reported PREEMPTED
  kLeaseLost,  // the scheduler says another worker owns the run; dropped without a report
  kAbandoned,  // the scheduler stayed unreachable past report_timeout; the lease will lapse
};
const char* RunOutcomeName(RunOutcome outcome);

// Owned by the lease loop. Start, Preempt, outcome and Join may be called from any thread; the
// supervisor's own thread does all scheduler calls for the run, and a reader thread drains the
// engine's output into the metric buffer.
class RunSupervisor {
 public:
  RunSupervisor(SchedulerClient& client, RunSupervisorOptions options,
                parity::v1::LeaseRunResponse lease, DeviceGrant grant);
  ~RunSupervisor();  // Preempts if still running, then joins
  RunSupervisor(const RunSupervisor&) = delete;
  RunSupervisor& operator=(const RunSupervisor&) = delete;

  void Start();
  // The worker is shutting down: SIGTERM the engine, report PREEMPTED (unless it finished anyway).
  void Preempt();
  // kRunning until the supervisor thread has finished.
  RunOutcome outcome() const;
  bool done() const { return outcome() != RunOutcome::kRunning; }
  void Join();
  const std::string& run_id() const { return run_.run_id(); }

 private:
  // Everything below runs on the supervisor thread unless said otherwise.
  // Why the engine was never started: the failure as the run records it (every viewer reads the
  // message, so it names no path of this worker; the detail went to the worker's log).
  struct StartFailure {
    parity::v1::FailureClass failure_class = parity::v1::FAILURE_CLASS_INFRASTRUCTURE;
    std::string message;
  };
  struct Prepared {
    std::string spec_path;    // the spec JSON with the dataset resolved to its file or directory
    std::string resume_from;  // the checkpoint file to resume from; empty = start afresh
  };
  struct ChildEnd {
    ExitStatus exit;
    bool preempted = false;                   // the worker asked it to stop
    bool cancelled = false;                   // the scheduler said the run was cancelled
    bool lease_lost = false;                  // refused with FAILED_PRECONDITION / NOT_FOUND
    bool killed_by_us = false;                // the final SIGKILL came from the worker
    bool hung = false;                        // killed for making no progress (progress_timeout)
    std::optional<uint32_t> failed_rank;      // a gang: the local rank (not the primary) that
                                              // failed first; `exit` is its status
    std::string failed_detail;                // why, when it could not be started
    std::optional<StartFailure> not_started;  // set when no engine ran
  };
  void Supervise();
  // The run's engine, or one rank of a gang (`rendezvous`: rank 0's address and token, for ranks
  // > 0).
  absl::StatusOr<std::unique_ptr<ChildProcess>> StartEngine(
      const std::string& spec_path, const std::string& resume_from, uint32_t rank = 0,
      const EngineRendezvous& rendezvous = {});
  // A gang follower (no rank 0 here): heartbeats and checks its ranks in until the scheduler
  // releases the rendezvous; nullopt with `end` set when the gang was failed or the worker stops.
  std::optional<EngineRendezvous> AwaitRelease(ChildEnd& end);
  // Not a follower, or a follower released (`released` set): true. Otherwise the outcome is set
  // (reported as Finish does when it must be) and false.
  bool AwaitReleaseIfFollower(std::optional<EngineRendezvous>& released);
  // A gang follower's ranks ended: a success is rank 0's worker's to report, a failure is this
  // worker's (the whole gang restarts).
  bool FollowerSucceeded(const ChildEnd& end) const;
  // A gang rank's share of the invocation: its rank flags, its threads (the worker's grant split
  // between its local ranks) and its GPUs (the scheduler's indices for the rank).
  void GangInvocation(uint32_t rank, const EngineRendezvous& rendezvous,
                      EngineInvocation& invocation, std::vector<uint32_t>& gpus) const;
  // Where a gang rank other than the primary writes its stderr (the primary: engine.log).
  std::string RankLog(uint32_t rank) const;
  // One pass of the gang's share of SuperviseChild (gang_ranks.h).
  void PollGang(ChildProcess& child, ChildEnd& end, absl::Time now);
  // Whether the engine refused the checkpoint it was told to resume from as corrupt.
  bool ResumeCheckpointWasCorrupt(const ChildEnd& end);
  // SuperviseChild's loop state (run_supervisor_watch.cc).
  struct ChildWatch {
    absl::Time next_heartbeat;
    absl::Time next_metrics;
    std::optional<absl::Time> kill_at;  // SIGKILL the group then, unless it ended after SIGTERM
    // Progress liveness: the last step seen, when it was first seen, how many times the step
    // moved, and the longest gap between two moves so far.
    uint64_t seen_step = 0;
    int advances = 0;
    absl::Time last_progress;
    absl::Duration longest_gap = absl::ZeroDuration();
  };
  // Heartbeats and forwards metrics until the engine has ended (and was reaped).
  ChildEnd SuperviseChild(ChildProcess& child);
  // SIGTERM to the engine (and the gang's other local ranks); SIGKILL after the grace.
  void TerminateChild(ChildProcess& child, ChildWatch& watch, absl::Time now);
  // Another worker owns the run now: SIGKILL at once, nothing more is reported.
  void LoseLease(ChildProcess& child, ChildEnd& end, const absl::Status& why);
  // Kills the engine as HUNG when its step has not moved for longer than allowed.
  void WatchProgress(ChildProcess& child, ChildEnd& end, ChildWatch& watch, absl::Time now);
  // The heartbeat and the metric batch when due; what a refusal or a cancellation means.
  void TalkToScheduler(ChildProcess& child, ChildEnd& end, ChildWatch& watch, absl::Time now);
  void ReadOutput(int fd);  // reader thread
  // Resolves the dataset, writes the spec, finds the checkpoint to resume from.
  std::variant<Prepared, StartFailure> PrepareFiles();
  // The checkpoint file to resume from ("" = start afresh); INVALID_ARGUMENT when the recorded
  // URI is not one this worker may read (outside the run's prefix, through a link).
  absl::StatusOr<std::string> ResumeCheckpoint() const;
  // The checkpoint as a heartbeat or completion reports it: its URI relative to the store
  // (core/checkpoint_uri.h) instead of this worker's path; nullopt when the file lies outside
  // the run's directory (then nothing is reported).
  std::optional<parity::v1::Checkpoint> Reported(const parity::v1::Checkpoint& local) const;
  // Engine text made fit for every viewer of the run (failure_text.h).
  std::string ForViewers(absl::string_view engine_text) const;
  // One heartbeat attempt; returns the call's status (OK also when it asked to cancel).
  absl::Status SendHeartbeat(bool* cancel_requested);
  // One batch attempt, when due or when `force` and anything waits.
  absl::Status FlushMetrics(bool force);
  // Delivers the last metrics and CompleteRun (retrying, heartbeating meanwhile)
  // (run_supervisor_report.cc).
  RunOutcome Finish(const ExitStatus& exit, const ChildEnd& end);
  // The CompleteRun request for how the engine ended; `success` says which outcome it carries.
  parity::v1::CompleteRunRequest CompletionRequest(const ExitStatus& exit, const ChildEnd& end,
                                                   bool& success);
  // A failed attempt's class and a message every viewer of the run may read.
  void DescribeFailure(const ExitStatus& exit, const ChildEnd& end, const std::string& invalid,
                       parity::v1::RunFailure& failure);
  // Sends the remaining metrics, then `req`, until accepted, refused or out of patience.
  RunOutcome DeliverCompletion(const parity::v1::CompleteRunRequest& req, bool success,
                               const ChildEnd& end);
  // What an accepted CompleteRun means for this worker's checkpoints and the outcome.
  RunOutcome Completed(const parity::v1::CompleteRunRequest& req,
                       const parity::v1::CompleteRunResponse& resp, bool success,
                       const ChildEnd& end);
  void SetOutcome(RunOutcome outcome);
  bool PreemptRequested();
  // A checkpoint newer than the last reported one; with `require_points_stored`, only one whose
  // metric points are all stored (then a resume from it leaves no hole in the curve).
  std::optional<parity::v1::Checkpoint> NewCheckpoint(bool require_points_stored);
  // A hard link to `engine_file` where the engine does not prune (the file itself if that
  // fails): what a heartbeat records as the run's resume point.
  std::string KeepForResume(const std::string& engine_file) const;
  // Deletes a link KeepForResume made (nothing else).
  void RemoveKept(const std::string& path) const;
  // The newest checkpoint this lease's engine wrote (announced or on disk).
  std::optional<EngineCheckpoint> NewestCheckpoint();

  SchedulerClient& client_;
  const RunSupervisorOptions options_;
  // A gang's ranks on this worker (LeaseRunResponse.gang); null for an ordinary run.
  std::unique_ptr<GangRanks> gang_;
  const parity::v1::Lease lease_;
  const std::string lease_secret_;  // sent with every write about the run; never logged
  const parity::v1::Run run_;
  const DeviceGrant grant_;
  const std::string run_checkpoints_;  // <checkpoint_root>/<run_id>: every attempt's directory
  const std::string checkpoint_dir_;   // this lease's: <run_checkpoints_>/epoch-<lease_epoch>
  const std::string work_dir_;
  MetricBuffer buffer_;                     // thread-safe itself
  std::atomic<uint64_t> latest_step_{0};    // written by the reader thread
  uint64_t dropped_counted_ = 0;            // reader thread only: buffer drops already counted
  std::atomic<bool> engine_reaped_{false};  // set by the supervisor thread, read by the reader
  std::thread thread_;
  core::Backoff heartbeat_backoff_;        // supervisor thread only
  core::Backoff metrics_backoff_;          // supervisor thread only
  absl::Duration lease_ttl_;               // supervisor thread only: the last TTL granted
  absl::Time last_heartbeat_accepted_;     // supervisor thread only, by the worker's own clock
  bool warned_unreachable_ = false;        // supervisor thread only
  std::string hung_detail_;                // supervisor thread only: why it was killed as HUNG
  uint64_t reported_checkpoint_step_ = 0;  // supervisor thread only
  std::string kept_for_resume_;            // supervisor thread only: the recorded checkpoint's link
  std::string spec_path_;       // supervisor thread only: the spec every rank of a gang reads
  std::string dataset_path_;    // supervisor thread only: the resolved dataset file or directory
  std::string dataset_digest_;  // supervisor thread only: its SHA-256, verified before training
  std::optional<parity::v1::Checkpoint> last_checkpoint_;  // supervisor thread only

  mutable absl::Mutex mu_;
  RunOutcome outcome_ ABSL_GUARDED_BY(mu_) = RunOutcome::kRunning;
  bool preempt_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<EngineCheckpoint> engine_checkpoint_ ABSL_GUARDED_BY(mu_);  // newest notice
  std::optional<parity::v1::RunSummary> summary_ ABSL_GUARDED_BY(mu_);
  std::optional<EngineError> engine_error_ ABSL_GUARDED_BY(mu_);
};

}  // namespace parity::worker
