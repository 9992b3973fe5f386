// SweepFeeds (server/scheduling/sweep_feed.h) and the WatchSweep streams over them, on the
// memory store with a fake clock: many subscribers share one poller (counted store calls), a
// slow one is cut with UNAVAILABLE, events and metric points reach every subscriber in order
// with no gap and no duplicate, and a wake-up (the NOTIFY of PostgreSQL, the memory store's
// event listener) delivers without waiting for the fallback interval.
#include "server/scheduling/sweep_feed.h"

#include <atomic>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/scheduling/sweeps_service.h"
#include "server/store/memory/memory_run_store.h"
#include "tests/scheduler/sweep_feed_test.h"

namespace parity::server::testing {
namespace {

constexpr absl::Duration kInterval = absl::Milliseconds(200);
constexpr absl::Duration kForever = absl::Hours(24 * 365);

class SweepFeedTest : public ::testing::Test {
 protected:
  SweepFeedTest() : store_([this] { return clock_.Now(); }), counting_(store_, store_) {}

  // Feeds over the counting store; wakes from the store's event listener when `wired`.
  std::unique_ptr<SweepFeeds> Feeds(SweepFeedOptions options, bool wired = true) {
    auto feeds = std::make_unique<SweepFeeds>(counting_, counting_, clock_, options);
    if (wired) {
      store_.SetEventListener([feeds = feeds.get()](const std::string& id) { feeds->Wake(id); });
    }
    return feeds;
  }
  static SweepFeedOptions Options() {
    return {.poll_interval = kInterval,
            .min_poll_gap = absl::ZeroDuration(),
            .buffer_messages = 1000,
            .linger = absl::Seconds(5),
            .give_up_after = absl::Seconds(10)};
  }
  std::unique_ptr<SweepSubscription> Subscribe(SweepFeeds& feeds, const std::string& sweep_id,
                                               bool metrics) {
    absl::StatusOr<std::unique_ptr<SweepSubscription>> subscription =
        feeds.Subscribe(sweep_id, metrics, nullptr);
    EXPECT_TRUE(subscription.ok()) << subscription.status();
    return subscription.ok() ? std::move(*subscription) : nullptr;
  }
  // Everything after the subscriber's cursor once a poll after `seen` (>= 1 new) completed.
  std::vector<std::shared_ptr<const v1::WatchSweepResponse>> Drain(SweepSubscription& s,
                                                                   uint64_t& seen) {
    absl::StatusOr<SweepSubscription::Batch> batch = s.Next(seen, clock_.Now() + kForever);
    EXPECT_TRUE(batch.ok()) << batch.status();
    if (!batch.ok()) return {};
    seen = batch->polls;
    return batch->messages;
  }

  FakeClock clock_;
  MemoryRunStore store_;
  CountingStore counting_;
};

TEST_F(SweepFeedTest, SubscribersOfOneSweepShareOnePoller) {
  std::unique_ptr<SweepFeeds> feeds = Feeds(Options());
  const CreatedSweep sweep = MakeSweep(store_, "shared", 20);
  const std::string worker = MakeWorker(store_);
  constexpr int kSubscribers = 50;
  std::vector<std::unique_ptr<SweepSubscription>> subscribers;
  std::vector<uint64_t> seen(kSubscribers, 0);
  for (int i = 0; i < kSubscribers; ++i) {
    subscribers.push_back(Subscribe(*feeds, sweep.sweep.sweep_id(), /*metrics=*/false));
  }
  EXPECT_EQ(feeds->running_feeds(), 1u);
  for (int lease = 0; lease < 5; ++lease) {
    const LeasedRun leased = LeaseOne(store_, worker);  // wakes the feed (the store's listener)
    for (int i = 0; i < kSubscribers; ++i) {
      std::vector<std::shared_ptr<const v1::WatchSweepResponse>> got;
      while (got.empty() || !got.back()->has_sweep()) {
        for (auto& message : Drain(*subscribers[i], seen[i])) got.push_back(message);
      }
      ASSERT_EQ(got.size(), 2u) << "the lease's event, then the sweep with its counts";
      EXPECT_EQ(got[0]->state_change().run_id(), leased.run.run_id());
      EXPECT_EQ(got[1]->sweep().counts().leased(), static_cast<uint32_t>(lease + 1));
    }
  }
  // One horizon read and at most a poll per wake-up (the first poll after the horizon, five
  // leases) whatever the number of subscribers; each stream polling alone would make 50 times
  // as many. The sweep is read once per poll that found events.
  EXPECT_LE(counting_.list_sweep_events.load(), 1 + 1 + 5);
  EXPECT_EQ(counting_.get_sweep.load(), 5);
  EXPECT_EQ(counting_.list_metrics.load(), 0) << "nobody asked for metrics";
}

TEST_F(SweepFeedTest, AWakeDeliversBeforeTheFallbackInterval) {
  SweepFeedOptions options = Options();
  options.poll_interval = absl::Hours(1);  // the clock never gets there: only a wake-up can
  std::unique_ptr<SweepFeeds> feeds = Feeds(options);
  const CreatedSweep sweep = MakeSweep(store_, "woken", 2);
  const std::string worker = MakeWorker(store_);
  std::unique_ptr<SweepSubscription> subscriber =
      Subscribe(*feeds, sweep.sweep.sweep_id(), /*metrics=*/false);
  uint64_t seen = 0;
  std::future<std::vector<std::shared_ptr<const v1::WatchSweepResponse>>> got =
      std::async(std::launch::async, [&] {
        std::vector<std::shared_ptr<const v1::WatchSweepResponse>> messages;
        while (messages.empty()) messages = Drain(*subscriber, seen);
        return messages;
      });
  const LeasedRun leased = LeaseOne(store_, worker);
  ASSERT_EQ(got.wait_for(std::chrono::seconds(10)), std::future_status::ready)
      << "the event was not delivered without the clock moving: the wake-up was lost";
  const auto messages = got.get();
  ASSERT_FALSE(messages.empty());
  EXPECT_EQ(messages[0]->state_change().run_id(), leased.run.run_id());
  EXPECT_EQ(messages[0]->state_change().to_state(), v1::RUN_STATE_LEASED);
}

TEST_F(SweepFeedTest, WithoutAWakeThePollWaitsForTheInterval) {
  std::unique_ptr<SweepFeeds> feeds = Feeds(Options(), /*wired=*/false);
  const CreatedSweep sweep = MakeSweep(store_, "unwired", 2);
  const std::string worker = MakeWorker(store_);
  std::unique_ptr<SweepSubscription> subscriber =
      Subscribe(*feeds, sweep.sweep.sweep_id(), /*metrics=*/false);
  uint64_t seen = 0;
  Drain(*subscriber, seen);  // the poll right after the horizon: nothing yet
  LeaseOne(store_, worker);
  absl::StatusOr<SweepSubscription::Batch> early = subscriber->Next(seen, clock_.Now());
  ASSERT_TRUE(early.ok()) << early.status();
  EXPECT_TRUE(early->messages.empty()) << "nothing woke the feed and no time passed";
  clock_.Advance(kInterval);  // the fallback poll
  std::vector<std::shared_ptr<const v1::WatchSweepResponse>> messages;
  while (messages.empty()) messages = Drain(*subscriber, seen);
  EXPECT_EQ(messages[0]->state_change().to_state(), v1::RUN_STATE_LEASED);
}

TEST_F(SweepFeedTest, ASlowSubscriberIsCutWithUnavailableAndTheOthersGoOn) {
  SweepFeedOptions options = Options();
  options.buffer_messages = 8;
  std::unique_ptr<SweepFeeds> feeds = Feeds(options);
  const CreatedSweep sweep = MakeSweep(store_, "slow", 10);
  const std::string worker = MakeWorker(store_);
  std::unique_ptr<SweepSubscription> fast = Subscribe(*feeds, sweep.sweep.sweep_id(), false);
  std::unique_ptr<SweepSubscription> slow = Subscribe(*feeds, sweep.sweep.sweep_id(), false);
  uint64_t seen = 0;
  int events = 0;
  for (int lease = 0; lease < 6; ++lease) {  // two messages a poll: 12 > 8 unread by `slow`
    LeaseOne(store_, worker);
    bool swept = false;
    while (!swept) {
      for (auto& message : Drain(*fast, seen)) {
        events += message->has_state_change() ? 1 : 0;
        swept = swept || message->has_sweep();
      }
    }
  }
  EXPECT_EQ(events, 6) << "the subscriber that keeps up gets every event";
  absl::StatusOr<SweepSubscription::Batch> cut = slow->Next(0, clock_.Now());
  EXPECT_EQ(cut.status().code(), absl::StatusCode::kUnavailable) << cut.status();
  EXPECT_THAT(cut.status().message(), ::testing::HasSubstr("reconnect"));
}

TEST_F(SweepFeedTest, AFeedEndsAfterItsLingerAndANewOneStartsOnTheNextSubscriber) {
  std::unique_ptr<SweepFeeds> feeds = Feeds(Options());
  const CreatedSweep sweep = MakeSweep(store_, "linger", 2);
  Subscribe(*feeds, sweep.sweep.sweep_id(), false).reset();  // joins and leaves
  EXPECT_EQ(feeds->running_feeds(), 1u) << "kept warm for a reconnect";
  for (int i = 0; i < 100 && feeds->running_feeds() > 0; ++i) {
    clock_.Advance(absl::Seconds(1));
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(feeds->running_feeds(), 0u) << "idle past its linger";
  const int before = counting_.list_sweep_events.load();
  std::unique_ptr<SweepSubscription> again = Subscribe(*feeds, sweep.sweep.sweep_id(), false);
  EXPECT_EQ(feeds->running_feeds(), 1u);
  EXPECT_GT(counting_.list_sweep_events.load(), before) << "a new feed reads a new horizon";
}

TEST_F(SweepFeedTest, StreamsOpeningTogetherShareSnapshotPagesReadAfterTheyJoined) {
  std::unique_ptr<SweepFeeds> feeds = Feeds(Options());
  const CreatedSweep sweep = MakeSweep(store_, "snapshots", 5);
  const std::string worker = MakeWorker(store_);
  const PageRequest first_page{2, ""};
  std::vector<std::unique_ptr<SweepSubscription>> opening;
  uint64_t seen = 0;
  for (int i = 0; i < 10; ++i) {
    opening.push_back(Subscribe(*feeds, sweep.sweep.sweep_id(), false));
    if (i == 0) Drain(*opening[0], seen);  // the poll after the horizon, before the others join
  }
  for (auto& subscriber : opening) {
    absl::StatusOr<std::shared_ptr<const Page<RunStateRow>>> page =
        subscriber->SnapshotPage(first_page);
    ASSERT_TRUE(page.ok()) << page.status();
    EXPECT_EQ((*page)->items.size(), 2u);
  }
  EXPECT_EQ(counting_.list_runs.load(), 1) << "ten streams that joined before the read share it";

  // A stream that joins after a poll (here a lease's) may not use a page read before that poll:
  // the poll's events are behind its cursor, and the page would not show them.
  LeaseOne(store_, worker);
  Drain(*opening[0], seen);
  std::unique_ptr<SweepSubscription> late = Subscribe(*feeds, sweep.sweep.sweep_id(), false);
  absl::StatusOr<std::shared_ptr<const Page<RunStateRow>>> page = late->SnapshotPage(first_page);
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_EQ(counting_.list_runs.load(), 2) << "read again, after the poll";
  EXPECT_EQ((*page)->items[0].state, v1::RUN_STATE_LEASED) << "and it shows the lease";
}

// A WatchSweep stream run on a thread of its own, keeping what it was sent.
struct Stream {
  Stream(SweepsService& sweeps, const std::string& sweep_id, bool metrics) {
    thread = std::thread([this, &sweeps, sweep_id, metrics] {
      v1::WatchSweepRequest request;
      request.set_sweep_id(sweep_id);
      request.set_include_metrics(metrics);
      status = sweeps.WatchSweep(request, WatchControl{[this] { return stop.load(); }},
                                 [this](const v1::WatchSweepResponse& message) {
                                   absl::MutexLock lock(&mu);
                                   got.push_back(message);
                                   return true;
                                 });
      done = true;
    });
  }
  ~Stream() {
    stop = true;
    thread.join();
  }
  size_t received() {
    absl::MutexLock lock(&mu);
    return got.size();
  }
  // After the opening snapshot: "run:from>to" per state change, and each run's metric steps.
  std::vector<std::string> Changes() {
    absl::MutexLock lock(&mu);
    std::vector<std::string> changes;
    for (const v1::WatchSweepResponse& m : got) {
      if (m.has_state_change() && m.state_change().reason() != "current state") {
        changes.push_back(absl::StrCat(m.state_change().run_id(), ":",
                                       m.state_change().from_state(), ">",
                                       m.state_change().to_state()));
      }
    }
    return changes;
  }
  std::map<std::string, std::vector<uint64_t>> Steps() {
    absl::MutexLock lock(&mu);
    std::map<std::string, std::vector<uint64_t>> steps;
    for (const v1::WatchSweepResponse& m : got) {
      if (m.has_metric()) steps[m.metric().run_id()].push_back(m.metric().step());
    }
    return steps;
  }

  absl::Mutex mu;
  std::vector<v1::WatchSweepResponse> got ABSL_GUARDED_BY(mu);
  absl::Status status;
  std::atomic<bool> done{false};
  std::atomic<bool> stop{false};
  std::thread thread;  // last: starts once the members above exist
};

std::vector<uint64_t> Steps(uint64_t first, uint64_t last) {
  std::vector<uint64_t> steps;
  for (uint64_t step = first; step <= last; ++step) steps.push_back(step);
  return steps;
}

TEST_F(SweepFeedTest, WatchStreamsGetEveryChangeAndPointInOrderOnceAndEndWithTheSweep) {
  SchedulerOptions options;
  options.watch_poll_interval = kInterval;
  WorkSignal signal;
  SweepsService sweeps(
      counting_, counting_, signal, clock_,
      [](const v1::SweepSpec&) -> absl::StatusOr<std::vector<v1::RunSpec>> {
        return std::vector<v1::RunSpec>();
      },
      options);
  store_.SetEventListener([&sweeps](const std::string& id) { sweeps.WakeWatchers(id); });
  const CreatedSweep sweep = MakeSweep(store_, "streams", 3);
  const std::string& id = sweep.sweep.sweep_id();
  const std::string worker = MakeWorker(store_);
  int advances = 0;
  auto pump_until = [&](const std::function<bool()>& done) {  // time passes, polls happen
    for (int i = 0; i < 3000 && !done(); ++i) {
      ++advances;
      clock_.Advance(kInterval);
      absl::SleepFor(absl::Milliseconds(2));
    }
    ASSERT_TRUE(done());
  };
  std::vector<std::unique_ptr<Stream>> streams;
  for (int i = 0; i < 4; ++i) streams.push_back(std::make_unique<Stream>(sweeps, id, true));
  streams.push_back(std::make_unique<Stream>(sweeps, id, /*metrics=*/false));
  pump_until([&] {
    for (auto& stream : streams) {
      if (stream->received() < 1 + 3) return false;  // the sweep, then its three runs
    }
    return true;
  });

  const LeasedRun first = LeaseOne(store_, worker);
  AppendPoints(store_, first, 1, 5);
  pump_until([&] { return streams[0]->Steps()[first.run.run_id()].size() == 5; });
  // A stream that starts now has seen steps 1-5 in its snapshot (latest_step): it gets 6 on.
  streams.push_back(std::make_unique<Stream>(sweeps, id, /*metrics=*/true));
  pump_until([&] { return streams.back()->received() >= 1 + 3; });
  AppendPoints(store_, first, 6, 10);
  const LeasedRun second = LeaseOne(store_, worker);
  AppendPoints(store_, second, 1, 3);
  ASSERT_TRUE(store_.CancelSweep(id, "enough").ok());
  for (const LeasedRun* run : {&first, &second}) {  // the live runs end at their heartbeat
    HeartbeatUpdate beat{.worker_id = worker,
                         .run_id = run->run.run_id(),
                         .lease_epoch = run->lease.lease_epoch(),
                         .step = 1,
                         .checkpoint = std::nullopt,
                         .ttl = absl::Seconds(600)};
    absl::StatusOr<HeartbeatResult> result = store_.Heartbeat(beat);
    ASSERT_TRUE(result.ok()) << result.status();
  }
  pump_until([&] {
    for (auto& stream : streams) {
      if (!stream->done) return false;
    }
    return true;
  });

  const std::vector<std::string> changes = streams[0]->Changes();
  EXPECT_THAT(changes, ::testing::Contains(absl::StrCat(second.run.run_id(), ":1>2")));
  EXPECT_EQ(changes.size(), 2u + 3u) << "two leases, three cancellations";
  for (size_t i = 0; i < streams.size(); ++i) {
    SCOPED_TRACE(absl::StrCat("stream ", i));
    EXPECT_TRUE(streams[i]->status.ok()) << streams[i]->status;
    if (i < 5) {
      EXPECT_EQ(streams[i]->Changes(), changes) << "the same changes, in one order";
    }
    std::map<std::string, std::vector<uint64_t>> steps = streams[i]->Steps();
    if (i == 4) {
      EXPECT_TRUE(steps.empty()) << "it did not ask for metrics";
      continue;
    }
    EXPECT_EQ(steps[first.run.run_id()], i < 4 ? Steps(1, 10) : Steps(6, 10));
    EXPECT_EQ(steps[second.run.run_id()], Steps(1, 3));
  }
  // Six streams, one poller: its calls grow with the polls (a horizon, one per interval, one per
  // wake-up: five events were stored while streams watched, one per stream's first look), not
  // with the streams (each polling alone would make six per interval).
  const int polls_at_most = 1 + advances + 5 + static_cast<int>(streams.size());
  EXPECT_LT(counting_.get_sweep.load(), static_cast<int>(streams.size()) + 10)
      << "once per stream's snapshot, then once per poll that found events";
  EXPECT_LE(counting_.list_sweep_events.load(), polls_at_most) << advances << " intervals";
  store_.SetEventListener(nullptr);
}

}  // namespace
}  // namespace parity::server::testing
