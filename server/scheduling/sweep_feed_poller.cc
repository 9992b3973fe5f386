// SweepFeed's poller (sweep_feed_poller.h): the thread's loop, its polls of the store, and what
// a subscriber takes from the buffer.
#include "server/scheduling/sweep_feed_poller.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "server/scheduling/run_states.h"

namespace parity::server {
namespace {

constexpr int kMetricBatch = 1000;
constexpr uint32_t kRunPage = 1000;

// Errors a later poll may not meet: the feed retries these instead of ending its subscribers.
bool IsTransient(const absl::Status& status) {
  return absl::IsUnavailable(status) || absl::IsDeadlineExceeded(status) ||
         absl::IsAborted(status) || absl::IsResourceExhausted(status);
}

FeedMessage EventMessage(const RunEvent& event) {
  auto message = std::make_shared<v1::WatchSweepResponse>();
  *message->mutable_state_change() = StateChangeOf(event);
  return message;
}

}  // namespace

void SweepFeed::Loop() {
  while (true) {
    bool metrics = false;
    const Step step = Wait(metrics);
    if (step == Step::kStop) return;
    std::vector<FeedMessage> out;
    absl::Status status = step == Step::kHorizon ? ReadHorizon()
                          : step == Step::kSeed  ? Seed()
                                                 : Poll(metrics, out);
    absl::MutexLock lock(&mu_);
    const absl::Time now = clock_.Now();
    if (!status.ok()) {
      if (!failing_since_) failing_since_ = now;
      if (!IsTransient(status) || now - *failing_since_ >= options_.give_up_after) {
        failed_ = status;  // every subscriber ends with it; the next Subscribe starts anew
        NotifySubscribers();
        return;
      }
      retry_at_ = now + options_.poll_interval;  // whatever the step was, not sooner
      continue;
    }
    failing_since_.reset();
    switch (step) {
      case Step::kHorizon:
        ready_ = true;
        break;
      case Step::kSeed:
        metrics_ready_ = true;
        break;
      default:
        for (FeedMessage& message : out) buffer_.push_back(std::move(message));
        ++polls_;
        last_poll_ = now;
        next_poll_ = now + options_.poll_interval;
        Trim();
        NotifySubscribers();  // a stream may wait for a poll with nothing new (its sweep ended)
    }
  }
}

SweepFeed::Step SweepFeed::Wait(bool& metrics) {
  absl::MutexLock lock(&mu_);
  while (true) {
    if (stopping_) return Step::kStop;
    const absl::Time now = clock_.Now();
    if (subscribers_.empty() && now >= idle_since_ + options_.linger) {
      ended_ = true;
      return Step::kStop;
    }
    metrics = metric_subscribers_ > 0;
    if (!metrics) {
      // Its cursors go stale from here: the next metric subscriber waits for a new seed.
      metrics_ready_ = false;
      seeded_ = false;
      states_.clear();
      next_step_.clear();
    }
    if (now < retry_at_) {  // after a transient error
      auto stop = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; };
      clock_.AwaitWithDeadline(mu_, absl::Condition(&stop), retry_at_);
      continue;
    }
    if (!ready_) return Step::kHorizon;
    if (metrics && !seeded_) return Step::kSeed;
    if (metrics && !metrics_ready_) metrics_ready_ = true;  // a metric subscriber came back
    const absl::Time due =
        wake_ ? std::min(next_poll_, last_poll_ + options_.min_poll_gap) : next_poll_;
    if (now >= due) {
      wake_ = false;
      return Step::kPoll;
    }
    // Woken early by a Wake(), a new subscriber or Stop(); else at `due` (or the linger's end).
    const bool woken = wake_;
    const size_t subscribers = subscribers_.size();
    auto changed = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return stopping_ || wake_ != woken || subscribers_.size() != subscribers ||
             (metric_subscribers_ > 0 && !metrics_ready_);
    };
    absl::Time until = due;
    if (subscribers_.empty()) until = std::min(until, idle_since_ + options_.linger);
    clock_.AwaitWithDeadline(mu_, absl::Condition(&changed), until);
  }
}

absl::Status SweepFeed::ReadHorizon() {
  PARITY_ASSIGN_OR_RETURN(SweepEventPage page, reads_.ListSweepEvents(sweep_id_, 0));
  horizon_ = page.next_horizon;
  return absl::OkStatus();
}

absl::Status SweepFeed::Seed() {
  std::map<std::string, v1::RunState> states;
  std::map<std::string, uint64_t> next_step;
  PageRequest page{kRunPage, ""};
  do {  // a page per call: no connection is held for the whole listing
    PARITY_ASSIGN_OR_RETURN(Page<RunStateRow> runs, reads_.ListRunStates(sweep_id_, page));
    for (const RunStateRow& run : runs.items) {
      states[run.run_id] = run.state;
      next_step[run.run_id] = run.latest_step + 1;
    }
    page.page_token = runs.next_page_token;
  } while (!page.page_token.empty());
  states_ = std::move(states);
  next_step_ = std::move(next_step);
  seeded_ = true;
  return absl::OkStatus();
}

absl::Status SweepFeed::Poll(bool metrics, std::vector<FeedMessage>& out) {
  PARITY_ASSIGN_OR_RETURN(SweepEventPage page, reads_.ListSweepEvents(sweep_id_, horizon_));
  // The poller's state moves only once the whole poll worked: a failed one is read again.
  std::map<std::string, v1::RunState> states = metrics ? states_ : decltype(states_)();
  std::set<std::string> just_ended;
  for (const RunEvent& event : page.events) {
    if (metrics) states[event.run_id] = event.to_state;
    if (IsFinalRunState(event.to_state)) just_ended.insert(event.run_id);
    out.push_back(EventMessage(event));
  }
  std::map<std::string, uint64_t> next_step;
  if (metrics) {
    for (const auto& [run_id, state] : states) {
      if (!IsLiveRunState(state) && !just_ended.contains(run_id)) continue;
      uint64_t& next = next_step[run_id];
      next = next_step_[run_id];
      PARITY_ASSIGN_OR_RETURN(std::vector<v1::MetricPoint> points,
                              reads_.ListMetrics(run_id, next, kMetricBatch));
      for (v1::MetricPoint& point : points) {
        next = point.step() + 1;
        auto message = std::make_shared<v1::WatchSweepResponse>();
        *message->mutable_metric() = std::move(point);
        out.push_back(std::move(message));
      }
    }
  }
  if (!page.events.empty()) {  // the counts moved: once per poll, however many subscribers
    PARITY_ASSIGN_OR_RETURN(v1::Sweep sweep, catalog_.GetSweep(sweep_id_));
    auto message = std::make_shared<v1::WatchSweepResponse>();
    *message->mutable_sweep() = std::move(sweep);
    out.push_back(std::move(message));
  }
  horizon_ = page.next_horizon;
  if (metrics) {
    states_ = std::move(states);
    for (auto& [run_id, next] : next_step) next_step_[run_id] = next;
  }
  return absl::OkStatus();
}

absl::StatusOr<SweepSubscription::Batch> SweepFeed::TakeBatch(Subscriber& me, size_t max) {
  if (me.cursor < first_seq_) {
    return absl::UnavailableError(absl::StrCat(
        "this watch fell more than ", options_.buffer_messages,
        " messages behind its sweep's feed (a slow client); reconnect for a fresh snapshot"));
  }
  SweepSubscription::Batch batch;
  batch.polls = polls_;
  while (me.cursor < end_seq() && batch.messages.size() < max) {
    batch.messages.push_back(buffer_[me.cursor - first_seq_]);
    ++me.cursor;
  }
  Trim();
  if (!batch.messages.empty()) return batch;
  if (!failed_.ok()) return failed_;
  if (stopping_) return absl::UnavailableError("the server is stopping; reconnect");
  return batch;
}

void SweepFeed::Trim() {
  uint64_t keep_from = end_seq();
  for (const auto& [id, subscriber] : subscribers_) {
    keep_from = std::min(keep_from, subscriber.cursor);
  }
  while (first_seq_ < keep_from && !buffer_.empty()) {
    buffer_.pop_front();
    ++first_seq_;
  }
  // The laggards' cursors fall below first_seq_: their next read ends them (UNAVAILABLE).
  while (buffer_.size() > options_.buffer_messages) {
    buffer_.pop_front();
    ++first_seq_;
  }
}

}  // namespace parity::server
