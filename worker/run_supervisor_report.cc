// RunSupervisor's end of a run (Finish): the CompleteRun request the engine's exit and the
// supervisor's observations make — a success only when the summary matches the plan, else a
// failure with its class and a message fit for every viewer — and its delivery after the last
// metric point, retried (and the lease held by heartbeats) while the scheduler is away.
#include <algorithm>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "core/summary_check.h"
#include "spdlog/spdlog.h"
#include "worker/checkpoint_retention.h"
#include "worker/run_supervisor.h"

namespace parity::worker {
namespace {

// The last `bytes` of a file, for failure messages.
std::string Tail(const std::string& path, size_t bytes) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return "";
  const std::streamoff size = in.tellg();
  const std::streamoff start =
      std::max<std::streamoff>(0, size - static_cast<std::streamoff>(bytes));
  in.seekg(start);
  std::string out(static_cast<size_t>(size - start), '\0');
  in.read(out.data(), static_cast<std::streamsize>(out.size()));
  return out;
}

// google.rpc.Code for a failure class (what the caller of the run should think happened).
int RpcCodeFor(parity::v1::FailureClass c) {
  switch (c) {
    case parity::v1::FAILURE_CLASS_USER_ERROR:
      return static_cast<int>(absl::StatusCode::kInvalidArgument);
    case parity::v1::FAILURE_CLASS_OUT_OF_MEMORY:
      return static_cast<int>(absl::StatusCode::kResourceExhausted);
    case parity::v1::FAILURE_CLASS_PREEMPTED:
      return static_cast<int>(absl::StatusCode::kAborted);
    case parity::v1::FAILURE_CLASS_DIVERGED:
      return static_cast<int>(absl::StatusCode::kOutOfRange);
    case parity::v1::FAILURE_CLASS_HUNG:
      return static_cast<int>(absl::StatusCode::kDeadlineExceeded);
    case parity::v1::FAILURE_CLASS_INVALID_RESULT:
    case parity::v1::FAILURE_CLASS_DATA_MISMATCH:
      return static_cast<int>(absl::StatusCode::kDataLoss);
    default:
      return static_cast<int>(absl::StatusCode::kInternal);
  }
}

}  // namespace

RunOutcome RunSupervisor::Finish(const ExitStatus& exit, const ChildEnd& end) {
  bool success = false;
  parity::v1::CompleteRunRequest req = CompletionRequest(exit, end, success);
  // CompleteRun goes only after every point is stored, so the newest checkpoint counts.
  NewCheckpoint(/*require_points_stored=*/false);
  if (last_checkpoint_) {
    if (std::optional<parity::v1::Checkpoint> reported = Reported(*last_checkpoint_)) {
      *req.mutable_checkpoint() = *reported;
    }
  }
  return DeliverCompletion(req, success, end);
}

parity::v1::CompleteRunRequest RunSupervisor::CompletionRequest(const ExitStatus& exit,
                                                                const ChildEnd& end,
                                                                bool& success) {
  parity::v1::CompleteRunRequest req;
  req.set_run_id(run_.run_id());
  req.set_lease_epoch(lease_.lease_epoch());
  req.set_lease_secret(lease_secret_);
  std::optional<parity::v1::RunSummary> summary;
  {
    absl::MutexLock lock(&mu_);
    summary = summary_;
  }
  success = false;
  // A success is only what matches the plan: an engine that exits 0 without a summary, or with
  // one that disagrees with the run's spec, produced a result nobody should plot.
  std::string invalid;
  if (exit.success() && (summary || !end.preempted) && !end.hung) {
    invalid = summary ? core::SummaryMismatch(run_.spec(), *summary,
                                              run_.has_checkpoint() ? run_.checkpoint().step() : 0)
                      : "the engine exited 0 without a summary";
    success = invalid.empty();
    if (success) *req.mutable_success() = *summary;
    // The digest the worker verified before training, when the engine did not say (an engine
    // that predates the field); the engine's own, when given, is the dataset it read.
    if (success && req.success().dataset_digest().empty()) {
      req.mutable_success()->set_dataset_digest(dataset_digest_);
    }
  }
  if (end.not_started) {
    parity::v1::RunFailure* f = req.mutable_failure();
    f->set_failure_class(end.not_started->failure_class);
    f->mutable_status()->set_code(RpcCodeFor(end.not_started->failure_class));
    f->mutable_status()->set_message(end.not_started->message);
  } else if (!success) {
    DescribeFailure(exit, end, invalid, *req.mutable_failure());
  }
  return req;
}

void RunSupervisor::DescribeFailure(const ExitStatus& exit, const ChildEnd& end,
                                    const std::string& invalid, parity::v1::RunFailure& failure) {
  std::optional<EngineError> engine_error;
  {
    absl::MutexLock lock(&mu_);
    engine_error = engine_error_;
  }
  parity::v1::FailureClass cls = ClassifyEngineExit(exit, end.killed_by_us);
  if (end.preempted) cls = parity::v1::FAILURE_CLASS_PREEMPTED;
  if (end.hung) cls = parity::v1::FAILURE_CLASS_HUNG;
  if (!invalid.empty()) cls = parity::v1::FAILURE_CLASS_INVALID_RESULT;
  failure.set_failure_class(cls);
  failure.mutable_status()->set_code(RpcCodeFor(cls));
  std::string msg =
      end.failed_rank ? absl::StrCat("engine of gang rank ", *end.failed_rank, " ", exit.ToString())
                      : absl::StrCat("engine ", exit.ToString());
  if (!end.failed_detail.empty()) absl::StrAppend(&msg, ": ", end.failed_detail);
  if (end.hung) absl::StrAppend(&msg, ": ", hung_detail_);
  if (!invalid.empty()) absl::StrAppend(&msg, ": invalid result: ", invalid);
  // What the engine said, as every viewer of the run may read it: without this worker's paths
  // and file sizes (the worker's log and engine.log keep it all).
  if (engine_error) absl::StrAppend(&msg, ": ", engine_error->code, ": ", engine_error->message);
  const std::string log = end.failed_rank ? RankLog(*end.failed_rank) : work_dir_ + "/engine.log";
  if (std::string tail = Tail(log, 1500); !tail.empty()) {
    absl::StrAppend(&msg, "; log tail:\n", tail);
  }
  failure.mutable_status()->set_message(ForViewers(msg));
}

RunOutcome RunSupervisor::DeliverCompletion(const parity::v1::CompleteRunRequest& req, bool success,
                                            const ChildEnd& end) {
  const absl::Duration patience =
      end.preempted ? options_.preempt_report_timeout : options_.report_timeout;
  const absl::Time deadline = absl::Now() + patience;
  absl::Time next_heartbeat = absl::Now() + options_.heartbeat_interval;
  core::Backoff backoff(options_.backoff);
  while (absl::Now() < deadline) {
    absl::Status s = FlushMetrics(/*force=*/true);
    if (s.ok() && buffer_.size() == 0) {
      absl::StatusOr<parity::v1::CompleteRunResponse> resp = client_.CompleteRun(req);
      if (resp.ok()) return Completed(req, *resp, success, end);
      s = resp.status();
    }
    if (s.ok()) continue;  // more metric batches to send
    if (LeaseRefused(s)) {
      spdlog::warn("run {}: lease lost while reporting the end ({})", run_.run_id(), s.ToString());
      return RunOutcome::kLeaseLost;
    }
    if (!core::IsRetryable(s)) {
      spdlog::error("run {}: scheduler refused the report: {}", run_.run_id(), s.ToString());
      return RunOutcome::kAbandoned;
    }
    if (absl::Now() >= next_heartbeat) {  // hold the lease while the scheduler is flaky
      bool cancel = false;
      if (LeaseRefused(SendHeartbeat(&cancel))) return RunOutcome::kLeaseLost;
      next_heartbeat = absl::Now() + options_.heartbeat_interval;
    }
    // At most a heartbeat interval between tries, however long the outage was: the scheduler
    // gives the lease only a grace after it is back, and the backoff has grown to its maximum.
    absl::SleepFor(std::min({backoff.NextDelay(), options_.heartbeat_interval,
                             std::max(absl::ZeroDuration(), deadline - absl::Now())}));
  }
  spdlog::error("run {}: scheduler unreachable for {}; leaving the run to the lease reaper",
                run_.run_id(), absl::FormatDuration(patience));
  return RunOutcome::kAbandoned;
}

RunOutcome RunSupervisor::Completed(const parity::v1::CompleteRunRequest& req,
                                    const parity::v1::CompleteRunResponse& resp, bool success,
                                    const ChildEnd& end) {
  spdlog::info("run {}: completed ({}), run is now {}", run_.run_id(),
               success ? "success" : parity::v1::FailureClass_Name(req.failure().failure_class()),
               parity::v1::RunState_Name(resp.run().state()));
  // What the run needs of this disk's checkpoints now: a finished run only its final one, a
  // requeued run only its resume point.
  if (resp.run().run_id() == run_.run_id() &&
      resp.run().state() != parity::v1::RUN_STATE_UNSPECIFIED) {
    ApplyCheckpointRetention(run_checkpoints_, RetentionOf(resp.run()));
  }
  if (success && resp.run().state() == parity::v1::RUN_STATE_FAILED) {
    spdlog::error("run {}: the scheduler refused the result: {}", run_.run_id(),
                  resp.run().failure().message());
    return RunOutcome::kFailed;
  }
  if (success) return RunOutcome::kSucceeded;
  return end.preempted ? RunOutcome::kPreempted : RunOutcome::kFailed;
}

}  // namespace parity::worker
