// The scheduling logic's fixture: a MemoryRunStore and the scheduling units wired the way
// SchedulerServer wires them (SchedulerUnderTest), all on one FakeClock. No PostgreSQL and no
// sleeping: leases lapse, retries come due, workers age and watch streams poll only when a test
// moves the clock. That the memory store answers as PostgreSQL does is the store contract's job
// (store_contract_test.h and its sibling suites run on both); PostgreSQL's own behaviour is
// tested in scheduler_test and migrations_test.
#pragma once

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/scheduling/clock.h"
#include "server/store/memory/memory_run_store.h"
#include "tests/scheduler/scheduler_calls.h"

namespace parity::server::testing {

class SchedulerLogicTest : public ::testing::Test, protected SchedulerCalls {
 protected:
  // How often RunReaper() passes: under the outage silence (lease_ttl / 3 = 10 s), as the
  // server's --reap-interval must be.
  static constexpr absl::Duration kReapEvery = absl::Seconds(5);

  void SetUp() override {
    options_ = FastSchedulerOptions();
    Rewire(&StubPlanner);
    // A first reaper pass: it records the reaper's liveness with no outage (a test that wants
    // the server's start-up grace passes Upkeep::ReapPass::kStartUp), so the tests' passes
    // return what expired, charged.
    ASSERT_TRUE(scheduler_->ReapExpiredLeases().ok());
  }

  SchedulerUnderTest& under_test() override { return *scheduler_; }

  // Replaces the scheduler with one built from options_ and `planner`, over the same store.
  void Rewire(Planner planner) {
    StopScheduler();
    // With the gang queue, as the server wires it: every logic test runs the gang checks too.
    scheduler_ = std::make_unique<SchedulerUnderTest>(store_, signal_, clock_, std::move(planner),
                                                      options_, nullptr, &store_);
    // As the server's PgListener does: the store's event inserts wake the watch feeds.
    store_.SetEventListener(
        [scheduler = scheduler_.get()](const std::string& id) { scheduler->WakeWatchers(id); });
  }
  // The scheduler goes away (an outage); the store stays.
  void StopScheduler() {
    store_.SetEventListener(nullptr);
    scheduler_.reset();
  }
  void TearDown() override { store_.SetEventListener(nullptr); }

  // Lets `duration` pass as the server would: a reaper pass by `upkeep` every kReapEvery (so no
  // pass sees a silence), each after `between` (a holder's heartbeat, say) if given. Returns
  // what the passes reaped in all, with the last pass's liveness.
  ReapResult RunReaper(Upkeep& upkeep, absl::Duration duration,
                       const std::function<void()>& between = nullptr) {
    ReapResult total;
    for (absl::Duration passed; passed < duration; passed += kReapEvery) {
      clock_.Advance(std::min(kReapEvery, duration - passed));
      if (between) between();
      absl::StatusOr<ReapResult> pass = upkeep.ReapExpiredLeases();
      EXPECT_TRUE(pass.ok()) << pass.status();
      if (!pass.ok()) break;
      EXPECT_FALSE(pass->liveness.outage) << "a pass every " << kReapEvery << " is no outage";
      total.requeued += pass->requeued;
      total.failed += pass->failed;
      total.cancelled += pass->cancelled;
      total.outage_requeued += pass->outage_requeued;
      total.liveness = pass->liveness;
    }
    return total;
  }
  // Lets the fixture's leases lapse with the service up: a TTL and a reaper pass go by.
  ReapResult LetLeasesLapse() { return RunReaper(*scheduler_, options_.lease_ttl + kReapEvery); }

  // Lets the clock run by `step` (with a real pause for the feed's threads) until `done` holds;
  // a zero step only waits. Fails the test after 10 s of real time.
  void PumpClockUntil(const std::function<bool()>& done,
                      absl::Duration step = absl::Milliseconds(20)) {
    const absl::Time give_up = absl::Now() + absl::Seconds(10);
    while (!done() && absl::Now() < give_up) {
      clock_.Advance(step);
      absl::SleepFor(absl::Milliseconds(2));
    }
    ASSERT_TRUE(done()) << "not done after 10 s of real time";
  }

  // Every run of `sweep_id`, in grid order, as the store has it now.
  std::vector<v1::Run> RunsOf(const std::string& sweep_id) {
    PageRequest page;
    page.page_size = 1000;
    absl::StatusOr<Page<v1::Run>> runs = store_.ListRuns(sweep_id, {}, page);
    EXPECT_TRUE(runs.ok()) << runs.status();
    return runs.ok() ? runs->items : std::vector<v1::Run>();
  }
  // The run as the store has it, serialized: equal before and after means nothing changed.
  std::string RowOf(const std::string& run_id) {
    absl::StatusOr<v1::Run> run = store_.GetRun(run_id);
    EXPECT_TRUE(run.ok()) << run.status();
    return run.ok() ? run->DebugString() : "";
  }
  // Every event of the run, oldest first (the events table's rows of it).
  std::vector<RunEvent> EventsOf(const std::string& run_id) {
    absl::StatusOr<std::vector<RunEvent>> events = store_.ListRunEvents(run_id, 0, 1000);
    EXPECT_TRUE(events.ok()) << events.status();
    return events.ok() ? *events : std::vector<RunEvent>();
  }
  // How many metric points the run has stored.
  size_t PointsOf(const std::string& run_id) {
    absl::StatusOr<std::vector<v1::MetricPoint>> points = store_.ListMetrics(run_id, 0, 100000);
    EXPECT_TRUE(points.ok()) << points.status();
    return points.ok() ? points->size() : 0;
  }

  FakeClock clock_;
  MemoryRunStore store_{[this] { return clock_.Now(); }};
  WorkSignal signal_;
  SchedulerOptions options_;
  std::unique_ptr<SchedulerUnderTest> scheduler_;
};

}  // namespace parity::server::testing
