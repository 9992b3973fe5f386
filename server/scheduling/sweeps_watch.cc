// SweepsService::WatchSweep and WatchRun, the watch streams. WatchSweep reads through its sweep's
// feed (sweep_feed.h): one poller per watched sweep per replica reads the new events, metric
// points and counts once and fans them out to every stream of the sweep, woken by any replica's
// run events (NOTIFY parity_sweep_events) or at the latest every watch_poll_interval; each
// stream reads its own opening snapshot (the sweep, then every run's state, a page per store
// call, sent as one message a page to clients that ask for pages) after joining the feed, and ends
// when the sweep has ended and a poll after its last message brought nothing more. WatchRun (one
// run, from a step) still polls the store on its own every watch_poll_interval: events by event id,
// metric points by step. Replicas stay stateless (any replica serves any stream; a feed is only a
// cache of the store's feed).
#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "core/status_macros.h"
#include "server/scheduling/request_validation.h"
#include "server/scheduling/run_states.h"
#include "server/scheduling/sweeps_service.h"

namespace parity::server {
namespace {

constexpr int kEventBatch = 1000;
constexpr int kMetricBatch = 1000;

// A run's state at a stream's start: no from_state.
v1::RunStateChange SnapshotOf(const std::string& run_id, v1::RunState state, uint32_t attempt) {
  v1::RunStateChange change;
  change.set_run_id(run_id);
  change.set_to_state(state);
  change.set_attempt(attempt);
  change.set_reason("current state");
  return change;
}

// One page of the opening snapshot: a single `snapshot` message when the client reads pages (a
// message per run costs the server ~7 µs each, and 200 streams opening on a 10,000-run sweep are
// 2 M of them), else a state_change per run, the page's last one flushed at once either way (the
// next page is a store call away).
bool WriteSnapshotPage(const std::vector<RunStateRow>& runs, bool as_page,
                       const SweepsService::SweepStreamWriter& write) {
  if (as_page) {
    v1::WatchSweepResponse message;
    v1::RunStateSnapshot* page = message.mutable_snapshot();
    page->mutable_runs()->Reserve(static_cast<int>(runs.size()));
    for (const RunStateRow& run : runs) {
      v1::RunStateChange* entry = page->add_runs();
      entry->set_run_id(run.run_id);
      entry->set_to_state(run.state);
      entry->set_attempt(run.attempt);
    }
    return runs.empty() || write(message, false);
  }
  for (size_t i = 0; i < runs.size(); ++i) {
    v1::WatchSweepResponse message;
    *message.mutable_state_change() = SnapshotOf(runs[i].run_id, runs[i].state, runs[i].attempt);
    if (!write(message, i + 1 < runs.size())) return false;
  }
  return true;
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
  *snapshot.mutable_state_change() = SnapshotOf(run.run_id(), run.state(), run.attempt());
  if (!write(snapshot)) return absl::CancelledError("the client went away");

  bool ended = IsFinalRunState(run.state());
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
      *message.mutable_state_change() = StateChangeOf(event);
      if (!write(message)) return absl::CancelledError("the client went away");
      ended = IsFinalRunState(event.to_state);
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

// How often a waiting sweep stream looks whether its client went away (gRPC's synchronous API
// has no notification for it). Hundreds of streams wake this often each; 250 ms keeps a gone
// client's thread for at most that long.
constexpr absl::Duration kCancelCheckEvery = absl::Milliseconds(250);

absl::Status SweepsService::WatchSweep(const v1::WatchSweepRequest& request,
                                       const WatchControl& control,
                                       const SweepStreamWriter& write) {
  Violations violations;
  violations.RequireUuid("sweep_id", request.sweep_id());
  if (absl::Status status = violations.ToStatus("invalid WatchSweep request"); !status.ok()) {
    return status;
  }
  const std::string& sweep_id = request.sweep_id();
  const bool metrics = request.include_metrics();
  // Join the feed before the snapshot: what the feed streams from here on starts at a commit
  // watermark taken before the snapshot, so a change racing it may be streamed twice, never lost.
  PARITY_ASSIGN_OR_RETURN(std::unique_ptr<SweepSubscription> feed,
                          feeds_->Subscribe(sweep_id, metrics, control.cancelled));
  PARITY_ASSIGN_OR_RETURN(v1::Sweep sweep, catalog_.GetSweep(sweep_id));
  uint64_t seen_polls = 0;  // the feed's polls before the snapshot (a batch tells it; 0 is safe)

  // The opening snapshot: the sweep, then every run's current state, a page per store call (no
  // connection is held while a slow client drains it; a few pages at once per replica, shared by
  // the streams that open together).
  v1::WatchSweepResponse opening;
  *opening.mutable_sweep() = sweep;
  if (!write(opening, false)) return absl::CancelledError("the client went away");
  std::map<std::string, uint64_t> next_step;  // each run's metric cursor, with metrics
  PageRequest page{1000, ""};
  do {
    PARITY_ASSIGN_OR_RETURN(std::shared_ptr<const Page<RunStateRow>> runs,
                            feed->SnapshotPage(page));
    if (metrics) {
      for (const RunStateRow& run : runs->items) next_step[run.run_id] = run.latest_step + 1;
    }
    if (!WriteSnapshotPage(runs->items, request.snapshot_pages(), write)) {
      return absl::CancelledError("the client went away");
    }
    page.page_token = runs->next_page_token;
  } while (!page.page_token.empty());

  auto counts_live = [](const v1::RunCounts& c) { return c.pending() + c.leased() + c.running(); };
  bool ended = counts_live(sweep.counts()) == 0;
  // The feed's polls when this stream last got something (or first asked): a later poll with
  // nothing for it, once the sweep has ended, means all that was stored before the end is out.
  std::optional<uint64_t> quiet_from;
  if (control.cancelled && control.cancelled()) {
    return absl::CancelledError("the watch was cancelled");
  }
  feed->RequestPoll();  // as a stream of its own would: the first poll right after the snapshot
  const absl::Time give_up = clock_.Now() + options_.max_watch_duration;
  Reauthorizer reauthorize(clock_, control, options_.watch_reauth_interval);
  while (true) {
    PARITY_RETURN_IF_ERROR(reauthorize.Check());
    if (control.cancelled && control.cancelled()) {
      return absl::CancelledError("the watch was cancelled");
    }
    const absl::Time now = clock_.Now();
    if (now >= give_up) return StreamLifetimeReached(options_.max_watch_duration);
    // Short waits: the cancellation is polled (it is gRPC's state, not a condition of ours).
    PARITY_ASSIGN_OR_RETURN(SweepSubscription::Batch batch,
                            feed->Next(seen_polls, std::min(give_up, now + kCancelCheckEvery)));
    if (!quiet_from.has_value()) quiet_from = batch.polls;
    seen_polls = batch.polls;
    std::vector<const v1::WatchSweepResponse*> out;  // the batch's messages for this stream
    for (const std::shared_ptr<const v1::WatchSweepResponse>& message : batch.messages) {
      if (message->has_metric()) {
        if (!metrics) continue;
        // The feed may hold points this stream's snapshot already passed: each run's cursor.
        auto cursor = next_step.find(message->metric().run_id());
        if (cursor != next_step.end()) {
          if (message->metric().step() < cursor->second) continue;
          cursor->second = message->metric().step() + 1;
        }
      }
      if (message->has_sweep()) ended = counts_live(message->sweep().counts()) == 0;
      out.push_back(message.get());
    }
    for (size_t i = 0; i < out.size(); ++i) {
      if (!write(*out[i], i + 1 < out.size())) return absl::CancelledError("the client went away");
      quiet_from = batch.polls;
    }
    if (ended && batch.polls > *quiet_from) return absl::OkStatus();
  }
}

}  // namespace parity::server
