// RunSupervisor's watch over a running engine (SuperviseChild): progress liveness, the stop
// ladder (SIGTERM, then SIGKILL after the grace), heartbeats and metric batches, and what losing
// the lease does. One pass every 20 ms until the engine has ended and was reaped.
#include <signal.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"
#include "worker/run_supervisor.h"

namespace parity::worker {

RunSupervisor::ChildEnd RunSupervisor::SuperviseChild(ChildProcess& child) {
  ChildEnd end;
  ChildWatch watch;
  const absl::Time start = absl::Now();
  watch.next_heartbeat = start;  // at once: marks the run RUNNING
  watch.next_metrics = start;
  watch.last_progress = start;
  for (;;) {
    if (std::optional<ExitStatus> exit = child.TryWait()) {
      if (!end.failed_rank) end.exit = *exit;
      if (gang_ != nullptr && exit->success()) gang_->ReapOthers(options_.kill_grace);
      if (gang_ != nullptr) gang_->KillOthers();
      return end;
    }
    const absl::Time now = absl::Now();
    if (gang_ != nullptr && !end.lease_lost) {
      PollGang(child, end, now);
      if (end.lease_lost) continue;  // reap the primary
    }
    WatchProgress(child, end, watch, now);
    if (!end.preempted && PreemptRequested()) {
      spdlog::info("run {}: worker stopping, SIGTERM to the engine", run_.run_id());
      end.preempted = true;
      TerminateChild(child, watch, now);
    }
    if (watch.kill_at && now >= *watch.kill_at) {
      spdlog::warn("run {}: engine still running {} after SIGTERM, SIGKILL", run_.run_id(),
                   absl::FormatDuration(options_.kill_grace));
      (void)child.SignalGroup(SIGKILL);
      if (gang_ != nullptr) gang_->SignalOthers(SIGKILL);
      end.killed_by_us = true;
      watch.kill_at.reset();
    }
    TalkToScheduler(child, end, watch, now);
    absl::SleepFor(absl::Milliseconds(20));
  }
}

void RunSupervisor::TerminateChild(ChildProcess& child, ChildWatch& watch, absl::Time now) {
  (void)child.SignalGroup(SIGTERM);
  if (gang_ != nullptr) gang_->SignalOthers(SIGTERM);
  if (!watch.kill_at) watch.kill_at = now + options_.kill_grace;
}

void RunSupervisor::LoseLease(ChildProcess& child, ChildEnd& end, const absl::Status& why) {
  spdlog::warn("run {}: lease lost ({}); killing the engine", run_.run_id(), why.ToString());
  (void)child.SignalGroup(SIGKILL);
  if (gang_ != nullptr) gang_->KillOthers();
  end.killed_by_us = true;
  end.lease_lost = true;
}

void RunSupervisor::WatchProgress(ChildProcess& child, ChildEnd& end, ChildWatch& watch,
                                  absl::Time now) {
  if (const uint64_t step = latest_step_.load(); step > watch.seen_step) {
    if (watch.advances > 0) {
      watch.longest_gap = std::max(watch.longest_gap, now - watch.last_progress);
    }
    watch.seen_step = step;
    watch.last_progress = now;
    ++watch.advances;
  }
  // Until a gap between two steps has been seen, nothing says how long one takes (a large model
  // can need minutes per logging interval): the start-up allowance holds until then.
  const absl::Duration allowed = watch.advances < 2
                                     ? options_.startup_timeout
                                     : std::max(options_.progress_timeout, 4 * watch.longest_gap);
  // A follower's ranks print no steps (rank 0's worker watches the gang's progress; a stalled
  // peer ends every rank through --collective-timeout).
  const bool watches_progress = gang_ == nullptr || gang_->hosts_rank0();
  const bool stopping = end.hung || watch.kill_at || end.preempted || end.cancelled ||
                        end.lease_lost || end.failed_rank.has_value();
  if (!watches_progress || stopping || now - watch.last_progress <= allowed) return;
  spdlog::warn("run {}: no training progress for {} (last step {}); killing the engine",
               run_.run_id(), absl::FormatDuration(now - watch.last_progress), watch.seen_step);
  (void)child.SignalGroup(SIGKILL);
  end.killed_by_us = true;
  end.hung = true;
  hung_detail_ = absl::StrCat(
      "no training progress for ", absl::FormatDuration(now - watch.last_progress), " (last step ",
      watch.seen_step, ", allowed ", absl::FormatDuration(allowed), "); killed by the worker");
}

void RunSupervisor::TalkToScheduler(ChildProcess& child, ChildEnd& end, ChildWatch& watch,
                                    absl::Time now) {
  if (!end.lease_lost && !end.cancelled && now >= watch.next_heartbeat) {
    bool cancel = false;
    absl::Status s = SendHeartbeat(&cancel);
    if (s.ok()) {
      heartbeat_backoff_.Reset();
      watch.next_heartbeat = now + options_.heartbeat_interval;
      if (cancel) {
        spdlog::info("run {}: cancelled, SIGTERM to the engine", run_.run_id());
        end.cancelled = true;
        TerminateChild(child, watch, now);
      }
    } else if (LeaseRefused(s)) {
      LoseLease(child, end, s);
    } else {
      watch.next_heartbeat =
          now + std::min(heartbeat_backoff_.NextDelay(), options_.heartbeat_interval);
      spdlog::warn("run {}: heartbeat failed ({}), retrying", run_.run_id(), s.ToString());
    }
  }
  if (!end.lease_lost && !end.cancelled && now >= watch.next_metrics) {
    absl::Status s = FlushMetrics(/*force=*/false);
    if (s.ok()) {
      metrics_backoff_.Reset();
    } else if (LeaseRefused(s)) {
      LoseLease(child, end, s);
    } else {
      watch.next_metrics = now + metrics_backoff_.NextDelay();
      spdlog::warn("run {}: metrics not delivered ({}), {} waiting", run_.run_id(), s.ToString(),
                   buffer_.size());
    }
  }
  // No word from the scheduler for a whole TTL: keep training. An outage is no reason to throw
  // work away; the scheduler extends live leases when it is back, and says so when the run went
  // elsewhere (FAILED_PRECONDITION), which is the only thing that stops the engine.
  if (!warned_unreachable_ && now - last_heartbeat_accepted_ > lease_ttl_) {
    spdlog::warn("run {}: no heartbeat accepted for {}; training on, {} points buffered",
                 run_.run_id(), absl::FormatDuration(now - last_heartbeat_accepted_),
                 buffer_.size());
    warned_unreachable_ = true;
  } else if (now - last_heartbeat_accepted_ <= lease_ttl_) {
    warned_unreachable_ = false;
  }
}

}  // namespace parity::worker
