// Outages are not the runs' fault (issue #25): the reaper's liveness record
// (RunQueue::RecordReaperPass) and what ReapExpiredLeases does with it, on the store contract's
// harness (store_contract_test.h); both contract binaries instantiate it beside the others.
#pragma once

#include <string>

#include "tests/scheduler/store_contract_test.h"

namespace parity::server::testing {

template <typename Harness>
class OutageContractTest : public StoreContractTest<Harness> {
 protected:
  // The windows of these tests: an outage is a silence of over 300 ms; after one, leases that
  // lapse within 300 ms spend no attempt and nothing is reaped for 800 ms.
  static ReaperPass Pass(bool outage = false) {
    return {.outage = outage,
            .max_silence = absl::Milliseconds(300),
            .lease_ttl = absl::Milliseconds(300),
            .grace = absl::Milliseconds(800)};
  }
  ServiceLiveness Record(bool outage = false) {
    absl::StatusOr<ServiceLiveness> liveness = this->queue().RecordReaperPass(Pass(outage));
    EXPECT_TRUE(liveness.ok()) << liveness.status();
    return liveness.ok() ? *liveness : ServiceLiveness();
  }
  ReapResult Reap() {
    absl::StatusOr<ReapResult> reaped = this->queue().ReapExpiredLeases(100);
    EXPECT_TRUE(reaped.ok()) << reaped.status();
    return reaped.ok() ? *reaped : ReapResult();
  }
  v1::Run Run(const LeasedRun& leased) {
    absl::StatusOr<v1::Run> run = this->catalog().GetRun(leased.run.run_id());
    EXPECT_TRUE(run.ok()) << run.status();
    return run.ok() ? *run : v1::Run();
  }
  void Renew(const std::string& worker, const LeasedRun& leased, absl::Duration ttl) {
    HeartbeatUpdate update{worker, leased.run.run_id(), leased.lease.lease_epoch(),
                           1,      std::nullopt,        ttl};
    absl::StatusOr<HeartbeatResult> beat = this->queue().Heartbeat(update);
    EXPECT_TRUE(beat.ok()) << beat.status();
  }
};

TYPED_TEST_SUITE_P(OutageContractTest);

TYPED_TEST_P(OutageContractTest, ALeaseLapsingWhileTheServiceIsUpSpendsAnAttempt) {
  this->Sweep("up", 1);  // max_attempts 2
  const std::string worker = this->Worker();
  EXPECT_FALSE(this->Record().outage) << "the first pass ever is no outage unless told";
  const LeasedRun leased = this->LeaseOne(worker, absl::Milliseconds(100));
  for (int pass = 0; pass < 4; ++pass) {  // passes every 100 ms: no silence
    this->harness_.LetTimePass(absl::Milliseconds(100));
    EXPECT_FALSE(this->Record().outage) << "pass " << pass;
  }
  const ReapResult reaped = this->Reap();
  EXPECT_EQ(reaped.requeued, 1) << "a lease lapsed with the service up the whole time";
  EXPECT_EQ(reaped.outage_requeued, 0);
  const v1::Run run = this->Run(leased);
  EXPECT_EQ(run.state(), v1::RUN_STATE_PENDING);
  EXPECT_EQ(run.attempt(), 2u) << "the lapse spent an attempt";
  EXPECT_EQ(run.failure().message(), "lease expired without a heartbeat");
}

TYPED_TEST_P(OutageContractTest, ALeaseLapsingAcrossASilenceIsRequeuedWithoutSpendingAnAttempt) {
  this->Sweep("gap", 1);  // max_attempts 2
  const std::string worker = this->Worker();
  this->Record();
  // First a lapse with the service up: attempt 2 is the run's last.
  this->LeaseOne(worker, absl::Milliseconds(50));
  this->harness_.LetTimePass(absl::Milliseconds(100));
  EXPECT_FALSE(this->Record().outage);
  ASSERT_EQ(this->Reap().requeued, 1);

  const LeasedRun last = this->LeaseOne(worker, absl::Milliseconds(100));
  ASSERT_EQ(last.run.attempt(), 2u);
  this->harness_.LetTimePass(absl::Milliseconds(500));  // no pass: the reaper was away
  const ServiceLiveness liveness = this->Record();
  EXPECT_TRUE(liveness.outage) << "a silence of 500 ms is an outage";
  EXPECT_GT(liveness.reap_from, liveness.up_since);
  ReapResult reaped = this->Reap();
  EXPECT_EQ(reaped.requeued + reaped.failed + reaped.outage_requeued, 0)
      << "nothing is reaped before the holders could reconnect";
  EXPECT_EQ(this->Run(last).state(), v1::RUN_STATE_LEASED);

  for (int pass = 0; pass < 9; ++pass) {  // the reaper is back; the grace runs out
    this->harness_.LetTimePass(absl::Milliseconds(100));
    EXPECT_FALSE(this->Record().outage) << "pass " << pass;
  }
  reaped = this->Reap();
  EXPECT_EQ(reaped.outage_requeued, 1);
  EXPECT_EQ(reaped.failed, 0) << "the last attempt's lapse was the outage's, not the run's";
  const v1::Run run = this->Run(last);
  EXPECT_EQ(run.state(), v1::RUN_STATE_PENDING);
  EXPECT_EQ(run.attempt(), 2u) << "no attempt spent";
  EXPECT_EQ(run.failure_class(), v1::FAILURE_CLASS_LEASE_EXPIRED);
  EXPECT_EQ(run.failure().message(), kOutageLapseMessage);
}

// A start (or a failed pass) is an outage the record cannot show; the caller says so.
TYPED_TEST_P(OutageContractTest, AfterAStartHoldersGetAGraceAndOnlyLapsesAfterItAreCharged) {
  this->Sweep("start", 3);
  const std::string worker = this->Worker();
  const LeasedRun reconnects = this->LeaseOne(worker, absl::Milliseconds(100));
  const LeasedRun gone = this->LeaseOne(worker, absl::Milliseconds(100));
  this->harness_.LetTimePass(absl::Milliseconds(200));  // both lapsed while it was down
  EXPECT_TRUE(this->Record(/*outage=*/true).outage) << "a start is an outage";
  ReapResult reaped = this->Reap();
  EXPECT_EQ(reaped.requeued + reaped.failed + reaped.outage_requeued, 0) << "within the grace";
  this->Renew(worker, reconnects, absl::Seconds(30));  // its worker reconnects in time
  // Leased after the start: a lapse of a lease renewed after the outage is the run's own.
  const LeasedRun later = this->LeaseOne(worker, absl::Milliseconds(400));
  for (int pass = 0; pass < 10; ++pass) {
    this->harness_.LetTimePass(absl::Milliseconds(100));
    EXPECT_FALSE(this->Record().outage) << "pass " << pass;
  }
  reaped = this->Reap();
  EXPECT_EQ(reaped.outage_requeued, 1) << "the lease no one renewed after the start";
  EXPECT_EQ(reaped.requeued, 1) << "the lease granted and lapsed after the start";
  EXPECT_EQ(this->Run(reconnects).state(), v1::RUN_STATE_RUNNING);
  EXPECT_EQ(this->Run(gone).state(), v1::RUN_STATE_PENDING);
  EXPECT_EQ(this->Run(gone).attempt(), 1u);
  EXPECT_EQ(this->Run(later).state(), v1::RUN_STATE_PENDING);
  EXPECT_EQ(this->Run(later).attempt(), 2u);
}

REGISTER_TYPED_TEST_SUITE_P(OutageContractTest, ALeaseLapsingWhileTheServiceIsUpSpendsAnAttempt,
                            ALeaseLapsingAcrossASilenceIsRequeuedWithoutSpendingAnAttempt,
                            AfterAStartHoldersGetAGraceAndOnlyLapsesAfterItAreCharged);

}  // namespace parity::server::testing
