// The GangQueue contract (server/store/gang_queue.h), on the store contract's harness plus
// `GangQueue& gangs()`: whole-or-nothing placement over the waiting workers with one epoch,
// fewer hosts first, a gang that cannot be placed holds nothing (and the ordinary lease never
// takes it), the reservation of a starving gang, the rendezvous released only once every rank
// checked in, a timeout listed and failed (slots freed, run requeued), a stale epoch refused at
// every write, a restart that bumps the epoch, a lost answer given again to its retry. Both
// contract binaries instantiate it.
#pragma once

#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "tests/scheduler/store_contract_test.h"

namespace parity::server::testing {

template <typename Harness>
class GangContractTest : public StoreContractTest<Harness> {
 protected:
  GangQueue& gangs() { return this->harness_.gangs(); }

  // One run of `ranks` ranks, `threads` CPU threads each.
  std::string GangRun(const std::string& name, uint32_t ranks, uint32_t threads, int priority = 0,
                      const std::string& dataset_pin = "") {
    NewSweep sweep;
    sweep.spec.set_name(name);
    sweep.spec.set_priority(priority);
    sweep.spec.set_max_attempts(3);
    v1::RunSpec& run = sweep.runs.emplace_back();
    run.set_name(name + "-0");
    run.mutable_resources()->set_cpu_threads(threads);
    run.mutable_resources()->set_ranks(ranks);
    if (!dataset_pin.empty()) {
      run.mutable_data()->set_corpus("tiny");
      run.mutable_data()->set_dataset_digest(dataset_pin);
    }
    absl::StatusOr<CreatedSweep> created = this->catalog().CreateSweep(sweep);
    EXPECT_TRUE(created.ok()) << created.status();
    return created.ok() ? created->run_ids[0] : "";
  }
  // A worker whose one CPU device has `threads` threads (what the live fleet is judged by).
  std::string CpuWorker(uint32_t threads, const std::string& dataset_digest = "") {
    WorkerRegistration registration;
    registration.hostname = "gang-host";
    if (!dataset_digest.empty()) {
      v1::DatasetHolding& held = registration.datasets.emplace_back();
      held.set_name("tiny");
      held.set_digest(dataset_digest);
    }
    v1::Device& cpu = registration.devices.emplace_back();
    cpu.set_kind(v1::DEVICE_KIND_CPU);
    cpu.set_threads(threads);
    absl::StatusOr<v1::Worker> worker = this->queue().RegisterWorker(registration);
    EXPECT_TRUE(worker.ok()) << worker.status();
    return worker.ok() ? worker->worker_id() : "";
  }
  static GangOffer Offer(const std::string& worker, uint32_t threads) {
    GangOffer offer;
    offer.worker_id = worker;
    offer.offer.cpu_threads = threads;
    offer.lease_ttl = absl::Seconds(60);
    offer.waiting_for = absl::Seconds(30);
    offer.rendezvous_timeout = absl::Seconds(60);
    offer.reservation_after = absl::Seconds(60);
    return offer;
  }
  GangWait Wait(const GangOffer& offer) {
    absl::StatusOr<GangWait> wait = gangs().WaitForGang(offer);
    EXPECT_TRUE(wait.ok()) << wait.status();
    return wait.ok() ? *wait : GangWait();
  }
  v1::Run Run(const std::string& run_id) {
    absl::StatusOr<v1::Run> run = this->catalog().GetRun(run_id);
    EXPECT_TRUE(run.ok()) << run.status();
    return run.ok() ? *run : v1::Run();
  }
  static RendezvousCall Call(const GangGrant& grant, const std::string& worker, uint32_t rank,
                             const std::string& address = "") {
    return {grant.run.run_id(), grant.lease_epoch, worker, rank, address};
  }
  // A two-rank gang of 4 threads a rank, placed over workers `a` and `b` (4 threads each):
  // rank 0 on the lower worker id. Returns both grants, rank 0's first.
  std::vector<GangGrant> PlaceTwo(const std::string& a, const std::string& b,
                                  absl::Duration rendezvous_timeout = absl::Seconds(60),
                                  absl::Duration ttl = absl::Seconds(60)) {
    GangOffer first = Offer(a, 4), second = Offer(b, 4);
    first.rendezvous_timeout = second.rendezvous_timeout = rendezvous_timeout;
    first.lease_ttl = second.lease_ttl = ttl;
    EXPECT_FALSE(Wait(first).grant.has_value()) << "one worker cannot host both ranks";
    const GangWait placed = Wait(second);
    EXPECT_TRUE(placed.grant.has_value()) << "the second worker completes the gang";
    EXPECT_TRUE(placed.placed_others());
    const GangWait woken = Wait(first);
    EXPECT_TRUE(woken.grant.has_value()) << "the first worker collects its slot";
    if (!placed.grant || !woken.grant) return {};
    std::vector<GangGrant> grants = {*placed.grant, *woken.grant};
    if (grants[0].slots[0].rank != 0) std::swap(grants[0], grants[1]);
    return grants;
  }
  static GangFailure Failure(const GangGrant& grant, const v1::Run& run, RetryDecision retry) {
    GangFailure failure;
    failure.run_id = grant.run.run_id();
    failure.lease_epoch = grant.lease_epoch;
    failure.failure_class = v1::FAILURE_CLASS_INFRASTRUCTURE;
    failure.failure_status.set_message("rank 1 died");
    failure.retry = retry;
    failure.decided_at_attempt = run.attempt();
    return failure;
  }
};

TYPED_TEST_SUITE_P(GangContractTest);

TYPED_TEST_P(GangContractTest, PlacesEveryRankAcrossWorkersUnderOneEpochOrNothing) {
  const std::string run_id = this->GangRun("gang-whole", 4, 2);
  const std::string a = this->CpuWorker(4), b = this->CpuWorker(4);
  const GangWait alone = this->Wait(this->Offer(a, 4));
  EXPECT_FALSE(alone.grant.has_value()) << "2 of 4 ranks fit: nothing is placed";
  EXPECT_EQ(this->Run(run_id).state(), v1::RUN_STATE_PENDING);
  EXPECT_EQ(this->Run(run_id).lease().lease_epoch(), 0) << "no worker holds part of the gang";

  const GangWait placed = this->Wait(this->Offer(b, 4));
  ASSERT_TRUE(placed.grant.has_value());
  EXPECT_TRUE(placed.placed_others()) << "a's calls must be woken to collect their slots";
  EXPECT_EQ(placed.placed_workers, std::vector<std::string>{a}) << "a alone is woken, once";
  const GangWait collected = this->Wait(this->Offer(a, 4));
  ASSERT_TRUE(collected.grant.has_value()) << "a's next try gets its slots";
  EXPECT_EQ(placed.grant->lease_epoch, collected.grant->lease_epoch) << "one epoch for all";
  EXPECT_EQ(placed.grant->world_size, 4u);
  EXPECT_EQ(placed.grant->slots.size() + collected.grant->slots.size(), 4u);
  std::vector<uint32_t> ranks;
  for (const auto* grant : {&*placed.grant, &*collected.grant}) {
    for (const GangSlot& slot : grant->slots) ranks.push_back(slot.rank);
  }
  std::sort(ranks.begin(), ranks.end());
  EXPECT_EQ(ranks, (std::vector<uint32_t>{0, 1, 2, 3}));
  const v1::Run run = this->Run(run_id);
  EXPECT_EQ(run.state(), v1::RUN_STATE_LEASED);
  EXPECT_EQ(run.lease().lease_epoch(), placed.grant->lease_epoch);
  EXPECT_EQ(run.lease().worker_id(), std::min(a, b)) << "rank 0 on the first worker by id";
  EXPECT_FALSE(this->Wait(this->Offer(a, 4)).grant.has_value()) << "delivered once";
}

// As for ordinary runs (APinnedRunGoesOnlyToAWorkerHoldingItsCopy): a rank on a worker with
// another copy of the data would fail DATA_MISMATCH, so a pinned gang waits for holders.
TYPED_TEST_P(GangContractTest, APinnedGangGoesOnlyToWorkersHoldingItsCopy) {
  const std::string ours(64, 'a'), theirs(64, 'b');
  const std::string other = this->CpuWorker(4, theirs), bare = this->CpuWorker(4);
  const std::string holder_a = this->CpuWorker(4, ours), holder_b = this->CpuWorker(4, ours);
  const std::string run_id = this->GangRun("gang-pinned", 2, 4, 0, ours);
  for (const std::string& worker : {other, bare, holder_a}) {
    EXPECT_FALSE(this->Wait(this->Offer(worker, 4)).grant.has_value())
        << "one holder and two workers without the copy: the gang must wait";
  }
  EXPECT_EQ(this->Run(run_id).state(), v1::RUN_STATE_PENDING)
      << "placed over a worker without the pinned copy";
  const GangWait placed = this->Wait(this->Offer(holder_b, 4));
  ASSERT_TRUE(placed.grant.has_value()) << "the second holder completes the gang";
  EXPECT_EQ(placed.placed_workers, std::vector<std::string>{holder_a});
  EXPECT_EQ(this->Run(run_id).lease().worker_id(), std::min(holder_a, holder_b));
  for (const std::string& worker : {other, bare}) {
    EXPECT_FALSE(this->Wait(this->Offer(worker, 4)).grant.has_value()) << "no slot off the holders";
  }
}

TYPED_TEST_P(GangContractTest, PrefersFewerHosts) {
  const std::string a = this->CpuWorker(2), b = this->CpuWorker(2), big = this->CpuWorker(8);
  for (const auto& [worker, threads] : {std::pair{a, 2u}, {b, 2u}, {big, 8u}}) {
    EXPECT_FALSE(this->Wait(this->Offer(worker, threads)).grant.has_value()) << "no gang yet";
  }
  const std::string run_id = this->GangRun("gang-few-hosts", 2, 2);
  const GangWait wait = this->Wait(this->Offer(a, 2));
  EXPECT_FALSE(wait.grant.has_value()) << "a is not needed: big hosts both ranks";
  EXPECT_TRUE(wait.placed_others()) << "placed on big during a's call";
  const GangWait on_big = this->Wait(this->Offer(big, 8));
  ASSERT_TRUE(on_big.grant.has_value());
  EXPECT_EQ(on_big.grant->slots.size(), 2u) << "both ranks on one host";
  EXPECT_EQ(this->Run(run_id).lease().worker_id(), big);
}

TYPED_TEST_P(GangContractTest, AGangThatCannotBePlacedHoldsNothingAndNoOrdinaryLeaseTakesIt) {
  const std::string run_id = this->GangRun("gang-too-big", 3, 4);
  const std::string a = this->CpuWorker(4), b = this->CpuWorker(4);
  EXPECT_FALSE(this->Wait(this->Offer(a, 4)).grant.has_value());
  EXPECT_FALSE(this->Wait(this->Offer(b, 4)).grant.has_value());
  const std::string big = this->CpuWorker(64);
  LeaseRequest ordinary = this->Cpu(big);
  ordinary.offer.cpu_threads = 64;
  absl::StatusOr<std::optional<LeasedRun>> leased = this->queue().LeaseNextRun(ordinary);
  ASSERT_TRUE(leased.ok()) << leased.status();
  EXPECT_FALSE(leased->has_value()) << "a gang is never leased as one process";
  const v1::Run run = this->Run(run_id);
  EXPECT_EQ(run.state(), v1::RUN_STATE_PENDING);
  EXPECT_EQ(run.lease().lease_epoch(), 0);
  absl::StatusOr<GangCounts> counts = this->gangs().CountGangs();
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_EQ(counts->waiting_gangs, 1u);
  EXPECT_EQ(counts->placed_gangs, 0u);
  EXPECT_EQ(counts->waiting_workers, 2u);
}

TYPED_TEST_P(GangContractTest, AStarvingGangReservesTheWorkersItCouldUseOnly) {
  const std::string run_id = this->GangRun("gang-starving", 2, 4);
  const std::string a = this->CpuWorker(4), b = this->CpuWorker(4), small = this->CpuWorker(1);
  GangOffer offer = this->Offer(a, 4);
  offer.reservation_after = absl::Milliseconds(300);
  EXPECT_FALSE(this->Wait(offer).reserved) << "not starving yet: small runs may go first";
  this->harness_.LetTimePass(absl::Milliseconds(500));
  const GangWait starving = this->Wait(offer);
  EXPECT_FALSE(starving.grant.has_value());
  EXPECT_TRUE(starving.reserved) << "a could host a rank of the starving gang";
  GangOffer too_small = this->Offer(small, 1);
  too_small.reservation_after = offer.reservation_after;
  EXPECT_FALSE(this->Wait(too_small).reserved) << "a worker the gang cannot use is not kept";
  // A gang the whole live fleet could never host reserves no one.
  const std::string huge = this->GangRun("gang-huge", 9, 4, /*priority=*/5);
  this->harness_.LetTimePass(absl::Milliseconds(500));
  EXPECT_FALSE(this->Wait(offer).reserved) << "9 ranks of 4 threads exceed the fleet";
  (void)huge;
  (void)run_id;
  (void)b;
}

TYPED_TEST_P(GangContractTest, TheRendezvousIsReleasedOnlyOnceEveryRankCheckedIn) {
  const std::string run_id = this->GangRun("gang-rendezvous", 2, 4);
  const std::string a = this->CpuWorker(4), b = this->CpuWorker(4);
  const std::vector<GangGrant> grants = this->PlaceTwo(a, b);
  ASSERT_EQ(grants.size(), 2u);
  const std::string rank0 = grants[0].slots[0].worker_id, rank1 = grants[1].slots[0].worker_id;
  absl::StatusOr<RendezvousState> asked =
      this->gangs().CheckInRendezvous(this->Call(grants[0], rank0, 0));
  ASSERT_TRUE(asked.ok()) << asked.status();
  EXPECT_EQ(asked->checked_in, 0u) << "rank 0 checks in by posting, not by asking";
  absl::StatusOr<RendezvousState> posted =
      this->gangs().PostRendezvous(this->Call(grants[0], rank0, 0, "10.0.0.1:29500"));
  ASSERT_TRUE(posted.ok()) << posted.status();
  EXPECT_FALSE(posted->released) << "rank 1 has not checked in";
  EXPECT_EQ(posted->address, "") << "never released early";
  EXPECT_EQ(posted->checked_in, 1u);
  EXPECT_EQ(posted->world_size, 2u);
  absl::StatusOr<RendezvousState> wrong =
      this->gangs().CheckInRendezvous(this->Call(grants[1], rank1, 0));
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kFailedPrecondition) << "not its rank";
  EXPECT_EQ(this->gangs().PostRendezvous(this->Call(grants[1], rank1, 0, "x:1")).status().code(),
            absl::StatusCode::kFailedPrecondition)
      << "only rank 0's worker posts";
  absl::StatusOr<RendezvousState> in =
      this->gangs().CheckInRendezvous(this->Call(grants[1], rank1, 1));
  ASSERT_TRUE(in.ok()) << in.status();
  EXPECT_TRUE(in->released);
  EXPECT_EQ(in->address, "10.0.0.1:29500");
  EXPECT_EQ(in->checked_in, 2u);
  (void)run_id;
}

TYPED_TEST_P(GangContractTest, ATimedOutRendezvousIsListedAndFailingItFreesAndRequeues) {
  const std::string run_id = this->GangRun("gang-timeout", 2, 4);
  const std::string a = this->CpuWorker(4), b = this->CpuWorker(4);
  const std::vector<GangGrant> grants = this->PlaceTwo(a, b, absl::Milliseconds(300));
  ASSERT_EQ(grants.size(), 2u);
  const std::string rank0 = grants[0].slots[0].worker_id, rank1 = grants[1].slots[0].worker_id;
  ASSERT_TRUE(this->gangs().PostRendezvous(this->Call(grants[0], rank0, 0, "h:1")).ok());
  absl::StatusOr<std::vector<LapsedGang>> early = this->gangs().ListLapsedGangs(10);
  ASSERT_TRUE(early.ok()) << early.status();
  EXPECT_TRUE(early->empty()) << "before the deadline";
  this->harness_.LetTimePass(absl::Milliseconds(500));
  absl::StatusOr<std::vector<LapsedGang>> lapsed = this->gangs().ListLapsedGangs(10);
  ASSERT_TRUE(lapsed.ok()) << lapsed.status();
  ASSERT_EQ(lapsed->size(), 1u);
  EXPECT_EQ((*lapsed)[0].run_id, run_id);
  EXPECT_EQ((*lapsed)[0].why, LapsedGang::Why::kRendezvousTimeout);
  EXPECT_EQ((*lapsed)[0].ranks, std::vector<uint32_t>{1}) << "rank 1 never checked in";
  const v1::Run before = this->Run(run_id);
  absl::StatusOr<v1::Run> failed = this->gangs().FailGang(this->Failure(
      grants[0], before, {v1::RUN_STATE_PENDING, before.attempt(), absl::Seconds(30), 1}));
  ASSERT_TRUE(failed.ok()) << failed.status();
  EXPECT_EQ(failed->state(), v1::RUN_STATE_PENDING);
  EXPECT_EQ(failed->attempt(), before.attempt()) << "decided as a preemption: no attempt spent";
  EXPECT_EQ(failed->failure_class(), v1::FAILURE_CLASS_INFRASTRUCTURE);
  EXPECT_FALSE(failed->has_lease()) << "the slots are freed";
  absl::StatusOr<std::vector<LapsedGang>> after = this->gangs().ListLapsedGangs(10);
  ASSERT_TRUE(after.ok());
  EXPECT_TRUE(after->empty());
  EXPECT_FALSE(this->Wait(this->Offer(a, 4)).grant.has_value());
  EXPECT_FALSE(this->Wait(this->Offer(b, 4)).grant.has_value()) << "not before its backoff";
  absl::StatusOr<GangCounts> counts = this->gangs().CountGangs();
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->placed_gangs, 0u);
  (void)rank1;
}

TYPED_TEST_P(GangContractTest, AStaleEpochIsRefusedAtEveryWriteAndARestartBumpsIt) {
  const std::string run_id = this->GangRun("gang-stale", 2, 4);
  const std::string a = this->CpuWorker(4), b = this->CpuWorker(4);
  const std::vector<GangGrant> grants = this->PlaceTwo(a, b);
  ASSERT_EQ(grants.size(), 2u);
  const std::string rank0 = grants[0].slots[0].worker_id, rank1 = grants[1].slots[0].worker_id;
  const int64_t epoch = grants[0].lease_epoch;
  HeartbeatUpdate follower{rank1, run_id, epoch, 5, std::nullopt, absl::Seconds(60)};
  ASSERT_TRUE(this->gangs().HeartbeatFollower(follower).ok());
  HeartbeatUpdate stranger{rank0, run_id, epoch, 5, std::nullopt, absl::Seconds(60)};
  stranger.worker_id = this->CpuWorker(4);
  EXPECT_EQ(this->gangs().HeartbeatFollower(stranger).status().code(),
            absl::StatusCode::kFailedPrecondition)
      << "a worker without a slot";
  const v1::Run before = this->Run(run_id);
  absl::StatusOr<v1::Run> restarted = this->gangs().FailGang(this->Failure(
      grants[0], before, {v1::RUN_STATE_PENDING, before.attempt() + 1, absl::ZeroDuration(), 0}));
  ASSERT_TRUE(restarted.ok()) << restarted.status();
  EXPECT_EQ(restarted->attempt(), before.attempt() + 1);
  EXPECT_EQ(this->gangs().FailGang(this->Failure(grants[0], before, {})).status().code(),
            absl::StatusCode::kFailedPrecondition)
      << "the second rank's report of the same failure is stale";

  const auto stale = [](const absl::Status& status) {
    return status.code() == absl::StatusCode::kFailedPrecondition;
  };
  EXPECT_TRUE(stale(this->gangs().HeartbeatFollower(follower).status())) << "follower heartbeat";
  HeartbeatUpdate leader{rank0, run_id, epoch, 5, std::nullopt, absl::Seconds(60)};
  EXPECT_TRUE(stale(this->queue().Heartbeat(leader).status())) << "rank 0's heartbeat";
  EXPECT_TRUE(stale(this->queue().AppendMetrics(run_id, epoch, {this->Point(1)}).status()))
      << "metrics";
  Completion success;
  success.run_id = run_id;
  success.lease_epoch = epoch;
  success.success = v1::RunSummary();
  EXPECT_TRUE(stale(this->queue().CompleteRun(success).status())) << "completion";
  EXPECT_TRUE(stale(this->gangs().PostRendezvous(this->Call(grants[0], rank0, 0, "h:1")).status()))
      << "rendezvous post";
  EXPECT_TRUE(stale(this->gangs().CheckInRendezvous(this->Call(grants[1], rank1, 1)).status()))
      << "rendezvous check-in";

  // Placed again as a gang, under a newer epoch than the restart's.
  const std::vector<GangGrant> again = this->PlaceTwo(a, b);
  ASSERT_EQ(again.size(), 2u);
  EXPECT_GT(again[0].lease_epoch, restarted->lease().lease_epoch());
  EXPECT_GT(again[0].lease_epoch, epoch + 1);
  EXPECT_TRUE(stale(this->gangs().CheckInRendezvous(this->Call(grants[1], rank1, 1)).status()))
      << "the old epoch stays refused";
  EXPECT_TRUE(
      this->gangs().CheckInRendezvous(this->Call(again[1], again[1].slots[0].worker_id, 1)).ok());
}

TYPED_TEST_P(GangContractTest, AFollowerThatStopsHeartbeatingLapsesItsGang) {
  const std::string run_id = this->GangRun("gang-lapse", 2, 4);
  const std::string a = this->CpuWorker(4), b = this->CpuWorker(4);
  const std::vector<GangGrant> grants =
      this->PlaceTwo(a, b, absl::Seconds(60), absl::Milliseconds(600));
  ASSERT_EQ(grants.size(), 2u);
  const std::string rank0 = grants[0].slots[0].worker_id;
  this->harness_.LetTimePass(absl::Milliseconds(400));
  HeartbeatUpdate leader{rank0, run_id, grants[0].lease_epoch, 1, std::nullopt, absl::Seconds(60)};
  ASSERT_TRUE(this->queue().Heartbeat(leader).ok()) << "rank 0 keeps the run's lease";
  this->harness_.LetTimePass(absl::Milliseconds(400));
  absl::StatusOr<std::vector<LapsedGang>> lapsed = this->gangs().ListLapsedGangs(10);
  ASSERT_TRUE(lapsed.ok()) << lapsed.status();
  ASSERT_EQ(lapsed->size(), 1u);
  EXPECT_EQ((*lapsed)[0].why, LapsedGang::Why::kSlotLapsed);
  EXPECT_EQ((*lapsed)[0].ranks, std::vector<uint32_t>{1});
}

TYPED_TEST_P(GangContractTest, AWorkerThatLeftOrLapsedIsNoCandidate) {
  const std::string run_id = this->GangRun("gang-left", 2, 4);
  const std::string a = this->CpuWorker(4), b = this->CpuWorker(4), c = this->CpuWorker(4);
  GangOffer leaving = this->Offer(a, 4);
  EXPECT_FALSE(this->Wait(leaving).grant.has_value());
  leaving.leaving = true;
  EXPECT_FALSE(this->Wait(leaving).grant.has_value());
  GangOffer brief = this->Offer(b, 4);
  brief.waiting_for = absl::Milliseconds(200);
  EXPECT_FALSE(this->Wait(brief).grant.has_value()) << "a left: b alone";
  this->harness_.LetTimePass(absl::Milliseconds(400));
  EXPECT_FALSE(this->Wait(this->Offer(c, 4)).grant.has_value()) << "b's wait lapsed: c alone";
  EXPECT_EQ(this->Run(run_id).state(), v1::RUN_STATE_PENDING);
  ASSERT_TRUE(this->gangs().LeaveGangPool(c).ok());
  EXPECT_FALSE(this->Wait(this->Offer(b, 4)).grant.has_value()) << "c left: b alone again";
}

TYPED_TEST_P(GangContractTest, NoGangIsPlacedPastAStarvingOne) {
  const std::string big = this->GangRun("gang-big", 3, 4, /*priority=*/1);
  const std::string a = this->CpuWorker(4), b = this->CpuWorker(4), c = this->CpuWorker(4);
  this->harness_.LetTimePass(absl::Milliseconds(500));
  const std::string small = this->GangRun("gang-small", 2, 4);
  GangOffer first = this->Offer(a, 4), second = this->Offer(b, 4);
  first.reservation_after = second.reservation_after = absl::Milliseconds(300);
  EXPECT_FALSE(this->Wait(first).grant.has_value());
  const GangWait starving = this->Wait(second);
  EXPECT_FALSE(starving.grant.has_value()) << "the smaller gang would fit a and b, but waits";
  EXPECT_TRUE(starving.reserved);
  EXPECT_EQ(this->Run(small).state(), v1::RUN_STATE_PENDING);
  GangOffer third = this->Offer(c, 4);
  third.reservation_after = first.reservation_after;
  EXPECT_TRUE(this->Wait(third).grant.has_value()) << "c completes the starving gang";
  EXPECT_EQ(this->Run(big).state(), v1::RUN_STATE_LEASED) << "the starving gang goes first";
  EXPECT_EQ(this->Run(small).state(), v1::RUN_STATE_PENDING);
}

TYPED_TEST_P(GangContractTest, RankZerosLapsedLeaseStopsTheFollowers) {
  const std::string run_id = this->GangRun("gang-rank0-lapse", 2, 4);
  const std::string a = this->CpuWorker(4), b = this->CpuWorker(4);
  const std::vector<GangGrant> grants =
      this->PlaceTwo(a, b, absl::Seconds(60), absl::Milliseconds(300));
  ASSERT_EQ(grants.size(), 2u);
  const std::string rank1 = grants[1].slots[0].worker_id;
  this->harness_.LetTimePass(absl::Milliseconds(500));
  absl::StatusOr<ReapResult> reaped = this->queue().ReapExpiredLeases(10);
  ASSERT_TRUE(reaped.ok()) << reaped.status();
  EXPECT_EQ(reaped->requeued, 1);
  HeartbeatUpdate follower{rank1, run_id,       grants[1].lease_epoch,
                           1,     std::nullopt, absl::Seconds(60)};
  EXPECT_EQ(this->gangs().HeartbeatFollower(follower).status().code(),
            absl::StatusCode::kFailedPrecondition)
      << "the gang is no longer placed: stop the rank";
  EXPECT_EQ(this->gangs().CheckInRendezvous(this->Call(grants[1], rank1, 1)).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(this->Run(run_id).state(), v1::RUN_STATE_PENDING);
}

TYPED_TEST_P(GangContractTest, ALostAnswerIsGivenAgainToItsRetryUntilTheWorkerStartedRanks) {
  const std::string run_id = this->GangRun("gang-again", 2, 4);
  const std::string a = this->CpuWorker(4), b = this->CpuWorker(4);
  GangOffer first = this->Offer(a, 4), second = this->Offer(b, 4);
  first.lease_ttl = second.lease_ttl = absl::Milliseconds(300);
  first.request_id = "lease-call-a";
  second.request_id = "lease-call-b";
  EXPECT_FALSE(this->Wait(first).grant.has_value());
  const GangWait placed = this->Wait(second);
  const GangWait collected = this->Wait(first);
  ASSERT_TRUE(placed.grant && collected.grant);
  EXPECT_FALSE(this->Wait(first).grant.has_value()) << "delivered once to a fresh call";

  this->harness_.LetTimePass(absl::Milliseconds(200));
  for (const auto& [worker, id, grant] : {std::tuple{a, first.request_id, *collected.grant},
                                          std::tuple{b, second.request_id, *placed.grant}}) {
    absl::StatusOr<std::optional<GangGrant>> again =
        this->gangs().AnswerGangAgain(worker, id, absl::Seconds(2));
    ASSERT_TRUE(again.ok()) << again.status();
    ASSERT_TRUE(again->has_value()) << "the retry of the call its slots went to gets them again";
    EXPECT_EQ((*again)->run.run_id(), run_id);
    EXPECT_EQ((*again)->lease_epoch, grant.lease_epoch) << "the same epoch, not a new gang";
    EXPECT_EQ((*again)->world_size, 2u);
    ASSERT_EQ((*again)->slots.size(), grant.slots.size());
    EXPECT_EQ((*again)->slots[0].rank, grant.slots[0].rank);
    EXPECT_EQ((*again)->slots[0].device_indices, grant.slots[0].device_indices);
  }
  for (const auto& [worker, id] : {std::pair{a, std::string("another-call")},
                                   std::pair{b, first.request_id}, std::pair{a, std::string()}}) {
    absl::StatusOr<std::optional<GangGrant>> none =
        this->gangs().AnswerGangAgain(worker, id, absl::Seconds(2));
    ASSERT_TRUE(none.ok()) << none.status();
    EXPECT_FALSE(none->has_value()) << "only the call the slots went to, by its id: '" << id << "'";
  }
  this->harness_.LetTimePass(absl::Milliseconds(200));  // past the placement's 300 ms TTL
  absl::StatusOr<ReapResult> reaped = this->queue().ReapExpiredLeases(10);
  ASSERT_TRUE(reaped.ok()) << reaped.status();
  EXPECT_EQ(reaped->requeued, 0) << "rank 0's lease was renewed by its answer given again";
  absl::StatusOr<std::vector<LapsedGang>> lapsed = this->gangs().ListLapsedGangs(10);
  ASSERT_TRUE(lapsed.ok()) << lapsed.status();
  EXPECT_TRUE(lapsed->empty()) << "the follower's slot was renewed too";

  const GangGrant& rank1 = placed.grant->slots[0].rank == 1 ? *placed.grant : *collected.grant;
  const std::string follower = rank1.slots[0].worker_id;
  const std::string follower_call = follower == a ? first.request_id : second.request_id;
  ASSERT_TRUE(this->gangs().CheckInRendezvous(this->Call(rank1, follower, 1)).ok());
  absl::StatusOr<std::optional<GangGrant>> started =
      this->gangs().AnswerGangAgain(follower, follower_call, absl::Seconds(2));
  ASSERT_TRUE(started.ok()) << started.status();
  EXPECT_FALSE(started->has_value()) << "a worker that checked a rank in got its answer";

  const GangGrant& rank0 = placed.grant->slots[0].rank == 0 ? *placed.grant : *collected.grant;
  const std::string leader = rank0.slots[0].worker_id;
  const std::string leader_call = leader == a ? first.request_id : second.request_id;
  const v1::Run before = this->Run(run_id);
  ASSERT_TRUE(this->gangs()
                  .FailGang(this->Failure(rank0, before,
                                          {v1::RUN_STATE_PENDING, before.attempt(),
                                           absl::ZeroDuration(), before.preemptions()}))
                  .ok());
  absl::StatusOr<std::optional<GangGrant>> stale =
      this->gangs().AnswerGangAgain(leader, leader_call, absl::Seconds(2));
  ASSERT_TRUE(stale.ok()) << stale.status();
  EXPECT_FALSE(stale->has_value()) << "a restarted gang's old slots are never given again";
}

REGISTER_TYPED_TEST_SUITE_P(GangContractTest, PlacesEveryRankAcrossWorkersUnderOneEpochOrNothing,
                            APinnedGangGoesOnlyToWorkersHoldingItsCopy, PrefersFewerHosts,
                            AGangThatCannotBePlacedHoldsNothingAndNoOrdinaryLeaseTakesIt,
                            AStarvingGangReservesTheWorkersItCouldUseOnly,
                            TheRendezvousIsReleasedOnlyOnceEveryRankCheckedIn,
                            ATimedOutRendezvousIsListedAndFailingItFreesAndRequeues,
                            AStaleEpochIsRefusedAtEveryWriteAndARestartBumpsIt,
                            AFollowerThatStopsHeartbeatingLapsesItsGang,
                            AWorkerThatLeftOrLapsedIsNoCandidate, NoGangIsPlacedPastAStarvingOne,
                            RankZerosLapsedLeaseStopsTheFollowers,
                            ALostAnswerIsGivenAgainToItsRetryUntilTheWorkerStartedRanks);

}  // namespace parity::server::testing
