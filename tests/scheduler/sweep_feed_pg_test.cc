// The watch feeds' wake-up on PostgreSQL: another replica leases a run over its own connection
// and its PgNotifier publishes the sweep id (as its SweepEventsObserver does), PgListener hears
// NOTIFY parity_sweep_events, and the feed polls at once. The fallback interval is an hour, so
// nothing but the notification can deliver the event within the test's seconds; the lease's own
// transaction sends no NOTIFY.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "server/scheduling/sweep_feed.h"
#include "server/store/postgres/pg_listener.h"
#include "server/store/postgres/pg_notifier.h"
#include "server/store/postgres/postgres_run_store.h"
#include "tests/scheduler/sweep_feed_test.h"
#include "tests/support/postgres_environment.h"

namespace parity::server::testing {
namespace {

TEST(SweepFeedPostgresTest, AnotherReplicasPublishedLeaseWakesTheFeed) {
  PARITY_REQUIRE_POSTGRES();
  const std::string url = parity::testing::PostgresEnvironment::FreshDatabase();
  ASSERT_FALSE(url.empty());
  PostgresRunStore store(PostgresRunStoreOptions{url, 2});
  PostgresRunStore other_replica(PostgresRunStoreOptions{url, 1});
  RealClock clock;
  SweepFeeds feeds(store, store, clock,
                   SweepFeedOptions{.poll_interval = absl::Hours(1),
                                    .min_poll_gap = absl::ZeroDuration(),
                                    .buffer_messages = 1000,
                                    .linger = absl::Seconds(5),
                                    .give_up_after = absl::Seconds(10)});
  absl::Mutex mu;
  std::vector<std::string> payloads;
  PgListener listener(
      url,
      [&](const std::string& sweep_id) {
        {
          absl::MutexLock lock(&mu);
          payloads.push_back(sweep_id);
        }
        feeds.Wake(sweep_id);
      },
      kSweepEventsChannel);
  const absl::Time listening_by = absl::Now() + absl::Seconds(10);
  while (!listener.listening() && absl::Now() < listening_by)
    absl::SleepFor(absl::Milliseconds(10));
  ASSERT_TRUE(listener.listening());

  const CreatedSweep sweep = MakeSweep(store, "pg-feed", 2);
  absl::StatusOr<std::unique_ptr<SweepSubscription>> subscription =
      feeds.Subscribe(sweep.sweep.sweep_id(), /*metrics=*/false, nullptr);
  ASSERT_TRUE(subscription.ok()) << subscription.status();
  absl::StatusOr<SweepSubscription::Batch> first =
      (*subscription)->Next(0, absl::Now() + absl::Seconds(10));  // the poll after the horizon
  ASSERT_TRUE(first.ok()) << first.status();
  uint64_t seen = first->polls;

  PgNotifier other_notifier(url, kSweepEventsChannel);
  const std::string worker = MakeWorker(other_replica);
  const LeasedRun leased = LeaseOne(other_replica, worker);
  {
    // Without the notifier nothing wakes the feed: the lease's transaction notifies nobody.
    absl::StatusOr<SweepSubscription::Batch> quiet =
        (*subscription)->Next(seen, absl::Now() + absl::Milliseconds(300));
    ASSERT_TRUE(quiet.ok()) << quiet.status();
    EXPECT_TRUE(quiet->messages.empty()) << "a lease's transaction woke the feed by itself";
    seen = quiet->polls;
  }
  other_notifier.Publish(sweep.sweep.sweep_id());
  std::vector<std::shared_ptr<const v1::WatchSweepResponse>> got;
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (got.empty() && absl::Now() < deadline) {
    absl::StatusOr<SweepSubscription::Batch> batch = (*subscription)->Next(seen, deadline);
    ASSERT_TRUE(batch.ok()) << batch.status();
    seen = batch->polls;
    got = batch->messages;
  }
  ASSERT_FALSE(got.empty()) << "no poll within 10 s: the published NOTIFY did not wake the feed";
  EXPECT_EQ(got[0]->state_change().run_id(), leased.run.run_id());
  EXPECT_EQ(got[0]->state_change().to_state(), v1::RUN_STATE_LEASED);
  ASSERT_GE(got.size(), 2u);
  EXPECT_EQ(got.back()->sweep().counts().leased(), 1u) << "the sweep's counts follow its events";
  absl::MutexLock lock(&mu);
  EXPECT_NE(std::find(payloads.begin(), payloads.end(), sweep.sweep.sweep_id()), payloads.end())
      << "the payload names the sweep";
}

}  // namespace
}  // namespace parity::server::testing
