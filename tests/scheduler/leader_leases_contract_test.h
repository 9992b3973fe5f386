// The LeaderLeases contract (server/store/leader_leases.h) and the fencing of upkeep writes by a
// leader's term, one suite for every store: memory_leader_leases_test.cc runs it on
// MemoryLeaderLeases + MemoryRunStore (fake clock), postgres_leader_leases_test.cc on
// PostgresLeaderLeases + PostgresRunStore over one throwaway database (real time: TTLs of a
// second, and letting time pass is sleeping).
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "google/rpc/error_details.pb.h"
#include "server/store/leader_leases.h"
#include "server/store/run_queue.h"
#include "server/store/sweep_catalog.h"
#include "server/store/telemetry_retention.h"

namespace parity::server::testing {

// A harness provides: void SetUp(); LeaderLeases& leases(); SweepCatalog& catalog();
// RunQueue& queue(); TelemetryRetention& retention(); void LetTimePass(absl::Duration).
template <typename Harness>
class LeaderLeasesContractTest : public ::testing::Test {
 protected:
  static constexpr absl::Duration kTtl = absl::Seconds(1);
  void SetUp() override { harness_.SetUp(); }
  LeaderLeases& leases() { return harness_.leases(); }

  LeaderLease Acquire(const std::string& id, const std::string& name = "upkeep",
                      absl::Duration ttl = kTtl) {
    absl::StatusOr<LeaderLease> lease = leases().AcquireOrRenew(name, id, ttl);
    EXPECT_TRUE(lease.ok()) << lease.status();
    return lease.ok() ? *lease : LeaderLease();
  }

  static std::string ViolationType(const absl::Status& status) {
    google::rpc::PreconditionFailure failure;
    if (auto payload = status.GetPayload("type.googleapis.com/google.rpc.PreconditionFailure")) {
      failure.ParseFromString(std::string(*payload));
    }
    return failure.violations_size() > 0 ? failure.violations(0).type() : "";
  }

  // A one-run sweep leased by a new worker for `ttl`: the run's id.
  std::string LeasedRunId(absl::Duration ttl) {
    NewSweep sweep;
    sweep.spec.set_name("fenced");
    sweep.spec.set_max_attempts(3);
    v1::RunSpec& run = sweep.runs.emplace_back();
    run.set_name("fenced-0");
    run.mutable_resources()->set_cpu_threads(1);
    absl::StatusOr<CreatedSweep> created = harness_.catalog().CreateSweep(sweep);
    EXPECT_TRUE(created.ok()) << created.status();
    WorkerRegistration registration;
    registration.hostname = "fence-host";
    absl::StatusOr<v1::Worker> worker = harness_.queue().RegisterWorker(registration);
    EXPECT_TRUE(worker.ok()) << worker.status();
    LeaseRequest request;
    request.worker_id = worker.ok() ? worker->worker_id() : "";
    request.offer.cpu_threads = 4;
    request.ttl = ttl;
    absl::StatusOr<std::optional<LeasedRun>> leased = harness_.queue().LeaseNextRun(request);
    EXPECT_TRUE(leased.ok() && leased->has_value()) << leased.status();
    return created.ok() ? created->run_ids[0] : "";
  }

  Harness harness_;
};

TYPED_TEST_SUITE_P(LeaderLeasesContractTest);

// A reaper pass that records no outage (RunQueue::RecordReaperPass).
inline const ReaperPass kQuietPass{.outage = false,
                                   .max_silence = absl::Hours(1),
                                   .lease_ttl = absl::Seconds(60),
                                   .grace = absl::Seconds(120)};

TYPED_TEST_P(LeaderLeasesContractTest, FirstCandidateTakesTermOneAndOthersSeeIt) {
  const LeaderLease a = this->Acquire("replica-a");
  EXPECT_TRUE(a.held);
  EXPECT_EQ(a.leader_id, "replica-a");
  EXPECT_EQ(a.epoch, 1);
  EXPECT_GT(a.remaining, absl::Milliseconds(500));
  EXPECT_LE(a.remaining, this->kTtl);
  const LeaderLease b = this->Acquire("replica-b");
  EXPECT_FALSE(b.held);
  EXPECT_EQ(b.leader_id, "replica-a");
  EXPECT_EQ(b.epoch, 1);
  absl::StatusOr<LeaderLease> current = this->leases().Current("upkeep");
  ASSERT_TRUE(current.ok()) << current.status();
  EXPECT_EQ(current->leader_id, "replica-a");
  EXPECT_EQ(current->epoch, 1);
  absl::StatusOr<LeaderLease> never = this->leases().Current("never-held");
  ASSERT_TRUE(never.ok()) << never.status();
  EXPECT_EQ(never->leader_id, "");
  EXPECT_EQ(never->epoch, 0);
}

TYPED_TEST_P(LeaderLeasesContractTest, RenewalKeepsTheTermAndExtendsIt) {
  this->Acquire("replica-a");
  this->harness_.LetTimePass(absl::Milliseconds(600));
  const LeaderLease renewed = this->Acquire("replica-a");
  EXPECT_TRUE(renewed.held);
  EXPECT_EQ(renewed.epoch, 1);
  EXPECT_GT(renewed.remaining, absl::Milliseconds(700));  // a whole TTL again, not 400 ms
  this->harness_.LetTimePass(absl::Milliseconds(600));    // past the first expiry, not the second
  EXPECT_FALSE(this->Acquire("replica-b").held);
}

TYPED_TEST_P(LeaderLeasesContractTest, ExpiredLeaseIsTakenOverInANewTerm) {
  this->Acquire("replica-a");
  this->harness_.LetTimePass(absl::Milliseconds(1200));
  absl::StatusOr<LeaderLease> lapsed = this->leases().Current("upkeep");
  ASSERT_TRUE(lapsed.ok());
  EXPECT_EQ(lapsed->leader_id, "") << "nobody holds an expired lease";
  const LeaderLease b = this->Acquire("replica-b");
  EXPECT_TRUE(b.held);
  EXPECT_EQ(b.epoch, 2);
  const LeaderLease a = this->Acquire("replica-a");  // the old holder comes back too late
  EXPECT_FALSE(a.held);
  EXPECT_EQ(a.leader_id, "replica-b");
  EXPECT_EQ(a.epoch, 2);
}

TYPED_TEST_P(LeaderLeasesContractTest, SameHolderAfterExpiryStartsANewTerm) {
  this->Acquire("replica-a");
  this->harness_.LetTimePass(absl::Milliseconds(1200));
  const LeaderLease again = this->Acquire("replica-a");
  EXPECT_TRUE(again.held);
  EXPECT_EQ(again.epoch, 2) << "a term that ran out is over, even for its holder";
}

TYPED_TEST_P(LeaderLeasesContractTest, ResignEndsTheTermNowAndKeepsTheEpoch) {
  const LeaderLease a = this->Acquire("replica-a", "upkeep", absl::Seconds(30));
  absl::StatusOr<bool> wrong = this->leases().Resign("upkeep", "replica-b", a.epoch);
  ASSERT_TRUE(wrong.ok());
  EXPECT_FALSE(*wrong) << "only the holder resigns";
  absl::StatusOr<bool> stale = this->leases().Resign("upkeep", "replica-a", a.epoch + 1);
  ASSERT_TRUE(stale.ok());
  EXPECT_FALSE(*stale);
  absl::StatusOr<bool> resigned = this->leases().Resign("upkeep", "replica-a", a.epoch);
  ASSERT_TRUE(resigned.ok()) << resigned.status();
  EXPECT_TRUE(*resigned);
  absl::StatusOr<LeaderLease> current = this->leases().Current("upkeep");
  ASSERT_TRUE(current.ok());
  EXPECT_EQ(current->leader_id, "");
  EXPECT_EQ(current->epoch, 1);
  const LeaderLease b = this->Acquire("replica-b");  // at once, not after 30 s
  EXPECT_TRUE(b.held);
  EXPECT_EQ(b.epoch, 2);
  absl::StatusOr<bool> twice = this->leases().Resign("upkeep", "replica-a", a.epoch);
  ASSERT_TRUE(twice.ok());
  EXPECT_FALSE(*twice);
}

TYPED_TEST_P(LeaderLeasesContractTest, NamesAreIndependentAndArgumentsChecked) {
  EXPECT_TRUE(this->Acquire("replica-a", "upkeep").held);
  EXPECT_TRUE(this->Acquire("replica-b", "other").held);
  EXPECT_EQ(this->leases().AcquireOrRenew("", "replica-a", this->kTtl).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(this->leases().AcquireOrRenew("upkeep", "", this->kTtl).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      this->leases().AcquireOrRenew("upkeep", "replica-a", absl::ZeroDuration()).status().code(),
      absl::StatusCode::kInvalidArgument);
}

TYPED_TEST_P(LeaderLeasesContractTest, ConcurrentCandidatesElectExactlyOne) {
  constexpr int kCandidates = 8;
  std::atomic<int> held{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kCandidates; ++i) {
    threads.emplace_back([&, i] {
      absl::StatusOr<LeaderLease> lease = this->leases().AcquireOrRenew(
          "upkeep", "replica-" + std::to_string(i), absl::Seconds(30));
      EXPECT_TRUE(lease.ok()) << lease.status();
      if (lease.ok() && lease->held) ++held;
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(held.load(), 1);
  absl::StatusOr<LeaderLease> current = this->leases().Current("upkeep");
  ASSERT_TRUE(current.ok());
  EXPECT_EQ(current->epoch, 1);
}

TYPED_TEST_P(LeaderLeasesContractTest, DeposedLeadersUpkeepWritesAreRefused) {
  const LeaderLease a = this->Acquire("replica-a", "upkeep", absl::Seconds(30));
  const std::string run_id = this->LeasedRunId(absl::Milliseconds(300));
  this->harness_.LetTimePass(absl::Milliseconds(500));  // the run's lease expired
  ASSERT_TRUE(*this->leases().Resign("upkeep", "replica-a", a.epoch));
  const LeaderLease b = this->Acquire("replica-b", "upkeep", absl::Seconds(30));
  ASSERT_TRUE(b.held);
  const LeaderFence old_term{"upkeep", a.epoch}, new_term{"upkeep", b.epoch};

  absl::StatusOr<ReapResult> refused = this->harness_.queue().ReapExpiredLeasesFenced(10, old_term);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition) << refused.status();
  EXPECT_EQ(this->ViolationType(refused.status()), "LEADER_EPOCH");
  absl::StatusOr<v1::Run> run = this->harness_.catalog().GetRun(run_id);
  ASSERT_TRUE(run.ok());
  EXPECT_EQ(run->state(), v1::RUN_STATE_LEASED) << "a refused pass changes nothing";
  EXPECT_EQ(run->attempt(), 1u);
  EXPECT_EQ(this->harness_.queue().RecordReaperPassFenced(kQuietPass, old_term).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(
      this->harness_.retention().ApplyRetentionFenced(RetentionPolicy{}, old_term).status().code(),
      absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(this->harness_.queue()
                .ReapExpiredLeasesFenced(10, LeaderFence{"other", b.epoch})
                .status()
                .code(),
            absl::StatusCode::kFailedPrecondition)
      << "a term of another leadership is no term of this one";

  absl::StatusOr<ReapResult> reaped = this->harness_.queue().ReapExpiredLeasesFenced(10, new_term);
  ASSERT_TRUE(reaped.ok()) << reaped.status();
  EXPECT_EQ(reaped->requeued, 1);
  EXPECT_TRUE(this->harness_.retention().ApplyRetentionFenced(RetentionPolicy{}, new_term).ok());
  EXPECT_TRUE(this->harness_.queue().RecordReaperPassFenced(kQuietPass, new_term).ok());
}

TYPED_TEST_P(LeaderLeasesContractTest, ExpiredTermFencesEvenWithoutASuccessor) {
  const LeaderLease a = this->Acquire("replica-a");
  this->harness_.LetTimePass(absl::Milliseconds(1200));
  absl::StatusOr<ReapResult> refused =
      this->harness_.queue().ReapExpiredLeasesFenced(10, LeaderFence{"upkeep", a.epoch});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition) << refused.status();
}

REGISTER_TYPED_TEST_SUITE_P(LeaderLeasesContractTest, FirstCandidateTakesTermOneAndOthersSeeIt,
                            RenewalKeepsTheTermAndExtendsIt, ExpiredLeaseIsTakenOverInANewTerm,
                            SameHolderAfterExpiryStartsANewTerm,
                            ResignEndsTheTermNowAndKeepsTheEpoch,
                            NamesAreIndependentAndArgumentsChecked,
                            ConcurrentCandidatesElectExactlyOne,
                            DeposedLeadersUpkeepWritesAreRefused,
                            ExpiredTermFencesEvenWithoutASuccessor);

}  // namespace parity::server::testing
