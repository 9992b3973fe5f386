// SweepsService::WatchSweep and WatchRun, the watch streams. They poll the store every
// watch_poll_interval: events (state changes) by event id, metric points by step. Polling keeps
// replicas stateless (any replica serves any stream) at the cost of ≤ one interval of latency.
#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "core/proto_time.h"
#include "core/status_macros.h"
#include "server/scheduling/request_validation.h"
#include "server/scheduling/sweeps_service.h"

namespace parity::server {
namespace {

constexpr int kEventBatch = 1000;
constexpr int kMetricBatch = 1000;

bool IsFinal(v1::RunState state) {
  return state == v1::RUN_STATE_SUCCEEDED || state == v1::RUN_STATE_FAILED ||
         state == v1::RUN_STATE_CANCELLED;
}

v1::RunStateChange ChangeOf(const RunEvent& event) {
  v1::RunStateChange change;
  change.set_run_id(event.run_id);
  change.set_from_state(event.from_state);
  change.set_to_state(event.to_state);
  change.set_attempt(event.attempt);
  change.set_reason(event.reason);
  *change.mutable_time() = ToProtoTime(event.time);
  return change;
}

v1::RunStateChange SnapshotOf(const v1::Run& run) {
  v1::RunStateChange change;
  change.set_run_id(run.run_id());
  change.set_to_state(run.state());
  change.set_attempt(run.attempt());
  change.set_reason("current state");
  return change;
}

// Sleeps one poll interval on `clock` in short slices so a cancelled stream ends promptly (the
// cancellation is polled: it is gRPC's state, not a condition on a mutex of ours).
bool SleepUnlessCancelled(const Clock& clock, const WatchControl& control,
                          absl::Duration interval) {
  static constexpr bool kNever = false;
  absl::Mutex mu;
  absl::MutexLock lock(&mu);
  const absl::Time until = clock.Now() + interval;
  for (absl::Time now = clock.Now(); now < until; now = clock.Now()) {
    if (control.cancelled && control.cancelled()) return false;
    clock.AwaitWithDeadline(mu, absl::Condition(&kNever),
                            std::min(until, now + absl::Milliseconds(50)));
  }
  return !(control.cancelled && control.cancelled());
}

// The id of the newest event already stored, so a stream starts with what happens next.
template <typename List>
absl::StatusOr<int64_t> LatestEventId(List list) {
  int64_t last = 0;
  while (true) {
    PARITY_ASSIGN_OR_RETURN(std::vector<RunEvent> events, list(last));
    if (!events.empty()) last = events.back().event_id;
    if (static_cast<int>(events.size()) < kEventBatch) return last;
  }
}

// Asks WatchControl::authorized once `every` has passed since the last time (the caller's token
// may have been revoked or expired since the stream began): its error ends the stream.
class Reauthorizer {
 public:
  Reauthorizer(const Clock& clock, const WatchControl& control, absl::Duration every)
      : clock_(clock), control_(control), every_(every), next_(clock.Now() + every) {}
  absl::Status Check() {
    if (!control_.authorized) return absl::OkStatus();
    const absl::Time now = clock_.Now();
    if (now < next_) return absl::OkStatus();
    next_ = now + every_;
    return control_.authorized();
  }

 private:
  const Clock& clock_;
  const WatchControl& control_;
  const absl::Duration every_;
  absl::Time next_;
};

// A stream may not hold its thread and slot for ever: past its lifetime it ends UNAVAILABLE,
// which the CLI and the Python client answer by reconnecting from a fresh snapshot.
absl::Status StreamLifetimeReached(absl::Duration lifetime) {
  return absl::UnavailableError(absl::StrCat("the watch stream reached its lifetime of ",
                                             absl::FormatDuration(lifetime), "; reconnect"));
}

}  // namespace

absl::Status SweepsService::WatchRun(
    const v1::WatchRunRequest& request, const WatchControl& control,
    const std::function<bool(const v1::WatchRunResponse&)>& write) {
  Violations violations;
  violations.RequireUuid("run_id", request.run_id());
  if (absl::Status status = violations.ToStatus("invalid WatchRun request"); !status.ok()) {
    return status;
  }
  const std::string& run_id = request.run_id();
  auto list_events = [&](int64_t after) {
    return reads_.ListRunEvents(run_id, after, kEventBatch);
  };
  PARITY_ASSIGN_OR_RETURN(int64_t last_event, LatestEventId(list_events));
  PARITY_ASSIGN_OR_RETURN(v1::Run run, catalog_.GetRun(run_id));
  v1::WatchRunResponse snapshot;
  *snapshot.mutable_state_change() = SnapshotOf(run);
  if (!write(snapshot)) return absl::CancelledError("the client went away");

  bool ended = IsFinal(run.state());
  uint64_t next_step = request.from_step();
  const absl::Time give_up = clock_.Now() + options_.max_watch_duration;
  Reauthorizer reauthorize(clock_, control, options_.watch_reauth_interval);
  while (true) {
    PARITY_RETURN_IF_ERROR(reauthorize.Check());
    bool progressed = false;
    PARITY_ASSIGN_OR_RETURN(std::vector<v1::MetricPoint> points,
                            reads_.ListMetrics(run_id, next_step, kMetricBatch));
    for (v1::MetricPoint& point : points) {
      next_step = point.step() + 1;
      v1::WatchRunResponse message;
      *message.mutable_metric() = std::move(point);
      if (!write(message)) return absl::CancelledError("the client went away");
      progressed = true;
    }
    PARITY_ASSIGN_OR_RETURN(std::vector<RunEvent> events, list_events(last_event));
    for (const RunEvent& event : events) {
      last_event = event.event_id;
      v1::WatchRunResponse message;
      *message.mutable_state_change() = ChangeOf(event);
      if (!write(message)) return absl::CancelledError("the client went away");
      ended = IsFinal(event.to_state);
      progressed = true;
    }
    // A final state was seen and the points stored before it have been drained.
    if (ended && !progressed) return absl::OkStatus();
    if (clock_.Now() >= give_up) return StreamLifetimeReached(options_.max_watch_duration);
    if (!progressed && !SleepUnlessCancelled(clock_, control, options_.watch_poll_interval)) {
      return absl::CancelledError("the watch was cancelled");
    }
  }
}

absl::Status SweepsService::WatchSweep(
    const v1::WatchSweepRequest& request, const WatchControl& control,
    const std::function<bool(const v1::WatchSweepResponse&)>& write) {
  Violations violations;
  violations.RequireUuid("sweep_id", request.sweep_id());
  if (absl::Status status = violations.ToStatus("invalid WatchSweep request"); !status.ok()) {
    return status;
  }
  const std::string& sweep_id = request.sweep_id();
  PARITY_ASSIGN_OR_RETURN(v1::Sweep sweep, catalog_.GetSweep(sweep_id));
  // Take the commit watermark before the snapshot: a change racing the snapshot may then be
  // streamed twice, never lost.
  PARITY_ASSIGN_OR_RETURN(SweepEventPage start, reads_.ListSweepEvents(sweep_id, 0));
  uint64_t horizon = start.next_horizon;

  // The opening snapshot: the sweep, then every run's current state.
  v1::WatchSweepResponse opening;
  *opening.mutable_sweep() = sweep;
  if (!write(opening)) return absl::CancelledError("the client went away");
  std::map<std::string, v1::RunState> states;
  std::map<std::string, uint64_t> next_step;  // metric cursor of each run
  PageRequest page{1000, ""};
  do {
    PARITY_ASSIGN_OR_RETURN(Page<v1::Run> runs, catalog_.ListRuns(sweep_id, {}, page));
    for (const v1::Run& run : runs.items) {
      states[run.run_id()] = run.state();
      next_step[run.run_id()] = run.latest_step() + 1;
      v1::WatchSweepResponse message;
      *message.mutable_state_change() = SnapshotOf(run);
      if (!write(message)) return absl::CancelledError("the client went away");
    }
    page.page_token = runs.next_page_token;
  } while (!page.page_token.empty());

  auto counts_live = [](const v1::RunCounts& c) { return c.pending() + c.leased() + c.running(); };
  bool ended = counts_live(sweep.counts()) == 0;
  const absl::Time give_up = clock_.Now() + options_.max_watch_duration;
  Reauthorizer reauthorize(clock_, control, options_.watch_reauth_interval);
  while (true) {
    PARITY_RETURN_IF_ERROR(reauthorize.Check());
    bool progressed = false;
    PARITY_ASSIGN_OR_RETURN(SweepEventPage page, reads_.ListSweepEvents(sweep_id, horizon));
    horizon = page.next_horizon;
    const std::vector<RunEvent>* events = &page.events;
    std::vector<std::string> just_ended;
    for (const RunEvent& event : *events) {
      states[event.run_id] = event.to_state;
      if (IsFinal(event.to_state)) just_ended.push_back(event.run_id);
      v1::WatchSweepResponse message;
      *message.mutable_state_change() = ChangeOf(event);
      if (!write(message)) return absl::CancelledError("the client went away");
      progressed = true;
    }
    if (request.include_metrics()) {
      for (auto& [run_id, state] : states) {
        const bool live = state == v1::RUN_STATE_LEASED || state == v1::RUN_STATE_RUNNING;
        if (!live && std::find(just_ended.begin(), just_ended.end(), run_id) == just_ended.end()) {
          continue;
        }
        PARITY_ASSIGN_OR_RETURN(std::vector<v1::MetricPoint> points,
                                reads_.ListMetrics(run_id, next_step[run_id], kMetricBatch));
        for (v1::MetricPoint& point : points) {
          next_step[run_id] = point.step() + 1;
          v1::WatchSweepResponse message;
          *message.mutable_metric() = std::move(point);
          if (!write(message)) return absl::CancelledError("the client went away");
          progressed = true;
        }
      }
    }
    if (!events->empty()) {
      PARITY_ASSIGN_OR_RETURN(v1::Sweep now, catalog_.GetSweep(sweep_id));
      v1::WatchSweepResponse message;
      *message.mutable_sweep() = now;
      if (!write(message)) return absl::CancelledError("the client went away");
      ended = counts_live(now.counts()) == 0;
    }
    if (ended && !progressed) return absl::OkStatus();
    if (clock_.Now() >= give_up) return StreamLifetimeReached(options_.max_watch_duration);
    if (!progressed && !SleepUnlessCancelled(clock_, control, options_.watch_poll_interval)) {
      return absl::CancelledError("the watch was cancelled");
    }
  }
}

}  // namespace parity::server
