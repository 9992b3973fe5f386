// A run's history as the store keeps it — its events and its metric points — where the
// scheduler's logic tests (scheduler_logic_fixture.h, on the memory store only) rely on the memory
// store to answer as PostgreSQL does: how a reaped lapse is worded, points read back exactly
// whatever order their batches came in, and what telemetry retention leaves of an old sweep's
// events. On the store contract's harness (store_contract_test.h); both contract binaries
// instantiate it beside the others.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "server/store/read_models.h"
#include "tests/scheduler/store_contract_test.h"

namespace parity::server::testing {

template <typename Harness>
class RunHistoryContractTest : public StoreContractTest<Harness> {
 protected:
  ReadModels& reads() { return this->harness_.reads(); }

  std::vector<RunEvent> EventsOf(const std::string& run_id) {
    absl::StatusOr<std::vector<RunEvent>> events = reads().ListRunEvents(run_id, 0, 100);
    EXPECT_TRUE(events.ok()) << events.status();
    return events.ok() ? *events : std::vector<RunEvent>();
  }
};

TYPED_TEST_SUITE_P(RunHistoryContractTest);

// A lapse the outage excuses goes back at the same attempt with the event "lease expired during
// an outage"; one after the outage's charge window is the run's, "lease expired", attempt + 1.
TYPED_TEST_P(RunHistoryContractTest, AReapedLapseSaysWhetherAnOutageExcusedIt) {
  const CreatedSweep sweep = this->Sweep("outage-history", 1);  // max_attempts 2
  const std::string worker = this->Worker();
  this->LeaseOne(worker, absl::Milliseconds(100));
  // An outage: leases lapsing in the next 300 ms are not charged, none reaped before then.
  const ReaperPass outage{.outage = true,
                          .max_silence = absl::Seconds(10),
                          .lease_ttl = absl::Milliseconds(300),
                          .grace = absl::Milliseconds(300)};
  ASSERT_TRUE(this->queue().RecordReaperPass(outage).ok());
  this->harness_.LetTimePass(absl::Milliseconds(400));
  absl::StatusOr<ReapResult> excused = this->queue().ReapExpiredLeases(100);
  ASSERT_TRUE(excused.ok()) << excused.status();
  EXPECT_EQ(excused->outage_requeued, 1);
  std::vector<RunEvent> events = this->EventsOf(sweep.run_ids[0]);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().reason, "lease expired during an outage");
  EXPECT_EQ(events.back().to_state, v1::RUN_STATE_PENDING);
  EXPECT_EQ(events.back().attempt, 1u) << "the attempt was not spent";

  this->LeaseOne(worker, absl::Milliseconds(100));  // lapses after the charge window
  this->harness_.LetTimePass(absl::Milliseconds(200));
  absl::StatusOr<ReapResult> charged = this->queue().ReapExpiredLeases(100);
  ASSERT_TRUE(charged.ok()) << charged.status();
  EXPECT_EQ(charged->requeued, 1);
  events = this->EventsOf(sweep.run_ids[0]);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().reason, "lease expired");
  EXPECT_EQ(events.back().to_state, v1::RUN_STATE_PENDING);
  EXPECT_EQ(events.back().attempt, 2u);
}

// Points come back field for field whatever order their batches had and however they overlap:
// doubles whose shortest text is long, tiny or huge, a negative zero, expert loads, and times to
// the microsecond. The run's progress is its newest step and its newest validation point.
TYPED_TEST_P(RunHistoryContractTest, PointsReadBackExactlyWhateverTheBatchOrder) {
  const CreatedSweep sweep = this->Sweep("exact", 1);
  const LeasedRun leased = this->LeaseOne(this->Worker());
  auto point = [](uint64_t step) {
    v1::MetricPoint p = StoreContractTest<TypeParam>::Point(step);
    if (step % 2 == 0) p.set_val_bpc(1.0 / 3.0 + step);
    p.set_epoch(0.1 * step);
    p.set_grad_norm(1e-300);
    p.set_flops(2.5e300 + step);
    p.set_aux_loss(-0.0);
    v1::ExpertLoadStats* load = p.add_expert_load();
    load->set_layer(1);
    load->set_min_share(0.1);
    load->set_max_share(0.30000000000000004);
    load->add_shares(0.1);
    load->add_shares(0.30000000000000004);
    p.mutable_time()->set_seconds(1'700'000'000 + static_cast<int64_t>(step));
    p.mutable_time()->set_nanos(123'456'000);
    return p;
  };
  auto append = [&](std::vector<uint64_t> steps) {
    std::vector<v1::MetricPoint> points;
    for (uint64_t step : steps) points.push_back(point(step));
    absl::StatusOr<MetricsAppendResult> appended =
        this->queue().AppendMetrics(leased.run.run_id(), leased.lease.lease_epoch(), points);
    EXPECT_TRUE(appended.ok()) << appended.status();
    return appended.ok() ? *appended : MetricsAppendResult();
  };
  EXPECT_EQ(append({4, 5, 6}).accepted, 3u);
  const MetricsAppendResult mixed = append({3, 1, 5, 2});  // out of order, overlapping
  EXPECT_EQ(mixed.accepted, 3u) << "steps 1-3 are new";
  EXPECT_EQ(mixed.duplicates, 1u) << "step 5 was stored by the first batch";
  EXPECT_EQ(append({6, 7}).accepted, 1u) << "increasing, but 6 is stored";

  absl::StatusOr<std::vector<v1::MetricPoint>> stored =
      this->reads().ListMetrics(sweep.run_ids[0], 0, 100);
  ASSERT_TRUE(stored.ok()) << stored.status();
  ASSERT_EQ(stored->size(), 7u);
  for (size_t i = 0; i < stored->size(); ++i) {
    v1::MetricPoint want = point(i + 1);
    want.clear_run_id();
    v1::MetricPoint got = (*stored)[i];
    got.clear_run_id();
    EXPECT_EQ(got.DebugString(), want.DebugString()) << "step " << i + 1;
    EXPECT_TRUE(std::signbit(got.aux_loss())) << "a negative zero stays negative";
  }
  absl::StatusOr<v1::Run> run = this->catalog().GetRun(sweep.run_ids[0]);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->latest_step(), 7u);
  EXPECT_EQ(run->latest_val_bpc(), 1.0 / 3.0 + 6)
      << "the newest validation point stored (step 6; step 7 has none)";
}

// Retention's events half: an old ended sweep's runs keep only their last event; a live sweep's
// history is untouched.
TYPED_TEST_P(RunHistoryContractTest, RetentionCutsAnOldEndedSweepsEventsToEachRunsLast) {
  const CreatedSweep ended = this->Sweep("events-ended", 2);
  const CreatedSweep live = this->Sweep("events-live", 1);
  const std::string worker = this->Worker();
  for (int i = 0; i < 2; ++i) {
    const LeasedRun leased = this->LeaseOne(worker);
    ASSERT_EQ(leased.run.sweep_id(), ended.sweep.sweep_id()) << "the older sweep goes first";
    Completion success;
    success.run_id = leased.run.run_id();
    success.lease_epoch = leased.lease.lease_epoch();
    success.success = core::PlannedSummary(leased.run.spec(), 1.5, 1.5);
    ASSERT_TRUE(this->queue().CompleteRun(success).ok());
  }
  auto to_states = [&](const CreatedSweep& sweep) {
    std::vector<v1::RunState> to;
    for (const std::string& run_id : sweep.run_ids) {
      for (const RunEvent& event : this->EventsOf(run_id)) to.push_back(event.to_state);
    }
    return to;
  };
  ASSERT_EQ(to_states(ended).size(), 6u) << "created, leased, succeeded for each run";
  const std::vector<v1::RunState> live_events = to_states(live);
  this->harness_.LetTimePass(absl::Milliseconds(300));
  RetentionPolicy policy;
  policy.metrics_full = absl::Milliseconds(100);
  policy.events = absl::Milliseconds(100);
  absl::StatusOr<RetentionResult> retained = this->retention().ApplyRetention(policy);
  ASSERT_TRUE(retained.ok()) << retained.status();
  EXPECT_EQ(retained->sweeps_pruned, 1);
  EXPECT_EQ(retained->events_deleted, 4);
  EXPECT_THAT(to_states(ended),
              ::testing::ElementsAre(v1::RUN_STATE_SUCCEEDED, v1::RUN_STATE_SUCCEEDED))
      << "each run keeps how it ended";
  EXPECT_EQ(to_states(live), live_events);
}

REGISTER_TYPED_TEST_SUITE_P(RunHistoryContractTest, AReapedLapseSaysWhetherAnOutageExcusedIt,
                            PointsReadBackExactlyWhateverTheBatchOrder,
                            RetentionCutsAnOldEndedSweepsEventsToEachRunsLast);

}  // namespace parity::server::testing
