// SweepFeed: one sweep's poller and buffer (sweep_feed.h); SweepFeeds: the replica's registry.
#include "server/scheduling/sweep_feed.h"

#include <algorithm>
#include <deque>
#include <optional>
#include <set>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/proto_time.h"
#include "core/status_macros.h"

namespace parity::server {
namespace {

constexpr int kMetricBatch = 1000;
constexpr uint32_t kRunPage = 1000;

using Message = std::shared_ptr<const v1::WatchSweepResponse>;

bool IsFinal(v1::RunState state) {
  return state == v1::RUN_STATE_SUCCEEDED || state == v1::RUN_STATE_FAILED ||
         state == v1::RUN_STATE_CANCELLED;
}

bool IsLive(v1::RunState state) {
  return state == v1::RUN_STATE_LEASED || state == v1::RUN_STATE_RUNNING;
}

// Errors a later poll may not meet: the feed retries these instead of ending its subscribers.
bool IsTransient(const absl::Status& status) {
  return absl::IsUnavailable(status) || absl::IsDeadlineExceeded(status) ||
         absl::IsAborted(status) || absl::IsResourceExhausted(status);
}

Message EventMessage(const RunEvent& event) {
  auto message = std::make_shared<v1::WatchSweepResponse>();
  v1::RunStateChange& change = *message->mutable_state_change();
  change.set_run_id(event.run_id);
  change.set_from_state(event.from_state);
  change.set_to_state(event.to_state);
  change.set_attempt(event.attempt);
  change.set_reason(event.reason);
  *change.mutable_time() = ToProtoTime(event.time);
  return message;
}

}  // namespace

// One sweep's feed. Its thread (Loop) is the only one to touch the poller's state (horizon_,
// states_, next_step_, seeded_); everything subscribers see is under mu_.
class SweepFeed {
 public:
  SweepFeed(std::string sweep_id, SweepCatalog& catalog, ReadModels& reads, const Clock& clock,
            const SweepFeedOptions& options)
      : sweep_id_(std::move(sweep_id)),
        catalog_(catalog),
        reads_(reads),
        clock_(clock),
        options_(options),
        next_poll_(clock.Now()),
        idle_since_(clock.Now()) {}
  ~SweepFeed() { Stop(); }

  void Start() {
    thread_ = std::thread([this] { Loop(); });
  }

  // Ends the thread (after the store call in progress, if any) and joins it. Idempotent.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_) {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
      NotifySubscribers();
    }
    if (thread_.joinable()) thread_.join();
  }

  // A new subscriber, its cursor at the end of the buffer; 0 when this feed has ended (the
  // registry then starts another).
  int64_t Join(bool metrics, uint64_t& polls) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (stopping_ || ended_ || !failed_.ok()) return 0;
    polls = polls_;
    ++snapshotting_;
    const int64_t id = next_id_++;
    subscribers_[id] = Subscriber{
        .cursor = end_seq(), .metrics = metrics, .signal = std::make_shared<Signal>()};
    if (metrics) ++metric_subscribers_;
    if (metrics && !metrics_ready_) wake_ = true;  // its cursors are needed now
    return id;
  }

  // A page read at or after `polls` completed polls, or null (SweepSubscription::SnapshotPage).
  std::shared_ptr<const Page<v1::Run>> CachedPage(const std::string& token, uint64_t polls)
      ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    auto it = pages_.find(token);
    if (it == pages_.end() || it->second.first < polls) return nullptr;
    return it->second.second;
  }
  uint64_t polls() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return polls_;
  }
  void KeepPage(const std::string& token, uint64_t read_at_polls,
                std::shared_ptr<const Page<v1::Run>> page) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (snapshotting_ == 0) return;
    auto& kept = pages_[token];
    if (kept.second == nullptr || kept.first <= read_at_polls) kept = {read_at_polls, page};
  }
  // A subscriber has read its snapshot: the pages go once nobody reads one.
  void SnapshotDone() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (--snapshotting_ == 0) pages_.clear();
  }

  void Leave(int64_t id) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    auto it = subscribers_.find(id);
    if (it == subscribers_.end()) return;
    if (it->second.metrics) --metric_subscribers_;
    subscribers_.erase(it);
    if (subscribers_.empty()) idle_since_ = clock_.Now();
    Trim();
  }

  // Waits until the feed has its horizon (and the subscriber's metric cursors, if it wants
  // metrics).
  absl::Status AwaitReady(int64_t id, const std::function<bool()>& cancelled)
      ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    const bool metrics = subscribers_.at(id).metrics;
    auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return stopping_ || !failed_.ok() || (ready_ && (!metrics || metrics_ready_));
    };
    while (!clock_.AwaitWithDeadline(mu_, absl::Condition(&ready),
                                     clock_.Now() + absl::Milliseconds(50))) {
      if (cancelled && cancelled()) return absl::CancelledError("the watch was cancelled");
    }
    if (!failed_.ok()) return failed_;
    if (stopping_) return absl::UnavailableError("the server is stopping; reconnect");
    return absl::OkStatus();
  }

  // Returns at once what the subscriber has not read, else waits (on its own signal) until a
  // poll publishes something, the feed stops or fails, or `deadline`.
  absl::StatusOr<SweepSubscription::Batch> Next(int64_t id, uint64_t seen_polls,
                                                absl::Time deadline, size_t max)
      ABSL_LOCKS_EXCLUDED(mu_) {
    std::shared_ptr<Signal> signal;
    uint64_t generation = 0;
    {
      absl::MutexLock lock(&mu_);
      Subscriber& me = subscribers_.at(id);
      signal = me.signal;
      {
        // Read under mu_: whatever is published after this unlock bumps the generation.
        absl::MutexLock signal_lock(&signal->mu);
        generation = signal->generation;
      }
      if (stopping_ || !failed_.ok() || me.cursor < end_seq() || polls_ > seen_polls) {
        return TakeBatch(me, max);
      }
    }
    {
      absl::MutexLock signal_lock(&signal->mu);
      auto bumped = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(signal->mu) {
        return signal->generation != generation;
      };
      clock_.AwaitWithDeadline(signal->mu, absl::Condition(&bumped), deadline);
    }
    absl::MutexLock lock(&mu_);
    return TakeBatch(subscribers_.at(id), max);
  }

  void Wake() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    wake_ = true;
  }

  // The thread has ended (failed, or idle past its linger) or is stopping: no use to anyone new.
  bool Ended() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return stopping_ || ended_ || !failed_.ok();
  }
  // Since when it has had no subscriber; nullopt while it has some.
  std::optional<absl::Time> IdleSince() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (!subscribers_.empty()) return std::nullopt;
    return idle_since_;
  }

 private:
  // A subscriber's own wake-up. Its stream sleeps on this rather than on a condition over mu_:
  // with a condition, every unlock of mu_ would evaluate every sleeping stream's (hundreds of
  // streams, thousands of unlocks a second); this way a publication wakes each stream once.
  struct Signal {
    absl::Mutex mu;
    uint64_t generation ABSL_GUARDED_BY(mu) = 0;
  };
  struct Subscriber {
    uint64_t cursor = 0;  // the sequence number of the next message it reads
    bool metrics = false;
    std::shared_ptr<Signal> signal;
  };
  enum class Step { kStop, kHorizon, kSeed, kPoll };

  uint64_t end_seq() const ABSL_SHARED_LOCKS_REQUIRED(mu_) { return first_seq_ + buffer_.size(); }
  // Up to `max` of the subscriber's unread messages; UNAVAILABLE when it fell behind the buffer.
  absl::StatusOr<SweepSubscription::Batch> TakeBatch(Subscriber& me, size_t max)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Wakes every subscriber's stream (after a publication, a failure or Stop).
  void NotifySubscribers() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (auto& [id, subscriber] : subscribers_) {
      absl::MutexLock lock(&subscriber.signal->mu);
      ++subscriber.signal->generation;
    }
  }

  void Loop();
  // Sleeps until the next thing to do is due; kStop when stopping or idle past the linger.
  Step Wait(bool& metrics) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status ReadHorizon();
  absl::Status Seed();
  // One poll; its messages are appended to `out` (published only when the whole poll worked).
  absl::Status Poll(bool metrics, std::vector<Message>& out);
  // Drops what every subscriber has read, and the oldest past buffer_messages.
  void Trim() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string sweep_id_;
  SweepCatalog& catalog_;
  ReadModels& reads_;
  const Clock& clock_;
  const SweepFeedOptions options_;

  // The poller's own (its thread only).
  uint64_t horizon_ = 0;
  bool seeded_ = false;  // states_ and next_step_ hold every run of the sweep
  std::map<std::string, v1::RunState> states_;
  std::map<std::string, uint64_t> next_step_;
  std::optional<absl::Time> failing_since_;  // the first of the transient errors in a row

  absl::Mutex mu_;
  std::map<int64_t, Subscriber> subscribers_ ABSL_GUARDED_BY(mu_);
  int64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  int metric_subscribers_ ABSL_GUARDED_BY(mu_) = 0;
  int snapshotting_ ABSL_GUARDED_BY(mu_) = 0;  // subscribers still reading their snapshot
  // Page token → (completed polls when its read began, the page), while snapshotting_ > 0.
  std::map<std::string, std::pair<uint64_t, std::shared_ptr<const Page<v1::Run>>>> pages_
      ABSL_GUARDED_BY(mu_);
  std::deque<Message> buffer_ ABSL_GUARDED_BY(mu_);
  uint64_t first_seq_ ABSL_GUARDED_BY(mu_) = 0;      // the sequence number of buffer_.front()
  uint64_t polls_ ABSL_GUARDED_BY(mu_) = 0;          // polls completed
  bool ready_ ABSL_GUARDED_BY(mu_) = false;          // horizon_ is set
  bool metrics_ready_ ABSL_GUARDED_BY(mu_) = false;  // seeded_, and metric subscribers wait on it
  bool wake_ ABSL_GUARDED_BY(mu_) = true;            // a poll is asked for
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;  // the thread returned (idle past the linger)
  absl::Status failed_ ABSL_GUARDED_BY(mu_);
  absl::Time next_poll_ ABSL_GUARDED_BY(mu_);  // the fallback poll
  absl::Time last_poll_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  absl::Time retry_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  absl::Time idle_since_ ABSL_GUARDED_BY(mu_);  // meaningful while subscribers_ is empty
  std::thread thread_;
};

void SweepFeed::Loop() {
  while (true) {
    bool metrics = false;
    const Step step = Wait(metrics);
    if (step == Step::kStop) return;
    std::vector<Message> out;
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
        for (Message& message : out) buffer_.push_back(std::move(message));
        ++polls_;
        last_poll_ = now;
        next_poll_ = now + options_.poll_interval;
        Trim();
        // A poll with nothing new wakes nobody: a stream waiting only for a later poll (to end
        // after its sweep did) sees polls_ at its next deadline.
        if (!out.empty()) NotifySubscribers();
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
    PARITY_ASSIGN_OR_RETURN(Page<v1::Run> runs, catalog_.ListRuns(sweep_id_, {}, page));
    for (const v1::Run& run : runs.items) {
      states[run.run_id()] = run.state();
      next_step[run.run_id()] = run.latest_step() + 1;
    }
    page.page_token = runs.next_page_token;
  } while (!page.page_token.empty());
  states_ = std::move(states);
  next_step_ = std::move(next_step);
  seeded_ = true;
  return absl::OkStatus();
}

absl::Status SweepFeed::Poll(bool metrics, std::vector<Message>& out) {
  PARITY_ASSIGN_OR_RETURN(SweepEventPage page, reads_.ListSweepEvents(sweep_id_, horizon_));
  // The poller's state moves only once the whole poll worked: a failed one is read again.
  std::map<std::string, v1::RunState> states = metrics ? states_ : decltype(states_)();
  std::set<std::string> just_ended;
  for (const RunEvent& event : page.events) {
    if (metrics) states[event.run_id] = event.to_state;
    if (IsFinal(event.to_state)) just_ended.insert(event.run_id);
    out.push_back(EventMessage(event));
  }
  std::map<std::string, uint64_t> next_step;
  if (metrics) {
    for (const auto& [run_id, state] : states) {
      if (!IsLive(state) && !just_ended.contains(run_id)) continue;
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

SweepSubscription::SweepSubscription(SweepFeeds& feeds, std::shared_ptr<SweepFeed> feed, int64_t id,
                                     std::string sweep_id, uint64_t joined_at_polls)
    : feeds_(feeds),
      feed_(std::move(feed)),
      id_(id),
      sweep_id_(std::move(sweep_id)),
      joined_at_polls_(joined_at_polls) {}

SweepSubscription::~SweepSubscription() {
  if (snapshotting_) feed_->SnapshotDone();
  feed_->Leave(id_);
  feeds_.Tidy();
}

absl::StatusOr<std::shared_ptr<const Page<v1::Run>>> SweepSubscription::SnapshotPage(
    const PageRequest& page) {
  const std::string key = absl::StrCat(page.page_size, "/", page.page_token);
  if (auto kept = feed_->CachedPage(key, joined_at_polls_)) return kept;
  return feeds_.ReadPage(*feed_, sweep_id_, key, joined_at_polls_, page);
}

absl::StatusOr<SweepSubscription::Batch> SweepSubscription::Next(uint64_t seen_polls,
                                                                 absl::Time deadline, size_t max) {
  return feed_->Next(id_, seen_polls, deadline, max);
}

void SweepSubscription::RequestPoll() {
  if (snapshotting_) feed_->SnapshotDone();
  snapshotting_ = false;
  feed_->Wake();
}

SweepFeeds::SweepFeeds(SweepCatalog& catalog, ReadModels& reads, const Clock& clock,
                       SweepFeedOptions options)
    : catalog_(catalog), reads_(reads), clock_(clock), options_(options) {}

SweepFeeds::~SweepFeeds() {
  std::map<std::string, std::shared_ptr<SweepFeed>> feeds;
  {
    absl::MutexLock lock(&mu_);
    feeds.swap(feeds_);
  }
  for (auto& [id, feed] : feeds) feed->Stop();
}

absl::StatusOr<std::unique_ptr<SweepSubscription>> SweepFeeds::Subscribe(
    const std::string& sweep_id, bool metrics, const std::function<bool()>& cancelled) {
  std::shared_ptr<SweepFeed> feed;
  std::shared_ptr<SweepFeed> ended;
  int64_t id = 0;
  uint64_t joined_at_polls = 0;
  {
    absl::MutexLock lock(&mu_);
    auto it = feeds_.find(sweep_id);
    if (it != feeds_.end()) {
      id = it->second->Join(metrics, joined_at_polls);
      if (id != 0) {
        feed = it->second;
      } else {
        ended = std::move(it->second);
        feeds_.erase(it);
      }
    }
    if (feed == nullptr) {
      feed = std::make_shared<SweepFeed>(sweep_id, catalog_, reads_, clock_, options_);
      id = feed->Join(metrics, joined_at_polls);
      feed->Start();
      feeds_[sweep_id] = feed;
    }
  }
  if (ended != nullptr) ended->Stop();  // joins its (finished) thread, outside the lock
  std::unique_ptr<SweepSubscription> subscription(
      new SweepSubscription(*this, feed, id, sweep_id, joined_at_polls));
  PARITY_RETURN_IF_ERROR(feed->AwaitReady(id, cancelled));
  return subscription;
}

void SweepFeeds::Wake(const std::string& sweep_id) {
  absl::MutexLock lock(&mu_);
  if (sweep_id.empty()) {
    for (auto& [id, feed] : feeds_) feed->Wake();
    return;
  }
  auto it = feeds_.find(sweep_id);
  if (it != feeds_.end()) it->second->Wake();
}

absl::StatusOr<std::shared_ptr<const Page<v1::Run>>> SweepFeeds::ReadPage(
    SweepFeed& feed, const std::string& sweep_id, const std::string& key, uint64_t joined_at_polls,
    const PageRequest& page) {
  {
    absl::MutexLock lock(&snapshot_mu_);
    auto free = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(snapshot_mu_) {
      return snapshot_reads_ < std::max(options_.snapshot_reads, 1);
    };
    snapshot_mu_.Await(absl::Condition(&free));
    ++snapshot_reads_;
  }
  // Another stream may have read it while this one waited its turn.
  std::shared_ptr<const Page<v1::Run>> kept = feed.CachedPage(key, joined_at_polls);
  absl::StatusOr<Page<v1::Run>> runs;
  const uint64_t read_at_polls = feed.polls();
  if (kept == nullptr) runs = catalog_.ListRuns(sweep_id, {}, page);
  {
    absl::MutexLock lock(&snapshot_mu_);
    --snapshot_reads_;
  }
  if (kept != nullptr) return kept;
  if (!runs.ok()) return runs.status();
  auto shared = std::make_shared<const Page<v1::Run>>(*std::move(runs));
  feed.KeepPage(key, read_at_polls, shared);
  return shared;
}

size_t SweepFeeds::running_feeds() const {
  absl::MutexLock lock(&mu_);
  size_t running = 0;
  for (const auto& [id, feed] : feeds_) running += feed->Ended() ? 0 : 1;
  return running;
}

void SweepFeeds::Tidy() {
  std::vector<std::shared_ptr<SweepFeed>> dropped;
  {
    absl::MutexLock lock(&mu_);
    std::vector<std::pair<absl::Time, std::string>> idle;
    for (auto it = feeds_.begin(); it != feeds_.end();) {
      if (it->second->Ended()) {
        dropped.push_back(std::move(it->second));
        it = feeds_.erase(it);
        continue;
      }
      if (std::optional<absl::Time> since = it->second->IdleSince()) {
        idle.emplace_back(*since, it->first);
      }
      ++it;
    }
    // The oldest idle feeds go first (a FakeClock never ends a linger: this bounds the threads).
    std::sort(idle.begin(), idle.end());
    for (size_t i = 0; i + kMaxIdleFeeds < idle.size(); ++i) {
      auto it = feeds_.find(idle[i].second);
      dropped.push_back(std::move(it->second));
      feeds_.erase(it);
    }
  }
  for (auto& feed : dropped) feed->Stop();  // the last reference may be a subscriber's
}

}  // namespace parity::server
