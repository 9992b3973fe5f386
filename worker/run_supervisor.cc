#include "worker/run_supervisor.h"

#include <signal.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <variant>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/proto_time.h"
#include "core/status_macros.h"
#include "core/summary_check.h"
#include "spdlog/spdlog.h"
#include "worker/checkpoint_retention.h"
#include "worker/worker_metrics.h"

namespace parity::worker {
namespace {

namespace fs = std::filesystem;

// PERMISSION_DENIED: the scheduler does not take this worker for the lease's holder (its
// secret or identity do not match), so no write of this lease can ever succeed.
bool LeaseGone(const absl::Status& s) { return LeaseRefused(s); }

parity::v1::Run WithRunId(parity::v1::LeaseRunResponse lease) {
  parity::v1::Run run = std::move(*lease.mutable_run());
  if (run.run_id().empty()) run.set_run_id(lease.lease().run_id());
  return run;
}

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

const char* RunOutcomeName(RunOutcome o) {
  switch (o) {
    case RunOutcome::kRunning:
      return "running";
    case RunOutcome::kSucceeded:
      return "succeeded";
    case RunOutcome::kFailed:
      return "failed";
    case RunOutcome::kCancelled:
      return "cancelled";
    case RunOutcome::kPreempted:
      return "preempted";
    case RunOutcome::kLeaseLost:
      return "lease-lost";
    case RunOutcome::kAbandoned:
      return "abandoned";
  }
  return "?";
}

RunSupervisor::RunSupervisor(SchedulerClient& client, RunSupervisorOptions options,
                             parity::v1::LeaseRunResponse lease, DeviceGrant grant)
    : client_(client),
      options_(std::move(options)),
      gang_(
          lease.has_gang() && lease.gang().world_size() > 1
              ? std::make_unique<GangRanks>(
                    client, lease.gang(),
                    lease.lease().run_id().empty() ? lease.run().run_id() : lease.lease().run_id(),
                    options_.worker_id, lease.lease_secret(),
                    [this](uint32_t rank, const EngineRendezvous& rendezvous) {
                      return StartEngine(spec_path_, "", rank, rendezvous);
                    })
              : nullptr),
      lease_(lease.lease()),
      lease_secret_(lease.lease_secret()),
      run_(WithRunId(std::move(lease))),
      grant_(std::move(grant)),
      run_checkpoints_((fs::path(options_.checkpoint_root) / run_.run_id()).string()),
      // One directory per lease: a worker that lost its lease (and may still be training, cut
      // off) writes only where no newer attempt reads or prunes.
      checkpoint_dir_(
          (fs::path(run_checkpoints_) / absl::StrCat("epoch-", lease_.lease_epoch())).string()),
      work_dir_((fs::path(options_.work_root) / run_.run_id()).string()),
      buffer_(options_.metrics),
      heartbeat_backoff_(options_.backoff),
      metrics_backoff_(options_.backoff),
      lease_ttl_(options_.lease_ttl) {}

RunSupervisor::~RunSupervisor() {
  Preempt();
  Join();
}

void RunSupervisor::Start() {
  thread_ = std::thread([this] { Supervise(); });
}

void RunSupervisor::Preempt() {
  absl::MutexLock lock(&mu_);
  preempt_ = true;
}

bool RunSupervisor::PreemptRequested() {
  absl::MutexLock lock(&mu_);
  return preempt_;
}

RunOutcome RunSupervisor::outcome() const {
  absl::MutexLock lock(&mu_);
  return outcome_;
}

void RunSupervisor::SetOutcome(RunOutcome o) {
  {
    absl::MutexLock lock(&mu_);
    outcome_ = o;
  }
  if (o != RunOutcome::kRunning && options_.worker_metrics != nullptr) {
    if (const size_t left = buffer_.size(); left > 0) {
      options_.worker_metrics->PointsDropped("undelivered", left);
    }
    options_.worker_metrics->RunFinished(run_.run_id(), RunOutcomeName(o));
  }
  if (o != RunOutcome::kRunning && options_.on_finished) options_.on_finished();
}

void RunSupervisor::Join() {
  if (thread_.joinable()) thread_.join();
}

void RunSupervisor::ReadOutput(int fd) {
  LineReader reader(fd);
  // A follower's ranks print only error lines; anything else is not this worker's to report
  // (rank 0's worker reports the gang's metrics, checkpoints and result).
  const bool follower = gang_ != nullptr && !gang_->hosts_rank0();
  const auto on_line = [this, follower](std::string_view line) {
    EngineEvent event = ParseEngineLine(line);
    if (follower && !std::holds_alternative<EngineError>(event)) return;
    if (auto* point = std::get_if<parity::v1::MetricPoint>(&event)) {
      point->set_run_id(run_.run_id());
      point->set_attempt(std::max(1u, run_.attempt()));
      uint64_t prev = latest_step_.load();
      while (point->step() > prev && !latest_step_.compare_exchange_weak(prev, point->step())) {
      }
      if (options_.worker_metrics != nullptr) {
        options_.worker_metrics->RunProgress(run_.run_id(), *point);
      }
      buffer_.Add(std::move(*point), absl::Now());
      if (const uint64_t dropped = buffer_.dropped();
          options_.worker_metrics != nullptr && dropped > dropped_counted_) {
        options_.worker_metrics->PointsDropped("buffer_full", dropped - dropped_counted_);
        dropped_counted_ = dropped;
      }
    } else if (auto* ckpt = std::get_if<EngineCheckpoint>(&event)) {
      absl::MutexLock lock(&mu_);
      if (!engine_checkpoint_ || ckpt->step >= engine_checkpoint_->step) engine_checkpoint_ = *ckpt;
    } else if (auto* summary = std::get_if<parity::v1::RunSummary>(&event)) {
      absl::MutexLock lock(&mu_);
      summary_ = *summary;
    } else if (auto* rendezvous = std::get_if<EngineRendezvous>(&event)) {
      // Never logged: the token is the gang's secret.
      if (gang_ != nullptr && gang_->hosts_rank0()) gang_->SetRendezvous(std::move(*rendezvous));
    } else if (auto* error = std::get_if<EngineError>(&event)) {
      spdlog::warn("run {}: engine error {}: {}", run_.run_id(), error->code, error->message);
      absl::MutexLock lock(&mu_);
      engine_error_ = *error;
    } else {
      spdlog::debug("run {}: engine line ignored ({}): {}", run_.run_id(),
                    std::get<EngineIgnored>(event).reason, line.substr(0, 200));
    }
  };
  // Ends at end of file, which comes once every process holding the pipe has exited (the group's
  // stragglers are killed when the engine is reaped). A process that left the group could hold it
  // open forever, so stop waiting 5 s after the engine was reaped.
  int idle_after_exit = 0;
  for (;;) {
    LineReader::Result r = reader.ReadSome(absl::Milliseconds(500), on_line);
    if (r == LineReader::Result::kEof) break;
    if (r == LineReader::Result::kTimeout && engine_reaped_.load() && ++idle_after_exit >= 10) {
      spdlog::warn("run {}: engine output still open after exit; a process escaped its group",
                   run_.run_id());
      break;
    }
  }
}

std::optional<EngineCheckpoint> RunSupervisor::NewestCheckpoint() {
  std::optional<EngineCheckpoint> found;
  {
    absl::MutexLock lock(&mu_);
    found = engine_checkpoint_;
  }
  if (std::optional<EngineCheckpoint> on_disk = LatestCheckpointIn(checkpoint_dir_);
      on_disk && (!found || on_disk->step > found->step)) {
    found = on_disk;
  }
  return found;
}

std::optional<parity::v1::Checkpoint> RunSupervisor::NewCheckpoint(bool require_points_stored) {
  // Only rank 0 writes a gang's checkpoints, and only its worker records them.
  if (gang_ != nullptr && !gang_->hosts_rank0()) return std::nullopt;
  std::optional<EngineCheckpoint> found;
  if (require_points_stored) {
    // The newest checkpoint whose points were all read from the engine and stored: the newest
    // one may be past points still on their way, an older one of this lease is not.
    uint64_t limit = latest_step_.load();
    if (const std::optional<uint64_t> waiting = buffer_.OldestPendingStep()) {
      limit = std::min(limit, *waiting - 1);
    }
    if (limit <= reported_checkpoint_step_) return std::nullopt;
    found = NewestCheckpointAtOrBefore(checkpoint_dir_, limit);
  } else {
    found = NewestCheckpoint();
  }
  if (!found || found->step <= reported_checkpoint_step_) return std::nullopt;
  parity::v1::Checkpoint c;
  c.set_step(found->step);
  c.set_uri(found->path);
  *c.mutable_create_time() = ToProtoTime(absl::Now());
  last_checkpoint_ = c;
  return c;
}

absl::Status RunSupervisor::SendHeartbeat(bool* cancel_requested) {
  parity::v1::HeartbeatRequest req;
  req.set_worker_id(options_.worker_id);
  req.set_run_id(run_.run_id());
  req.set_lease_epoch(lease_.lease_epoch());
  req.set_lease_secret(lease_secret_);
  req.set_step(latest_step_.load());
  // A checkpoint counts only once its points are stored. Send those points now rather than with
  // the next batch: the engine keeps only its newest few checkpoints, and in a fast run they
  // would all be pruned before a batch that lags them by up to max_delay had gone out.
  if (const std::optional<uint64_t> waiting = buffer_.OldestPendingStep();
      waiting && *waiting <= NewestCheckpoint().value_or(EngineCheckpoint{}).step) {
    (void)FlushMetrics(/*force=*/true);  // a failure leaves the points to the metrics path
  }
  std::optional<parity::v1::Checkpoint> ckpt = NewCheckpoint(/*require_points_stored=*/true);
  std::optional<parity::v1::Checkpoint> reported;
  if (ckpt) {
    ckpt->set_uri(KeepForResume(ckpt->uri()));
    last_checkpoint_ = *ckpt;
    reported = Reported(*ckpt);
    if (reported) *req.mutable_checkpoint() = *reported;
  }
  absl::StatusOr<parity::v1::HeartbeatResponse> resp = client_.Heartbeat(req);
  if (options_.worker_metrics != nullptr) options_.worker_metrics->HeartbeatSent(resp.ok());
  if (!resp.ok() || (ckpt && !reported)) {
    if (ckpt && ckpt->uri() != kept_for_resume_) RemoveKept(ckpt->uri());  // made anew next time
    if (!resp.ok()) return resp.status();
    ckpt.reset();
  }
  if (ckpt) {
    reported_checkpoint_step_ = ckpt->step();
    if (!kept_for_resume_.empty() && kept_for_resume_ != ckpt->uri()) RemoveKept(kept_for_resume_);
    kept_for_resume_ = ckpt->uri();
  }
  last_heartbeat_accepted_ = absl::Now();
  if (resp->has_ttl()) lease_ttl_ = FromProtoDuration(resp->ttl());
  *cancel_requested = resp->cancel_requested();
  return absl::OkStatus();
}

absl::Status RunSupervisor::FlushMetrics(bool force) {
  if (buffer_.size() == 0 || (!force && !buffer_.FlushDue(absl::Now()))) return absl::OkStatus();
  parity::v1::ReportMetricsRequest req;
  req.set_run_id(run_.run_id());
  req.set_lease_epoch(lease_.lease_epoch());
  req.set_lease_secret(lease_secret_);
  for (parity::v1::MetricPoint& p : buffer_.PeekBatch()) *req.add_points() = std::move(p);
  PARITY_RETURN_IF_ERROR(client_.ReportMetrics(req).status());
  buffer_.Acknowledge(static_cast<size_t>(req.points_size()));
  if (options_.worker_metrics != nullptr) {
    options_.worker_metrics->PointsForwarded(req.points_size());
  }
  return absl::OkStatus();
}

RunSupervisor::ChildEnd RunSupervisor::SuperviseChild(ChildProcess& child) {
  ChildEnd end;
  absl::Time now = absl::Now();
  absl::Time next_heartbeat = now;  // at once: marks the run RUNNING
  absl::Time next_metrics = now;
  std::optional<absl::Time> kill_at;  // SIGKILL the group then, unless it ended after SIGTERM
  const auto terminate = [&](absl::Time at) {
    (void)child.SignalGroup(SIGTERM);
    if (gang_ != nullptr) gang_->SignalOthers(SIGTERM);
    if (!kill_at) kill_at = at + options_.kill_grace;
  };
  const auto lose_lease = [&](const absl::Status& why) {
    spdlog::warn("run {}: lease lost ({}); killing the engine", run_.run_id(), why.ToString());
    (void)child.SignalGroup(SIGKILL);
    if (gang_ != nullptr) gang_->KillOthers();
    end.killed_by_us = true;
    end.lease_lost = true;
  };
  // Progress liveness: the last step seen, when it was first seen, and the longest gap so far.
  uint64_t seen_step = 0;
  int advances = 0;  // how many times the step moved
  absl::Time last_progress = now;
  absl::Duration longest_gap = absl::ZeroDuration();
  for (;;) {
    if (std::optional<ExitStatus> exit = child.TryWait()) {
      if (!end.failed_rank) end.exit = *exit;
      if (gang_ != nullptr && exit->success()) gang_->ReapOthers(options_.kill_grace);
      if (gang_ != nullptr) gang_->KillOthers();
      return end;
    }
    now = absl::Now();
    if (gang_ != nullptr && !end.lease_lost) {
      PollGang(child, end, now);
      if (end.lease_lost) continue;  // reap the primary
    }
    if (const uint64_t step = latest_step_.load(); step > seen_step) {
      if (advances > 0) longest_gap = std::max(longest_gap, now - last_progress);
      seen_step = step;
      last_progress = now;
      ++advances;
    }
    // Until a gap between two steps has been seen, nothing says how long one takes (a large model
    // can need minutes per logging interval): the start-up allowance holds until then.
    const absl::Duration allowed = advances < 2
                                       ? options_.startup_timeout
                                       : std::max(options_.progress_timeout, 4 * longest_gap);
    // A follower's ranks print no steps (rank 0's worker watches the gang's progress; a stalled
    // peer ends every rank through --collective-timeout).
    const bool watches_progress = gang_ == nullptr || gang_->hosts_rank0();
    if (watches_progress && !end.hung && !kill_at && !end.preempted && !end.cancelled &&
        !end.lease_lost && !end.failed_rank && now - last_progress > allowed) {
      spdlog::warn("run {}: no training progress for {} (last step {}); killing the engine",
                   run_.run_id(), absl::FormatDuration(now - last_progress), seen_step);
      (void)child.SignalGroup(SIGKILL);
      end.killed_by_us = true;
      end.hung = true;
      hung_detail_ = absl::StrCat(
          "no training progress for ", absl::FormatDuration(now - last_progress), " (last step ",
          seen_step, ", allowed ", absl::FormatDuration(allowed), "); killed by the worker");
    }
    if (!end.preempted && PreemptRequested()) {
      spdlog::info("run {}: worker stopping, SIGTERM to the engine", run_.run_id());
      end.preempted = true;
      terminate(now);
    }
    if (kill_at && now >= *kill_at) {
      spdlog::warn("run {}: engine still running {} after SIGTERM, SIGKILL", run_.run_id(),
                   absl::FormatDuration(options_.kill_grace));
      (void)child.SignalGroup(SIGKILL);
      if (gang_ != nullptr) gang_->SignalOthers(SIGKILL);
      end.killed_by_us = true;
      kill_at.reset();
    }
    const bool talking = !end.lease_lost && !end.cancelled;
    if (talking && now >= next_heartbeat) {
      bool cancel = false;
      absl::Status s = SendHeartbeat(&cancel);
      if (s.ok()) {
        heartbeat_backoff_.Reset();
        next_heartbeat = now + options_.heartbeat_interval;
        if (cancel) {
          spdlog::info("run {}: cancelled, SIGTERM to the engine", run_.run_id());
          end.cancelled = true;
          terminate(now);
        }
      } else if (LeaseGone(s)) {
        lose_lease(s);
      } else {
        next_heartbeat =
            now + std::min(heartbeat_backoff_.NextDelay(), options_.heartbeat_interval);
        spdlog::warn("run {}: heartbeat failed ({}), retrying", run_.run_id(), s.ToString());
      }
    }
    if (!end.lease_lost && !end.cancelled && now >= next_metrics) {
      absl::Status s = FlushMetrics(/*force=*/false);
      if (s.ok()) {
        metrics_backoff_.Reset();
      } else if (LeaseGone(s)) {
        lose_lease(s);
      } else {
        next_metrics = now + metrics_backoff_.NextDelay();
        spdlog::warn("run {}: metrics not delivered ({}), {} waiting", run_.run_id(), s.ToString(),
                     buffer_.size());
      }
    }
    // No word from the scheduler for a whole TTL: keep training. An outage is no reason to
    // throw work away; the scheduler extends live leases when it is back, and says so when the
    // run went elsewhere (FAILED_PRECONDITION), which is the only thing that stops the engine.
    if (!warned_unreachable_ && now - last_heartbeat_accepted_ > lease_ttl_) {
      spdlog::warn("run {}: no heartbeat accepted for {}; training on, {} points buffered",
                   run_.run_id(), absl::FormatDuration(now - last_heartbeat_accepted_),
                   buffer_.size());
      warned_unreachable_ = true;
    } else if (now - last_heartbeat_accepted_ <= lease_ttl_) {
      warned_unreachable_ = false;
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
}

RunOutcome RunSupervisor::Finish(const ExitStatus& exit, const ChildEnd& end) {
  parity::v1::CompleteRunRequest req;
  req.set_run_id(run_.run_id());
  req.set_lease_epoch(lease_.lease_epoch());
  req.set_lease_secret(lease_secret_);
  std::optional<parity::v1::RunSummary> summary;
  std::optional<EngineError> engine_error;
  {
    absl::MutexLock lock(&mu_);
    summary = summary_;
    engine_error = engine_error_;
  }
  bool success = false;
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
    parity::v1::FailureClass cls = ClassifyEngineExit(exit, end.killed_by_us);
    if (end.preempted) cls = parity::v1::FAILURE_CLASS_PREEMPTED;
    if (end.hung) cls = parity::v1::FAILURE_CLASS_HUNG;
    if (!invalid.empty()) cls = parity::v1::FAILURE_CLASS_INVALID_RESULT;
    parity::v1::RunFailure* f = req.mutable_failure();
    f->set_failure_class(cls);
    f->mutable_status()->set_code(RpcCodeFor(cls));
    std::string msg = end.failed_rank ? absl::StrCat("engine of gang rank ", *end.failed_rank, " ",
                                                     exit.ToString())
                                      : absl::StrCat("engine ", exit.ToString());
    if (!end.failed_detail.empty()) absl::StrAppend(&msg, ": ", end.failed_detail);
    if (end.hung) absl::StrAppend(&msg, ": ", hung_detail_);
    if (!invalid.empty()) absl::StrAppend(&msg, ": invalid result: ", invalid);
    // What the engine said, as every viewer of the run may read it: without this worker's paths
    // and file sizes (the worker's log and engine.log keep it all).
    if (engine_error) absl::StrAppend(&msg, ": ", engine_error->code, ": ", engine_error->message);
    const std::string log = end.failed_rank ? RankLog(*end.failed_rank) : work_dir_ + "/engine.log";
    if (std::string tail = Tail(log, 1500); !tail.empty())
      absl::StrAppend(&msg, "; log tail:\n", tail);
    f->mutable_status()->set_message(ForViewers(msg));
  }
  // CompleteRun goes only after every point is stored, so the newest checkpoint counts.
  NewCheckpoint(/*require_points_stored=*/false);
  if (last_checkpoint_) {
    if (std::optional<parity::v1::Checkpoint> reported = Reported(*last_checkpoint_)) {
      *req.mutable_checkpoint() = *reported;
    }
  }

  const absl::Time deadline =
      absl::Now() + (end.preempted ? options_.preempt_report_timeout : options_.report_timeout);
  absl::Time next_heartbeat = absl::Now() + options_.heartbeat_interval;
  core::Backoff backoff(options_.backoff);
  while (absl::Now() < deadline) {
    absl::Status s = FlushMetrics(/*force=*/true);
    if (s.ok() && buffer_.size() == 0) {
      absl::StatusOr<parity::v1::CompleteRunResponse> resp = client_.CompleteRun(req);
      s = resp.status();
      if (s.ok()) {
        spdlog::info(
            "run {}: completed ({}), run is now {}", run_.run_id(),
            success ? "success" : parity::v1::FailureClass_Name(req.failure().failure_class()),
            parity::v1::RunState_Name(resp->run().state()));
        // What the run needs of this disk's checkpoints now: a finished run only its final
        // one, a requeued run only its resume point.
        if (resp->run().run_id() == run_.run_id() &&
            resp->run().state() != parity::v1::RUN_STATE_UNSPECIFIED) {
          ApplyCheckpointRetention(run_checkpoints_, RetentionOf(resp->run()));
        }
        if (success && resp->run().state() == parity::v1::RUN_STATE_FAILED) {
          spdlog::error("run {}: the scheduler refused the result: {}", run_.run_id(),
                        resp->run().failure().message());
          return RunOutcome::kFailed;
        }
        if (success) return RunOutcome::kSucceeded;
        return end.preempted ? RunOutcome::kPreempted : RunOutcome::kFailed;
      }
    }
    if (s.ok()) continue;  // more metric batches to send
    if (LeaseGone(s)) {
      spdlog::warn("run {}: lease lost while reporting the end ({})", run_.run_id(), s.ToString());
      return RunOutcome::kLeaseLost;
    }
    if (!core::IsRetryable(s)) {
      spdlog::error("run {}: scheduler refused the report: {}", run_.run_id(), s.ToString());
      return RunOutcome::kAbandoned;
    }
    if (absl::Now() >= next_heartbeat) {  // hold the lease while the scheduler is flaky
      bool cancel = false;
      absl::Status h = SendHeartbeat(&cancel);
      if (LeaseGone(h)) return RunOutcome::kLeaseLost;
      next_heartbeat = absl::Now() + options_.heartbeat_interval;
    }
    // At most a heartbeat interval between tries, however long the outage was: the scheduler
    // gives the lease only a grace after it is back, and the backoff has grown to its maximum.
    absl::SleepFor(std::min({backoff.NextDelay(), options_.heartbeat_interval,
                             std::max(absl::ZeroDuration(), deadline - absl::Now())}));
  }
  spdlog::error("run {}: scheduler unreachable for {}; leaving the run to the lease reaper",
                run_.run_id(),
                absl::FormatDuration(end.preempted ? options_.preempt_report_timeout
                                                   : options_.report_timeout));
  return RunOutcome::kAbandoned;
}

void RunSupervisor::Supervise() {
  spdlog::info("run {} ({}): attempt {}, epoch {}, {} threads, GPUs [{}]", run_.run_id(),
               run_.spec().name(), run_.attempt(), lease_.lease_epoch(), grant_.threads,
               absl::StrJoin(grant_.gpu_indices, ","));
  if (options_.worker_metrics != nullptr) {
    options_.worker_metrics->RunStarted(run_.run_id(), run_.spec().name());
  }
  last_heartbeat_accepted_ = absl::Now();  // the lease itself
  const ExitStatus never{.kind = ExitStatus::Kind::kExited, .code = 127};
  std::variant<Prepared, StartFailure> prepared = PrepareFiles();
  if (StartFailure* failed = std::get_if<StartFailure>(&prepared)) {
    ChildEnd not_started;
    not_started.not_started = std::move(*failed);
    SetOutcome(Finish(never, not_started));
    return;
  }
  const std::string spec_path = std::get<Prepared>(prepared).spec_path;
  spec_path_ = spec_path;
  std::string resume_from = std::get<Prepared>(prepared).resume_from;
  ChildEnd end;
  // A gang follower starts its ranks only once every rank has checked in (rank 0 listens).
  std::optional<EngineRendezvous> released;
  if (!AwaitReleaseIfFollower(released)) return;
  for (;;) {
    absl::StatusOr<std::unique_ptr<ChildProcess>> child =
        gang_ == nullptr
            ? StartEngine(spec_path, resume_from)
            : StartEngine(spec_path, gang_->hosts_rank0() ? resume_from : "", gang_->primary_rank(),
                          released.value_or(EngineRendezvous{}));
    if (!child.ok()) {
      spdlog::error("run {}: could not start the engine: {}", run_.run_id(),
                    child.status().ToString());
      ChildEnd not_started;
      not_started.not_started =
          StartFailure{.failure_class = parity::v1::FAILURE_CLASS_INFRASTRUCTURE,
                       .message = ForViewers(absl::StrCat("the worker could not start the engine: ",
                                                          child.status().message()))};
      SetOutcome(Finish(never, not_started));
      return;
    }
    engine_reaped_.store(false);
    std::thread reader([this, fd = (*child)->output_fd()] { ReadOutput(fd); });
    if (released) {
      // A rank that does not start is reported by the first PollGang as failed.
      if (absl::Status s = gang_->StartOthers(*released); !s.ok()) {
        spdlog::error("run {}: could not start a rank: {}", run_.run_id(), s.ToString());
      }
    }
    end = SuperviseChild(**child);
    engine_reaped_.store(true);
    reader.join();
    spdlog::info("run {}: engine {}", run_.run_id(), end.exit.ToString());
    // A corrupt checkpoint to resume from (exit 4 with DATA_LOSS before any step) is no reason to
    // fail the attempt, nor the next one that would read it again: fall back to the newest
    // older checkpoint of the run, and to a fresh start when none is left.
    // Not in a gang: its other ranks met this engine's store, which is gone; the gang restarts.
    if (gang_ != nullptr || resume_from.empty() || !ResumeCheckpointWasCorrupt(end)) break;
    const uint64_t bad_step = CheckpointFileStep(resume_from).value_or(0);
    std::optional<EngineCheckpoint> older =
        bad_step > 0 ? NewestCheckpointAtOrBefore(run_checkpoints_, bad_step - 1) : std::nullopt;
    spdlog::warn("run {}: checkpoint {} is corrupt; resuming from {}", run_.run_id(), resume_from,
                 older ? older->path : "the start");
    resume_from = older ? older->path : "";
    absl::MutexLock lock(&mu_);
    engine_error_.reset();
  }
  RunOutcome outcome;
  if (end.lease_lost) {
    outcome = RunOutcome::kLeaseLost;
  } else if (end.cancelled) {
    outcome = RunOutcome::kCancelled;
  } else if (FollowerSucceeded(end)) {
    outcome = RunOutcome::kSucceeded;
  } else {
    outcome = Finish(end.exit, end);
  }
  spdlog::info("run {}: {}", run_.run_id(), RunOutcomeName(outcome));
  SetOutcome(outcome);
}

bool RunSupervisor::ResumeCheckpointWasCorrupt(const ChildEnd& end) {
  if (end.preempted || end.cancelled || end.lease_lost || end.hung) return false;
  if (end.exit.kind != ExitStatus::Kind::kExited || end.exit.code != 4) return false;
  absl::MutexLock lock(&mu_);
  return engine_error_.has_value() && engine_error_->code == "DATA_LOSS";
}

}  // namespace parity::worker
