// SweepFeed: one watched sweep's poller and the buffer its streams read (the registry and the
// subscriptions that hand it out are in sweep_feed.h). Internal to the scheduling room.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/scheduling/sweep_feed.h"

namespace parity::server {

using FeedMessage = std::shared_ptr<const v1::WatchSweepResponse>;

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
    subscribers_[id] =
        Subscriber{.cursor = end_seq(), .metrics = metrics, .signal = std::make_shared<Signal>()};
    if (metrics) ++metric_subscribers_;
    if (metrics && !metrics_ready_) wake_ = true;  // its cursors are needed now
    return id;
  }

  // A page read at or after `polls` completed polls, or null (SweepSubscription::SnapshotPage).
  std::shared_ptr<const Page<RunStateRow>> CachedPage(const std::string& token, uint64_t polls)
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
                std::shared_ptr<const Page<RunStateRow>> page) ABSL_LOCKS_EXCLUDED(mu_) {
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
  absl::Status Poll(bool metrics, std::vector<FeedMessage>& out);
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
  std::map<std::string, std::pair<uint64_t, std::shared_ptr<const Page<RunStateRow>>>> pages_
      ABSL_GUARDED_BY(mu_);
  std::deque<FeedMessage> buffer_ ABSL_GUARDED_BY(mu_);
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

}  // namespace parity::server
