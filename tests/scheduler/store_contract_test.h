// The store contract (server/store/run_store.h), one suite for every implementation: a binary
// instantiates it with a harness that gives a fresh store's interfaces and a way to let time
// pass. memory_store_contract_test.cc runs it on MemoryRunStore (no PostgreSQL, fake clock);
// postgres_store_contract_test.cc on PostgresRunStore (a throwaway database, real time). The read
// models have a suite of their own on the same harness (read_models_contract_test.h), and so do
// access tokens (access_contract_test.h), outages (outage_contract_test.h) and retried leases
// (lease_retry_contract_test.h).
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

#include "core/summary_check.h"
#include "google/rpc/error_details.pb.h"
#include "server/store/access_tokens.h"
#include "server/store/run_queue.h"
#include "server/store/sweep_catalog.h"
#include "server/store/telemetry_retention.h"

namespace parity::server::testing {

// A harness provides: void SetUp(); SweepCatalog& catalog(); RunQueue& queue();
// ReadModels& reads() (read_models_contract_test.h); TelemetryRetention& retention();
// AccessTokens& tokens(); void LetTimePass(absl::Duration); absl::Time Now() (the store's clock).
template <typename Harness>
class StoreContractTest : public ::testing::Test {
 protected:
  void SetUp() override { harness_.SetUp(); }

  SweepCatalog& catalog() { return harness_.catalog(); }
  RunQueue& queue() { return harness_.queue(); }
  TelemetryRetention& retention() { return harness_.retention(); }
  AccessTokens& tokens() { return harness_.tokens(); }

  StoredAccessToken Token(const std::string& name, TokenRole role, const std::string& secret,
                          std::optional<absl::Time> expires = std::nullopt) {
    absl::StatusOr<StoredAccessToken> token =
        tokens().CreateToken({name, role, std::string(32, secret[0]), "contract", expires});
    EXPECT_TRUE(token.ok()) << token.status();
    return token.ok() ? *token : StoredAccessToken();
  }

  CreatedSweep Sweep(const std::string& name, int runs, int priority = 0,
                     const std::string& key = "", const std::string& owner = "") {
    NewSweep sweep;
    sweep.owner = owner;
    sweep.spec.set_name(name);
    sweep.spec.set_priority(priority);
    sweep.spec.set_max_attempts(2);
    sweep.idempotency_key = key;
    for (int i = 0; i < runs; ++i) {
      v1::RunSpec& run = sweep.runs.emplace_back();
      run.set_name(name + "-" + std::to_string(i));
      run.mutable_resources()->set_cpu_threads(1);
    }
    absl::StatusOr<CreatedSweep> created = catalog().CreateSweep(sweep);
    EXPECT_TRUE(created.ok()) << created.status();
    return created.ok() ? *created : CreatedSweep();
  }

  // One run with a plan to check a summary against: 200 steps of 4,096 tokens, M = 1e7.
  CreatedSweep PlannedSweep(const std::string& name) {
    NewSweep sweep;
    sweep.spec.set_name(name);
    sweep.spec.set_max_attempts(2);
    v1::RunSpec& run = sweep.runs.emplace_back();
    run.set_name(name + "-0");
    run.mutable_resources()->set_cpu_threads(1);
    run.mutable_training()->set_steps(200);
    run.mutable_accounting()->set_tokens(200 * 4096);
    run.mutable_accounting()->set_flops_per_token(1e7);
    absl::StatusOr<CreatedSweep> created = catalog().CreateSweep(sweep);
    EXPECT_TRUE(created.ok()) << created.status();
    return created.ok() ? *created : CreatedSweep();
  }

  std::string Worker(const std::string& owner = "", const std::string& id = "") {
    WorkerRegistration registration;
    registration.worker_id = id;
    registration.owner = owner;
    registration.hostname = "contract-host";
    absl::StatusOr<v1::Worker> worker = queue().RegisterWorker(registration);
    EXPECT_TRUE(worker.ok()) << worker.status();
    return worker.ok() ? worker->worker_id() : "";
  }

  static LeaseRequest Cpu(const std::string& worker, absl::Duration ttl = absl::Seconds(60)) {
    LeaseRequest request;
    request.worker_id = worker;
    request.offer.cpu_threads = 4;
    request.ttl = ttl;
    return request;
  }

  LeasedRun LeaseOne(const std::string& worker, absl::Duration ttl = absl::Seconds(60)) {
    const LeaseRequest request = Cpu(worker, ttl);
    absl::StatusOr<std::optional<LeasedRun>> leased = queue().LeaseNextRun(request);
    EXPECT_TRUE(leased.ok() && leased->has_value())
        << "expected a run to lease: " << leased.status();
    return leased.ok() && leased->has_value() ? **leased : LeasedRun();
  }

  static v1::MetricPoint Point(uint64_t step) {
    v1::MetricPoint point;
    point.set_step(step);
    point.set_train_bpc(2.0);
    return point;
  }

  template <typename Detail>
  static Detail PayloadOf(const absl::Status& status) {
    Detail detail;
    const std::string url = "type.googleapis.com/" + Detail::descriptor()->full_name();
    if (auto payload = status.GetPayload(url)) {
      detail.ParseFromString(std::string(*payload));
    }
    return detail;
  }

  Harness harness_;
};

TYPED_TEST_SUITE_P(StoreContractTest);

TYPED_TEST_P(StoreContractTest, LeasesByPriorityThenFairShareThenAgeInGridOrder) {
  const CreatedSweep a = this->Sweep("contract-a", 3);
  const CreatedSweep b = this->Sweep("contract-b", 3);
  const CreatedSweep urgent = this->Sweep("contract-urgent", 1, /*priority=*/5);
  const std::string worker = this->Worker();
  // Priority first; then the sweep with fewer live runs; on a tie the older sweep.
  const std::vector<std::string> expected = {urgent.run_ids[0], a.run_ids[0], b.run_ids[0],
                                             a.run_ids[1],      b.run_ids[1], a.run_ids[2],
                                             b.run_ids[2]};
  std::vector<std::string> leased;
  for (size_t i = 0; i < expected.size(); ++i) {
    leased.push_back(this->LeaseOne(worker).run.run_id());
  }
  EXPECT_EQ(leased, expected);
  absl::StatusOr<std::optional<LeasedRun>> none = this->queue().LeaseNextRun(this->Cpu(worker));
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->has_value()) << "every run is leased; nothing is left";
}

TYPED_TEST_P(StoreContractTest, ABatchLeasesWhatOneLeaseAfterAnotherWould) {
  const CreatedSweep a = this->Sweep("batch-a", 2);
  const CreatedSweep b = this->Sweep("batch-b", 2);
  std::vector<LeaseRequest> requests;
  for (int i = 0; i < 5; ++i) requests.push_back(this->Cpu(this->Worker()));
  std::vector<const LeaseRequest*> pointers;
  for (const LeaseRequest& request : requests) pointers.push_back(&request);
  const auto results = this->queue().LeaseNextRuns(pointers);
  ASSERT_EQ(results.size(), 5u);
  const std::vector<std::string> expected = {a.run_ids[0], b.run_ids[0], a.run_ids[1],
                                             b.run_ids[1]};
  for (size_t i = 0; i < 4; ++i) {
    ASSERT_TRUE(results[i].ok() && results[i]->has_value()) << "request " << i;
    EXPECT_EQ((*results[i])->run.run_id(), expected[i]) << "request " << i;
    EXPECT_EQ((*results[i])->lease.worker_id(), requests[i].worker_id);
    EXPECT_EQ((*results[i])->lease.lease_epoch(), 1);
  }
  ASSERT_TRUE(results[4].ok()) << results[4].status();
  EXPECT_FALSE(results[4]->has_value()) << "four runs for five requests";
}

TYPED_TEST_P(StoreContractTest, UnknownWorkersAndRunsAreNotFoundWithTheirResource) {
  this->Sweep("unknown", 1);
  const std::string stranger = "7a1c3f6e-0000-4000-8000-0000000000aa";
  absl::StatusOr<std::optional<LeasedRun>> leased = this->queue().LeaseNextRun(this->Cpu(stranger));
  ASSERT_EQ(leased.status().code(), absl::StatusCode::kNotFound) << leased.status();
  const auto worker = this->template PayloadOf<google::rpc::ResourceInfo>(leased.status());
  EXPECT_EQ(worker.resource_type(), "parity.v1.Worker");
  EXPECT_EQ(worker.resource_name(), "workers/" + stranger);

  HeartbeatUpdate update;
  update.worker_id = this->Worker();
  update.run_id = "7a1c3f6e-0000-4000-8000-0000000000bb";
  update.lease_epoch = 1;
  update.ttl = absl::Seconds(60);
  absl::StatusOr<HeartbeatResult> beat = this->queue().Heartbeat(update);
  ASSERT_EQ(beat.status().code(), absl::StatusCode::kNotFound) << beat.status();
  EXPECT_EQ(this->template PayloadOf<google::rpc::ResourceInfo>(beat.status()).resource_type(),
            "parity.v1.Run");
}

TYPED_TEST_P(StoreContractTest, StaleEpochsAreRefusedAndWriteNothing) {
  this->Sweep("fencing", 1);
  const std::string worker = this->Worker();
  const LeasedRun leased = this->LeaseOne(worker);
  const std::string run_id = leased.run.run_id();
  HeartbeatUpdate update{worker, run_id,       leased.lease.lease_epoch() + 5,
                         10,     std::nullopt, absl::Seconds(60)};
  absl::StatusOr<HeartbeatResult> beat = this->queue().Heartbeat(update);
  ASSERT_EQ(beat.status().code(), absl::StatusCode::kFailedPrecondition) << beat.status();
  EXPECT_THAT(std::string(beat.status().message()), ::testing::HasSubstr("current is 1"));
  const auto failure = this->template PayloadOf<google::rpc::PreconditionFailure>(beat.status());
  ASSERT_EQ(failure.violations_size(), 1);
  EXPECT_EQ(failure.violations(0).type(), "LEASE_EPOCH");
  EXPECT_EQ(failure.violations(0).subject(), "runs/" + run_id);

  absl::StatusOr<MetricsAppendResult> stale =
      this->queue().AppendMetrics(run_id, 7, {this->Point(1), this->Point(2)});
  EXPECT_EQ(stale.status().code(), absl::StatusCode::kFailedPrecondition) << stale.status();
  absl::StatusOr<MetricsAppendResult> fresh = this->queue().AppendMetrics(
      run_id, leased.lease.lease_epoch(), {this->Point(1), this->Point(2)});
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  EXPECT_EQ(fresh->accepted, 2u) << "the stale append must have stored no point";

  absl::StatusOr<v1::Run> run = this->catalog().GetRun(run_id);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->state(), v1::RUN_STATE_LEASED) << "a stale heartbeat must not start the run";
}

TYPED_TEST_P(StoreContractTest, MetricsAreStoredOnceAndMoveTheRunsProgress) {
  this->Sweep("metrics", 1);
  const LeasedRun leased = this->LeaseOne(this->Worker());
  const std::string run_id = leased.run.run_id();
  const int64_t epoch = leased.lease.lease_epoch();
  absl::StatusOr<MetricsAppendResult> first =
      this->queue().AppendMetrics(run_id, epoch, {this->Point(1), this->Point(2), this->Point(3)});
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->accepted, 3u);
  v1::MetricPoint evaluated = this->Point(4);
  evaluated.set_val_bpc(1.5);
  absl::StatusOr<MetricsAppendResult> resent =
      this->queue().AppendMetrics(run_id, epoch, {this->Point(2), this->Point(3), evaluated});
  ASSERT_TRUE(resent.ok()) << resent.status();
  EXPECT_EQ(resent->accepted, 1u);
  EXPECT_EQ(resent->duplicates, 2u);
  absl::StatusOr<v1::Run> run = this->catalog().GetRun(run_id);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->latest_step(), 4u);
  EXPECT_DOUBLE_EQ(run->latest_val_bpc(), 1.5);
}

// A resume from an earlier checkpoint trains steps again: the newer lease's points replace the
// older lease's, a resend under the same lease changes nothing, and the run's progress is the
// latest lease's. A run that has ended takes no more points.
TYPED_TEST_P(StoreContractTest, ANewerLeasesPointsReplaceAnOlderLeasesAndAnEndedRunTakesNone) {
  this->Sweep("truth", 1);  // max_attempts 2
  const std::string worker = this->Worker();
  const LeasedRun first = this->LeaseOne(worker, absl::Milliseconds(100));
  const std::string run_id = first.run.run_id();
  absl::StatusOr<MetricsAppendResult> old_points = this->queue().AppendMetrics(
      run_id, first.lease.lease_epoch(), {this->Point(1), this->Point(2), this->Point(3)});
  ASSERT_TRUE(old_points.ok()) << old_points.status();
  this->harness_.LetTimePass(absl::Milliseconds(400));
  ASSERT_TRUE(this->queue().ReapExpiredLeases(100).ok());
  const LeasedRun second = this->LeaseOne(worker);
  ASSERT_EQ(second.run.run_id(), run_id);

  absl::StatusOr<MetricsAppendResult> again = this->queue().AppendMetrics(
      run_id, second.lease.lease_epoch(), {this->Point(1), this->Point(2)});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->accepted, 2u) << "the newer lease's points replace the older lease's";
  EXPECT_EQ(again->duplicates, 0u);
  absl::StatusOr<v1::Run> run = this->catalog().GetRun(run_id);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->latest_step(), 2u) << "progress is the latest lease's, below the older one's 3";

  absl::StatusOr<MetricsAppendResult> resent =
      this->queue().AppendMetrics(run_id, second.lease.lease_epoch(), {this->Point(2)});
  ASSERT_TRUE(resent.ok()) << resent.status();
  EXPECT_EQ(resent->accepted, 0u) << "a resend under the same lease changes nothing";
  EXPECT_EQ(this->queue()
                .AppendMetrics(run_id, first.lease.lease_epoch(), {this->Point(4)})
                .status()
                .code(),
            absl::StatusCode::kFailedPrecondition)
      << "the older lease is stale";

  Completion success;
  success.run_id = run_id;
  success.lease_epoch = second.lease.lease_epoch();
  success.success = core::PlannedSummary(second.run.spec(), 1.25, 1.25);
  ASSERT_TRUE(this->queue().CompleteRun(success).ok());
  const absl::Status late =
      this->queue().AppendMetrics(run_id, second.lease.lease_epoch(), {this->Point(3)}).status();
  EXPECT_EQ(late.code(), absl::StatusCode::kFailedPrecondition)
      << "a finished run must take no more points: " << late;
}

TYPED_TEST_P(StoreContractTest, CompletionsEndRunsOnceAndTheLastEndsTheSweep) {
  const CreatedSweep sweep = this->Sweep("complete", 2);
  const std::string worker = this->Worker();
  const LeasedRun first = this->LeaseOne(worker);
  const LeasedRun second = this->LeaseOne(worker);
  Completion success;
  success.run_id = first.run.run_id();
  success.lease_epoch = first.lease.lease_epoch();
  success.success = core::PlannedSummary(first.run.spec(), 1.25, 1.25);
  success.success->set_dataset_digest(std::string(64, 'd'));
  // The host's peak RSS, the device's peak and the planner's estimate, each in its own column.
  success.success->set_peak_memory_bytes(3'000'000'000);
  success.success->set_peak_device_memory_bytes(61'200'000'000);
  success.success->set_estimated_device_memory_bytes(58'000'000'000);
  absl::StatusOr<CompletionResult> done = this->queue().CompleteRun(success);
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->run.state(), v1::RUN_STATE_SUCCEEDED);
  EXPECT_DOUBLE_EQ(done->run.summary().final_val_bpc(), 1.25);
  EXPECT_EQ(done->run.summary().dataset_digest(), std::string(64, 'd'))
      << "the result keeps the digest of the dataset it trained on";
  absl::StatusOr<v1::Run> stored = this->catalog().GetRun(first.run.run_id());
  ASSERT_TRUE(stored.ok()) << stored.status();
  for (const v1::Run* run : {&done->run, &*stored}) {
    EXPECT_EQ(run->summary().peak_memory_bytes(), 3'000'000'000u) << "host peak RSS";
    EXPECT_EQ(run->summary().peak_device_memory_bytes(), 61'200'000'000u) << "device peak";
    EXPECT_EQ(run->summary().estimated_device_memory_bytes(), 58'000'000'000u)
        << "the planner's estimate beside it";
  }
  EXPECT_FALSE(done->run.has_lease()) << "an ended run holds no lease";
  absl::StatusOr<CompletionResult> again = this->queue().CompleteRun(success);
  ASSERT_TRUE(again.ok()) << "a repeated completion returns the run as it is: " << again.status();
  EXPECT_EQ(again->run.state(), v1::RUN_STATE_SUCCEEDED);

  Completion stale = success;
  stale.run_id = second.run.run_id();
  stale.lease_epoch = 9;
  EXPECT_EQ(this->queue().CompleteRun(stale).status().code(),
            absl::StatusCode::kFailedPrecondition);

  // A failure as the scheduler decided it: FAILED, the attempt not spent again.
  Completion failure;
  failure.run_id = second.run.run_id();
  failure.lease_epoch = second.lease.lease_epoch();
  failure.failure_class = v1::FAILURE_CLASS_USER_ERROR;
  failure.failure_status.set_message("bad config");
  failure.retry = {v1::RUN_STATE_FAILED, second.run.attempt(), absl::ZeroDuration()};
  failure.decided_at_attempt = second.run.attempt() + 1;
  EXPECT_EQ(this->queue().CompleteRun(failure).status().code(), absl::StatusCode::kAborted)
      << "a decision made for another attempt must not be applied";
  failure.decided_at_attempt = second.run.attempt();
  absl::StatusOr<CompletionResult> failed = this->queue().CompleteRun(failure);
  ASSERT_TRUE(failed.ok()) << failed.status();
  EXPECT_EQ(failed->run.state(), v1::RUN_STATE_FAILED);
  EXPECT_EQ(failed->run.failure_class(), v1::FAILURE_CLASS_USER_ERROR);
  EXPECT_EQ(failed->run.failure().message(), "bad config");

  absl::StatusOr<v1::Sweep> ended = this->catalog().GetSweep(sweep.sweep.sweep_id());
  ASSERT_TRUE(ended.ok()) << ended.status();
  EXPECT_EQ(ended->state(), v1::SWEEP_STATE_FAILED) << "a sweep with a failed run ends FAILED";
  EXPECT_EQ(ended->counts().succeeded(), 1u);
  EXPECT_EQ(ended->counts().failed(), 1u);
}

// A success is only what the plan asked for, whoever sends it: a summary with other steps or
// tokens, a non-finite BPC or FLOPs per token more than 1% off M changes nothing and says why.
TYPED_TEST_P(StoreContractTest, ASuccessOffItsPlanIsRefusedAndWritesNothing) {
  const CreatedSweep sweep = this->PlannedSweep("planned");
  const LeasedRun leased = this->LeaseOne(this->Worker());
  const v1::RunSpec& spec = leased.run.spec();
  ASSERT_EQ(spec.training().steps(), 200u) << "the leased run must carry its plan";
  Completion bad;
  bad.run_id = leased.run.run_id();
  bad.lease_epoch = leased.lease.lease_epoch();
  bad.success = core::PlannedSummary(spec, 1.5, 1.5);
  bad.success->set_steps(150);
  bad.success->set_tokens(1);
  bad.success->set_final_val_bpc(std::numeric_limits<double>::quiet_NaN());
  bad.success->set_measured_flops_per_token(1.02e7);
  absl::StatusOr<CompletionResult> refused = this->queue().CompleteRun(bad);
  ASSERT_TRUE(refused.ok()) << refused.status();
  EXPECT_THAT(refused->invalid_summary, ::testing::HasSubstr("steps 150, planned 200"));
  EXPECT_THAT(refused->invalid_summary, ::testing::HasSubstr("tokens 1, planned 819200"));
  EXPECT_THAT(refused->invalid_summary, ::testing::HasSubstr("final BPC"));
  EXPECT_THAT(refused->invalid_summary, ::testing::HasSubstr("FLOPs per token"));
  EXPECT_EQ(refused->run.state(), v1::RUN_STATE_LEASED) << "a refused success writes nothing";
  absl::StatusOr<v1::Run> stored = this->catalog().GetRun(leased.run.run_id());
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(stored->state(), v1::RUN_STATE_LEASED);
  EXPECT_EQ(stored->lease().lease_epoch(), leased.lease.lease_epoch());
  EXPECT_FALSE(stored->has_summary());

  Completion close = bad;  // within 1% of M and otherwise the plan: a success
  close.success = core::PlannedSummary(spec, 1.5, 1.6);
  close.success->set_measured_flops_per_token(1.009e7);
  absl::StatusOr<CompletionResult> done = this->queue().CompleteRun(close);
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->invalid_summary, "");
  EXPECT_EQ(done->run.state(), v1::RUN_STATE_SUCCEEDED);
  absl::StatusOr<v1::Sweep> ended = this->catalog().GetSweep(sweep.sweep.sweep_id());
  ASSERT_TRUE(ended.ok()) << ended.status();
  EXPECT_EQ(ended->state(), v1::SWEEP_STATE_SUCCEEDED);
}

// An attempt that resumed from the final checkpoint trains no step and counts no FLOPs: its
// measured M of 0 is not a disagreement.
TYPED_TEST_P(StoreContractTest, AnAttemptResumedFromTheFinalCheckpointMayCountNoFlops) {
  this->PlannedSweep("resumed-final");
  const std::string worker = this->Worker();
  const LeasedRun leased = this->LeaseOne(worker);
  HeartbeatUpdate update;
  update.worker_id = worker;
  update.run_id = leased.run.run_id();
  update.lease_epoch = leased.lease.lease_epoch();
  update.step = 200;
  update.checkpoint.emplace().set_step(200);
  update.checkpoint->set_uri("/ckpt/200");
  update.ttl = absl::Seconds(60);
  ASSERT_TRUE(this->queue().Heartbeat(update).ok());
  Completion success;
  success.run_id = leased.run.run_id();
  success.lease_epoch = leased.lease.lease_epoch();
  success.success = core::PlannedSummary(leased.run.spec(), 1.5, 1.5);
  success.success->set_measured_flops_per_token(0);
  absl::StatusOr<CompletionResult> done = this->queue().CompleteRun(success);
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->invalid_summary, "");
  EXPECT_EQ(done->run.state(), v1::RUN_STATE_SUCCEEDED);
}

// The store keeps the run's preemption count as the decision says (the cap is the scheduler's).
TYPED_TEST_P(StoreContractTest, AFailureStoresTheRunsPreemptions) {
  this->Sweep("preempted", 1);
  const std::string worker = this->Worker();
  const LeasedRun leased = this->LeaseOne(worker);
  EXPECT_EQ(leased.run.preemptions(), 0u);
  Completion preempted;
  preempted.run_id = leased.run.run_id();
  preempted.lease_epoch = leased.lease.lease_epoch();
  preempted.failure_class = v1::FAILURE_CLASS_PREEMPTED;
  preempted.retry = {v1::RUN_STATE_PENDING, leased.run.attempt(), absl::ZeroDuration(), 1};
  preempted.decided_at_attempt = leased.run.attempt();
  absl::StatusOr<CompletionResult> requeued = this->queue().CompleteRun(preempted);
  ASSERT_TRUE(requeued.ok()) << requeued.status();
  EXPECT_EQ(requeued->run.preemptions(), 1u);
  EXPECT_EQ(requeued->run.attempt(), leased.run.attempt()) << "the attempt is not spent";
  const LeasedRun again = this->LeaseOne(worker);
  EXPECT_EQ(again.run.preemptions(), 1u) << "a lease shows the run's preemptions";
}

// Deleting a sweep is for ended ones (a live run's worker still writes): refused while a run
// may train, with nothing deleted; then the sweep and its runs are gone, and a second delete is
// NOT_FOUND.
TYPED_TEST_P(StoreContractTest, OnlyAnEndedSweepIsDeletedAndItsRunsGoWithIt) {
  const CreatedSweep sweep = this->Sweep("delete", 2);
  const CreatedSweep other = this->Sweep("delete-other", 1);
  const LeasedRun leased = this->LeaseOne(this->Worker());
  ASSERT_EQ(leased.run.sweep_id(), sweep.sweep.sweep_id());
  const absl::Status refused = this->catalog().DeleteSweep(sweep.sweep.sweep_id()).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition) << refused;
  EXPECT_TRUE(this->catalog().GetRun(sweep.run_ids[1]).ok()) << "a refused delete deletes nothing";

  ASSERT_TRUE(this->catalog().CancelSweep(sweep.sweep.sweep_id(), "done with it").ok());
  Completion stopped;
  stopped.run_id = leased.run.run_id();
  stopped.lease_epoch = leased.lease.lease_epoch();
  stopped.failure_class = v1::FAILURE_CLASS_PREEMPTED;
  stopped.retry = {v1::RUN_STATE_PENDING, leased.run.attempt(), absl::ZeroDuration(), 1};
  stopped.decided_at_attempt = leased.run.attempt();
  ASSERT_TRUE(this->queue().CompleteRun(stopped).ok());  // cancellation wins: CANCELLED

  absl::StatusOr<uint32_t> deleted = this->catalog().DeleteSweep(sweep.sweep.sweep_id());
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_EQ(*deleted, 2u);
  EXPECT_EQ(this->catalog().GetSweep(sweep.sweep.sweep_id()).status().code(),
            absl::StatusCode::kNotFound);
  for (const std::string& run_id : sweep.run_ids) {
    EXPECT_EQ(this->catalog().GetRun(run_id).status().code(), absl::StatusCode::kNotFound)
        << "run " << run_id << " must go with its sweep";
  }
  EXPECT_TRUE(this->catalog().GetRun(other.run_ids[0]).ok()) << "another sweep's run stays";
  EXPECT_EQ(this->catalog().DeleteSweep(sweep.sweep.sweep_id()).status().code(),
            absl::StatusCode::kNotFound);
}

// Telemetry retention: an ended sweep's curves are thinned once it is old enough (evaluations
// and the last point stay), a live sweep's never; a worker unseen for long is forgotten unless
// it holds a live lease.
TYPED_TEST_P(StoreContractTest, RetentionThinsOldEndedCurvesOnceAndForgetsUnseenWorkers) {
  this->Sweep("retention-live", 1);
  const std::string holder = this->Worker();
  const LeasedRun live = this->LeaseOne(holder);
  this->Sweep("retention-ended", 1);
  const std::string idle = this->Worker();
  const LeasedRun ended = this->LeaseOne(idle);
  std::vector<v1::MetricPoint> points;
  for (uint64_t step = 1; step <= 30; ++step) {
    points.push_back(this->Point(step));
    if (step % 10 == 0) points.back().set_val_bpc(2.5);  // evaluations at 10, 20, 30
  }
  for (const LeasedRun* run : {&live, &ended}) {
    ASSERT_TRUE(
        this->queue().AppendMetrics(run->run.run_id(), run->lease.lease_epoch(), points).ok());
  }
  Completion success;
  success.run_id = ended.run.run_id();
  success.lease_epoch = ended.lease.lease_epoch();
  success.success = core::PlannedSummary(ended.run.spec(), 2.5, 2.0);
  ASSERT_TRUE(this->queue().CompleteRun(success).ok());

  RetentionPolicy policy;
  policy.metrics_full = absl::Milliseconds(100);
  policy.thinned_points = 5;
  policy.events = absl::Milliseconds(100);
  policy.workers = absl::Hours(1);
  absl::StatusOr<RetentionResult> early = this->retention().ApplyRetention(policy);
  ASSERT_TRUE(early.ok()) << early.status();
  EXPECT_EQ(early->sweeps_thinned, 0) << "the sweep ended too recently to be thinned";
  this->harness_.LetTimePass(absl::Milliseconds(400));

  absl::StatusOr<RetentionResult> thinned = this->retention().ApplyRetention(policy);
  ASSERT_TRUE(thinned.ok()) << thinned.status();
  EXPECT_EQ(thinned->sweeps_thinned, 1) << "only the ended sweep";
  // 30 points, every 6th kept (steps 1, 7, 13, 19, 25) and the evaluations 10, 20, 30: 8 stay.
  EXPECT_EQ(thinned->points_deleted, 22);
  EXPECT_EQ(thinned->sweeps_pruned, 1);
  EXPECT_EQ(thinned->workers_deleted, 0);
  absl::StatusOr<RetentionResult> again = this->retention().ApplyRetention(policy);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->sweeps_thinned, 0) << "a sweep is thinned once";
  EXPECT_EQ(again->points_deleted, 0);
  absl::StatusOr<MetricsAppendResult> still_live =
      this->queue().AppendMetrics(live.run.run_id(), live.lease.lease_epoch(), points);
  ASSERT_TRUE(still_live.ok()) << still_live.status();
  EXPECT_EQ(still_live->accepted, 0u) << "a live run's curve keeps every point";

  policy.workers = absl::Milliseconds(100);
  absl::StatusOr<RetentionResult> forgotten = this->retention().ApplyRetention(policy);
  ASSERT_TRUE(forgotten.ok()) << forgotten.status();
  EXPECT_EQ(forgotten->workers_deleted, 1) << "the idle worker goes, the lease holder stays";
  WorkersQuery query;
  query.seen_within = absl::Hours(1);
  absl::StatusOr<Page<v1::Worker>> workers = this->catalog().ListWorkers(query);
  ASSERT_TRUE(workers.ok()) << workers.status();
  std::vector<std::string> ids;
  for (const v1::Worker& worker : workers->items) ids.push_back(worker.worker_id());
  EXPECT_THAT(ids, ::testing::ElementsAre(holder)) << "the holder of a live lease is kept";
}

TYPED_TEST_P(StoreContractTest, ARetryWaitsItsDelayWithTheNextAttempt) {
  this->Sweep("retry", 1);
  const std::string worker = this->Worker();
  const LeasedRun leased = this->LeaseOne(worker);
  Completion failure;
  failure.run_id = leased.run.run_id();
  failure.lease_epoch = leased.lease.lease_epoch();
  failure.failure_class = v1::FAILURE_CLASS_INFRASTRUCTURE;
  failure.retry = {v1::RUN_STATE_PENDING, leased.run.attempt() + 1, absl::Milliseconds(300)};
  failure.decided_at_attempt = leased.run.attempt();
  absl::StatusOr<CompletionResult> requeued = this->queue().CompleteRun(failure);
  ASSERT_TRUE(requeued.ok()) << requeued.status();
  EXPECT_EQ(requeued->run.state(), v1::RUN_STATE_PENDING);
  EXPECT_EQ(requeued->run.attempt(), leased.run.attempt() + 1);
  EXPECT_EQ(requeued->retry_delay, absl::Milliseconds(300));
  absl::StatusOr<std::optional<LeasedRun>> early = this->queue().LeaseNextRun(this->Cpu(worker));
  ASSERT_TRUE(early.ok()) << early.status();
  EXPECT_FALSE(early->has_value()) << "the retry delay has not passed";
  this->harness_.LetTimePass(absl::Milliseconds(600));
  const LeasedRun again = this->LeaseOne(worker);
  EXPECT_EQ(again.run.run_id(), leased.run.run_id());
  EXPECT_EQ(again.lease.lease_epoch(), leased.lease.lease_epoch() + 1) << "a new fencing token";
}

TYPED_TEST_P(StoreContractTest, TheReaperRequeuesExpiredLeasesThenFailsThem) {
  this->Sweep("reap", 1);  // max_attempts 2
  const std::string worker = this->Worker();
  const LeasedRun first = this->LeaseOne(worker, absl::Milliseconds(100));
  this->harness_.LetTimePass(absl::Milliseconds(400));
  absl::StatusOr<ReapResult> reaped = this->queue().ReapExpiredLeases(100);
  ASSERT_TRUE(reaped.ok()) << reaped.status();
  EXPECT_EQ(reaped->requeued, 1);
  absl::StatusOr<v1::Run> run = this->catalog().GetRun(first.run.run_id());
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->state(), v1::RUN_STATE_PENDING);
  EXPECT_EQ(run->attempt(), 2u);

  this->LeaseOne(worker, absl::Milliseconds(100));
  this->harness_.LetTimePass(absl::Milliseconds(400));
  reaped = this->queue().ReapExpiredLeases(100);
  ASSERT_TRUE(reaped.ok()) << reaped.status();
  EXPECT_EQ(reaped->failed, 1) << "the last attempt expired";
  run = this->catalog().GetRun(first.run.run_id());
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->state(), v1::RUN_STATE_FAILED);
  EXPECT_EQ(run->failure_class(), v1::FAILURE_CLASS_LEASE_EXPIRED);
}

// A holder slow to report (its lease reaped, the run requeued, no one leased it since) still
// finishes the work: its success is recorded, not answered OK and dropped (bench/load found the
// run trained again). Once another lease holds the run, the old holder's success is stale.
TYPED_TEST_P(StoreContractTest, ASuccessAfterTheReaperRequeuedTheRunIsRecordedUntilReleased) {
  const CreatedSweep sweep = this->Sweep("late", 2);  // max_attempts 2
  const std::string worker = this->Worker();
  const LeasedRun slow = this->LeaseOne(worker, absl::Milliseconds(100));
  this->harness_.LetTimePass(absl::Milliseconds(400));
  absl::StatusOr<ReapResult> reaped = this->queue().ReapExpiredLeases(100);
  ASSERT_TRUE(reaped.ok()) << reaped.status();
  ASSERT_EQ(reaped->requeued, 1);

  Completion late;
  late.run_id = slow.run.run_id();
  late.lease_epoch = slow.lease.lease_epoch();
  late.success = core::PlannedSummary(slow.run.spec(), 1.5, 1.5);
  absl::StatusOr<CompletionResult> done = this->queue().CompleteRun(late);
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->run.state(), v1::RUN_STATE_SUCCEEDED)
      << "the requeued run's finished work should be recorded";
  EXPECT_DOUBLE_EQ(done->run.summary().final_val_bpc(), 1.5);

  // The other run: reaped, then leased again before the old holder reports.
  const LeasedRun other = this->LeaseOne(worker, absl::Milliseconds(100));
  this->harness_.LetTimePass(absl::Milliseconds(400));
  ASSERT_TRUE(this->queue().ReapExpiredLeases(100).ok());
  const LeasedRun again = this->LeaseOne(worker);
  ASSERT_EQ(again.run.run_id(), other.run.run_id());
  Completion stale;
  stale.run_id = other.run.run_id();
  stale.lease_epoch = other.lease.lease_epoch();
  stale.success = core::PlannedSummary(other.run.spec(), 1.5, 1.5);
  EXPECT_EQ(this->queue().CompleteRun(stale).status().code(), absl::StatusCode::kFailedPrecondition)
      << "a newer lease holds the run";
  Completion current = stale;
  current.lease_epoch = again.lease.lease_epoch();
  absl::StatusOr<CompletionResult> ended = this->queue().CompleteRun(current);
  ASSERT_TRUE(ended.ok()) << ended.status();
  absl::StatusOr<v1::Sweep> after = this->catalog().GetSweep(sweep.sweep.sweep_id());
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->state(), v1::SWEEP_STATE_SUCCEEDED) << "both runs ended, so did the sweep";
}

TYPED_TEST_P(StoreContractTest, CancellingEndsPendingRunsAndLiveOnesAtTheirHeartbeat) {
  const CreatedSweep sweep = this->Sweep("cancel", 3);
  const std::string worker = this->Worker();
  const LeasedRun live = this->LeaseOne(worker);
  absl::StatusOr<CancelResult> cancelled =
      this->catalog().CancelSweep(sweep.sweep.sweep_id(), "stop");
  ASSERT_TRUE(cancelled.ok()) << cancelled.status();
  EXPECT_EQ(cancelled->cancelled_runs, 3u) << "two pending runs ended, one live run flagged";
  EXPECT_EQ(cancelled->sweep.state(), v1::SWEEP_STATE_CANCELLED);
  HeartbeatUpdate update{worker, live.run.run_id(), live.lease.lease_epoch(),
                         5,      std::nullopt,      absl::Seconds(60)};
  absl::StatusOr<HeartbeatResult> beat = this->queue().Heartbeat(update);
  ASSERT_TRUE(beat.ok()) << beat.status();
  EXPECT_TRUE(beat->cancel_requested);
  absl::StatusOr<v1::Run> run = this->catalog().GetRun(live.run.run_id());
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->state(), v1::RUN_STATE_CANCELLED);
  EXPECT_EQ(this->catalog().CancelSweep("7a1c3f6e-0000-4000-8000-0000000000cc", "").status().code(),
            absl::StatusCode::kNotFound);
}

TYPED_TEST_P(StoreContractTest, IdempotencyKeysReturnTheStoredSweepOrRefuseAnotherSpec) {
  const CreatedSweep first = this->Sweep("keyed", 2, 0, "contract-key");
  const CreatedSweep repeat = this->Sweep("keyed", 2, 0, "contract-key");
  EXPECT_TRUE(repeat.deduplicated);
  EXPECT_EQ(repeat.sweep.sweep_id(), first.sweep.sweep_id());
  EXPECT_EQ(repeat.run_ids, first.run_ids);
  NewSweep other;
  other.spec.set_name("another");
  other.idempotency_key = "contract-key";
  EXPECT_EQ(this->catalog().CreateSweep(other).status().code(), absl::StatusCode::kAlreadyExists);
}

TYPED_TEST_P(StoreContractTest, RunsPageInGridOrderAndBadTokensAreRefused) {
  const CreatedSweep sweep = this->Sweep("paged", 5);
  std::vector<std::string> seen;
  PageRequest page{2, ""};
  for (int pages = 0; pages < 5; ++pages) {
    absl::StatusOr<Page<v1::Run>> runs = this->catalog().ListRuns(sweep.sweep.sweep_id(), {}, page);
    ASSERT_TRUE(runs.ok()) << runs.status();
    for (const v1::Run& run : runs->items) seen.push_back(run.run_id());
    if (runs->next_page_token.empty()) break;
    page.page_token = runs->next_page_token;
  }
  EXPECT_EQ(seen, sweep.run_ids);
  absl::StatusOr<Page<v1::Run>> bad =
      this->catalog().ListRuns(sweep.sweep.sweep_id(), {}, PageRequest{2, "%%not-a-token"});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
}

// Evaluation sets (migration 0015): a point's BPC per set is stored with the point, and a
// success's final BPC per set and dataset digest come back with the run.
TYPED_TEST_P(StoreContractTest, EvaluationSetsAreStoredWithPointsAndSummaries) {
  this->Sweep("eval-sets", 1);
  const LeasedRun leased = this->LeaseOne(this->Worker());
  const std::string run_id = leased.run.run_id();
  v1::MetricPoint evaluated = this->Point(10);
  evaluated.set_val_bpc(1.93);
  (*evaluated.mutable_eval_bpc())["validation"] = 1.93;
  (*evaluated.mutable_eval_bpc())["code"] = 2.41;
  absl::StatusOr<MetricsAppendResult> stored =
      this->queue().AppendMetrics(run_id, leased.lease.lease_epoch(), {this->Point(9), evaluated});
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(stored->accepted, 2u);
  Completion success;
  success.run_id = run_id;
  success.lease_epoch = leased.lease.lease_epoch();
  success.success = core::PlannedSummary(leased.run.spec(), 1.9, 2.0);
  (*success.success->mutable_final_eval_bpc())["validation"] = 1.9;
  (*success.success->mutable_final_eval_bpc())["code"] = 2.4;
  success.success->set_dataset_digest(std::string(64, 'c'));
  absl::StatusOr<CompletionResult> done = this->queue().CompleteRun(success);
  ASSERT_TRUE(done.ok()) << done.status();
  absl::StatusOr<v1::Run> run = this->catalog().GetRun(run_id);
  ASSERT_TRUE(run.ok()) << run.status();
  ASSERT_EQ(run->summary().final_eval_bpc_size(), 2) << run->summary().DebugString();
  EXPECT_DOUBLE_EQ(run->summary().final_eval_bpc().at("validation"), 1.9);
  EXPECT_DOUBLE_EQ(run->summary().final_eval_bpc().at("code"), 2.4);
  EXPECT_EQ(run->summary().dataset_digest(), std::string(64, 'c'));
  EXPECT_DOUBLE_EQ(run->latest_val_bpc(), 1.93) << "val_bpc stays the primary set's";
  EXPECT_EQ(run->summary().peak_device_memory_bytes(), 0u) << "not reported: read back as 0";
  EXPECT_EQ(run->summary().estimated_device_memory_bytes(), 0u) << "not reported: no estimate";
}

#include "tests/scheduler/store_contract_datasets.h"  // IWYU pragma: keep

REGISTER_TYPED_TEST_SUITE_P(
    StoreContractTest, LeasesByPriorityThenFairShareThenAgeInGridOrder,
    ABatchLeasesWhatOneLeaseAfterAnotherWould, UnknownWorkersAndRunsAreNotFoundWithTheirResource,
    StaleEpochsAreRefusedAndWriteNothing, MetricsAreStoredOnceAndMoveTheRunsProgress,
    ANewerLeasesPointsReplaceAnOlderLeasesAndAnEndedRunTakesNone,
    CompletionsEndRunsOnceAndTheLastEndsTheSweep, ASuccessOffItsPlanIsRefusedAndWritesNothing,
    AnAttemptResumedFromTheFinalCheckpointMayCountNoFlops, AFailureStoresTheRunsPreemptions,
    OnlyAnEndedSweepIsDeletedAndItsRunsGoWithIt,
    RetentionThinsOldEndedCurvesOnceAndForgetsUnseenWorkers, ARetryWaitsItsDelayWithTheNextAttempt,
    TheReaperRequeuesExpiredLeasesThenFailsThem,
    ASuccessAfterTheReaperRequeuedTheRunIsRecordedUntilReleased,
    CancellingEndsPendingRunsAndLiveOnesAtTheirHeartbeat,
    IdempotencyKeysReturnTheStoredSweepOrRefuseAnotherSpec,
    RunsPageInGridOrderAndBadTokensAreRefused, EvaluationSetsAreStoredWithPointsAndSummaries,
    AWorkersDatasetsAreListedAsLastRegisteredAndDataMismatchIsStored,
    APinnedRunGoesOnlyToAWorkerHoldingItsCopy);

}  // namespace parity::server::testing
