// ReadModels::GetRunGang (server/store/read_models.h), on the gang contract's harness (placing a
// gang needs GangQueue; the read is the ReadModels contract's, both binaries instantiate it):
// nothing for a run of one rank or a gang not placed; once placed, every rank with its worker,
// that worker's hostname and the rank's devices under the current epoch; check-ins and the
// release as they happen, with their times; nothing again once a failure restarts the gang or
// the reaper requeues it; a finished gang keeps the placement it finished under.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/proto_time.h"
#include "core/summary_check.h"
#include "server/store/read_models.h"
#include "tests/scheduler/gang_contract_test.h"

namespace parity::server::testing {

template <typename Harness>
class GangReadModelsContractTest : public GangContractTest<Harness> {
 protected:
  ReadModels& reads() { return this->harness_.reads(); }

  std::optional<v1::RunGang> Gang(const std::string& run_id) {
    absl::StatusOr<std::optional<v1::RunGang>> gang = reads().GetRunGang(run_id);
    EXPECT_TRUE(gang.ok()) << gang.status();
    return gang.ok() ? *gang : std::nullopt;
  }
  // A 4-thread CPU worker registered under `hostname`.
  std::string HostWorker(const std::string& hostname) {
    WorkerRegistration registration;
    registration.hostname = hostname;
    v1::Device& cpu = registration.devices.emplace_back();
    cpu.set_kind(v1::DEVICE_KIND_CPU);
    cpu.set_threads(4);
    absl::StatusOr<v1::Worker> worker = this->queue().RegisterWorker(registration);
    EXPECT_TRUE(worker.ok()) << worker.status();
    return worker.ok() ? worker->worker_id() : "";
  }
  // The placed two-rank gang of `run_id` over workers on hosts "host-a" and "host-b", rank 0's
  // grant first; *hosts gets each rank's hostname.
  std::vector<GangGrant> PlaceOnTwoHosts(std::vector<std::string>* hosts) {
    const std::string a = HostWorker("host-a"), b = HostWorker("host-b");
    std::vector<GangGrant> grants = this->PlaceTwo(a, b);
    if (grants.size() == 2) {
      *hosts = {grants[0].slots[0].worker_id == a ? "host-a" : "host-b",
                grants[1].slots[0].worker_id == a ? "host-a" : "host-b"};
    }
    return grants;
  }
};

TYPED_TEST_SUITE_P(GangReadModelsContractTest);

TYPED_TEST_P(GangReadModelsContractTest, NoGangForARunOfOneRankOrAnUnknownRun) {
  const CreatedSweep sweep = this->Sweep("not-a-gang", 1);
  const LeasedRun leased = this->LeaseOne(this->Worker());
  EXPECT_EQ(leased.run.run_id(), sweep.run_ids[0]);
  EXPECT_FALSE(this->Gang(sweep.run_ids[0]).has_value()) << "a leased run of one rank";
  EXPECT_FALSE(this->Gang("00000000-0000-4000-8000-000000000000").has_value()) << "unknown";
  EXPECT_FALSE(this->Gang("not-a-uuid").has_value()) << "not an id: no run, no gang";
}

TYPED_TEST_P(GangReadModelsContractTest, APlacedGangShowsEveryRankHostDeviceAndCheckIn) {
  const std::string run_id = this->GangRun("gang-read", 2, 4);
  EXPECT_FALSE(this->Gang(run_id).has_value()) << "PENDING: not placed yet";
  const absl::Time before = this->harness_.Now();
  std::vector<std::string> hosts;
  const std::vector<GangGrant> grants = this->PlaceOnTwoHosts(&hosts);
  ASSERT_EQ(grants.size(), 2u);

  std::optional<v1::RunGang> gang = this->Gang(run_id);
  ASSERT_TRUE(gang.has_value()) << "placed";
  EXPECT_EQ(gang->world_size(), 2u);
  EXPECT_EQ(gang->lease_epoch(), grants[0].lease_epoch);
  EXPECT_EQ(gang->lease_epoch(), this->Run(run_id).lease().lease_epoch()) << "the run's epoch";
  const absl::Time placed = FromProtoTime(gang->placed_time());
  EXPECT_GE(placed, before - absl::Seconds(1));
  EXPECT_LE(placed, this->harness_.Now() + absl::Seconds(1));
  EXPECT_LT(
      absl::AbsDuration(FromProtoTime(gang->rendezvous_deadline()) - (placed + absl::Seconds(60))),
      absl::Milliseconds(1))
      << "placed + the offer's rendezvous timeout";
  EXPECT_FALSE(gang->released());
  EXPECT_FALSE(gang->has_released_time());
  ASSERT_EQ(gang->ranks_size(), 2);
  for (int i = 0; i < 2; ++i) {
    const v1::RunGangRank& rank = gang->ranks(i);
    EXPECT_EQ(rank.rank(), static_cast<uint32_t>(i)) << "lowest rank first";
    EXPECT_EQ(rank.worker_id(), grants[i].slots[0].worker_id);
    EXPECT_EQ(rank.hostname(), hosts[i]) << "rank " << i << "'s worker's hostname";
    EXPECT_EQ(std::vector<uint32_t>(rank.device_indices().begin(), rank.device_indices().end()),
              grants[i].slots[0].device_indices);
    EXPECT_FALSE(rank.checked_in());
    EXPECT_FALSE(rank.has_check_in_time());
  }

  this->harness_.LetTimePass(absl::Milliseconds(200));
  const std::string rank0 = grants[0].slots[0].worker_id, rank1 = grants[1].slots[0].worker_id;
  ASSERT_TRUE(this->gangs().CheckInRendezvous(this->Call(grants[1], rank1, 1)).ok());
  gang = this->Gang(run_id);
  ASSERT_TRUE(gang.has_value());
  EXPECT_FALSE(gang->ranks(0).checked_in()) << "rank 0 checks in by posting";
  EXPECT_TRUE(gang->ranks(1).checked_in());
  const absl::Time rank1_in = FromProtoTime(gang->ranks(1).check_in_time());
  EXPECT_GE(rank1_in, placed + absl::Milliseconds(200)) << "after the placement";
  EXPECT_FALSE(gang->released()) << "1 of 2 checked in";

  this->harness_.LetTimePass(absl::Milliseconds(200));
  ASSERT_TRUE(this->gangs().CheckInRendezvous(this->Call(grants[1], rank1, 1)).ok());
  ASSERT_TRUE(this->gangs().PostRendezvous(this->Call(grants[0], rank0, 0, "h:1")).ok());
  gang = this->Gang(run_id);
  ASSERT_TRUE(gang.has_value());
  EXPECT_EQ(FromProtoTime(gang->ranks(1).check_in_time()), rank1_in) << "the first check-in";
  EXPECT_TRUE(gang->ranks(0).checked_in());
  EXPECT_TRUE(gang->released()) << "every rank checked in";
  const absl::Time released = FromProtoTime(gang->released_time());
  EXPECT_GE(released, rank1_in + absl::Milliseconds(200));
  EXPECT_EQ(FromProtoTime(gang->ranks(0).check_in_time()), released) << "rank 0 released it";
}

TYPED_TEST_P(GangReadModelsContractTest, ARestartOrARequeueClearsItAndAFinishedGangKeepsIt) {
  const std::string run_id = this->GangRun("gang-read-restart", 2, 4);
  std::vector<std::string> hosts;
  std::vector<GangGrant> grants = this->PlaceOnTwoHosts(&hosts);
  ASSERT_EQ(grants.size(), 2u);
  const v1::Run before = this->Run(run_id);
  ASSERT_TRUE(this->gangs()
                  .FailGang(this->Failure(
                      grants[0], before,
                      {v1::RUN_STATE_PENDING, before.attempt() + 1, absl::ZeroDuration(), 0}))
                  .ok());
  EXPECT_FALSE(this->Gang(run_id).has_value()) << "restarted: waiting for a new placement";

  // Placed again over the same two workers, then rank 0's lease lapses: the reaper requeues.
  const std::string a = grants[0].slots[0].worker_id, b = grants[1].slots[0].worker_id;
  grants = this->PlaceTwo(a, b, absl::Seconds(60), absl::Milliseconds(300));
  ASSERT_EQ(grants.size(), 2u);
  std::optional<v1::RunGang> again = this->Gang(run_id);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->lease_epoch(), grants[0].lease_epoch) << "the new placement's epoch";
  this->harness_.LetTimePass(absl::Milliseconds(500));
  absl::StatusOr<ReapResult> reaped = this->queue().ReapExpiredLeases(10);
  ASSERT_TRUE(reaped.ok()) << reaped.status();
  ASSERT_EQ(reaped->requeued, 1);
  EXPECT_FALSE(this->Gang(run_id).has_value()) << "PENDING again: its old rows are not shown";

  // Placed a third time and finished: the placement it finished under stays readable.
  grants = this->PlaceTwo(a, b);
  ASSERT_EQ(grants.size(), 2u);
  Completion success;
  success.run_id = run_id;
  success.lease_epoch = grants[0].lease_epoch;
  success.success = core::PlannedSummary(grants[0].run.spec(), 1.25, 1.25);
  absl::StatusOr<CompletionResult> done = this->queue().CompleteRun(success);
  ASSERT_TRUE(done.ok()) << done.status();
  ASSERT_EQ(done->run.state(), v1::RUN_STATE_SUCCEEDED);
  std::optional<v1::RunGang> finished = this->Gang(run_id);
  ASSERT_TRUE(finished.has_value()) << "where the run was trained";
  EXPECT_EQ(finished->lease_epoch(), grants[0].lease_epoch);
  EXPECT_EQ(finished->ranks_size(), 2);
}

REGISTER_TYPED_TEST_SUITE_P(GangReadModelsContractTest, NoGangForARunOfOneRankOrAnUnknownRun,
                            APlacedGangShowsEveryRankHostDeviceAndCheckIn,
                            ARestartOrARequeueClearsItAndAFinishedGangKeepsIt);

}  // namespace parity::server::testing
