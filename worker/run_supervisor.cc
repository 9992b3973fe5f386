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

parity::v1::Run WithRunId(parity::v1::LeaseRunResponse lease) {
  parity::v1::Run run = std::move(*lease.mutable_run());
  if (run.run_id().empty()) run.set_run_id(lease.lease().run_id());
  return run;
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
