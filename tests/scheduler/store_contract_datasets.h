// The store contract's dataset cases (issue #24): what a worker holds, DATA_MISMATCH stored, and
// a pinned run leased only to a worker holding its copy. Part of StoreContractTest: included by
// store_contract_test.h before the suite is registered, never on its own.
#pragma once

// What a worker holds (issue #24) is listed as it last registered it, and a run failed because
// its copy differs is stored with that class (migration 0016 admits it).
TYPED_TEST_P(StoreContractTest, AWorkersDatasetsAreListedAsLastRegisteredAndDataMismatchIsStored) {
  WorkerRegistration registration;
  registration.hostname = "holder";
  v1::DatasetHolding held;
  held.set_name("tiny");
  held.set_digest(std::string(64, 'a'));
  held.set_train_tokens(128);
  held.set_vocab_size(256);
  held.add_eval_sets("validation");
  registration.datasets = {held};
  absl::StatusOr<v1::Worker> registered = this->queue().RegisterWorker(registration);
  ASSERT_TRUE(registered.ok()) << registered.status();
  WorkersQuery query;
  query.seen_within = absl::Hours(1);
  absl::StatusOr<Page<v1::Worker>> workers = this->catalog().ListWorkers(query);
  ASSERT_TRUE(workers.ok()) << workers.status();
  ASSERT_EQ(workers->items.size(), 1u);
  ASSERT_EQ(workers->items[0].datasets_size(), 1);
  EXPECT_EQ(workers->items[0].datasets(0).DebugString(), held.DebugString());

  registration.worker_id = registered->worker_id();
  registration.datasets.clear();
  ASSERT_TRUE(this->queue().RegisterWorker(registration).ok());
  workers = this->catalog().ListWorkers(query);
  ASSERT_TRUE(workers.ok()) << workers.status();
  EXPECT_EQ(workers->items[0].datasets_size(), 0) << "a re-registration replaces the holdings";

  this->Sweep("mismatch", 1);
  const LeasedRun leased = this->LeaseOne(registered->worker_id());
  Completion failure;
  failure.run_id = leased.run.run_id();
  failure.lease_epoch = leased.lease.lease_epoch();
  failure.failure_class = v1::FAILURE_CLASS_DATA_MISMATCH;
  failure.retry = {v1::RUN_STATE_FAILED, leased.run.attempt(), absl::ZeroDuration()};
  failure.decided_at_attempt = leased.run.attempt();
  absl::StatusOr<CompletionResult> failed = this->queue().CompleteRun(failure);
  ASSERT_TRUE(failed.ok()) << failed.status();
  EXPECT_EQ(failed->run.state(), v1::RUN_STATE_FAILED);
  absl::StatusOr<v1::Run> stored = this->catalog().GetRun(leased.run.run_id());
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(stored->failure_class(), v1::FAILURE_CLASS_DATA_MISMATCH);
}

// A run pinned to a dataset digest goes only to a worker that holds that copy (migration 0024):
// a worker with another copy, or none, gets no such run (it would fail it as DATA_MISMATCH,
// never retried), and an unpinned run still goes to anyone.
TYPED_TEST_P(StoreContractTest, APinnedRunGoesOnlyToAWorkerHoldingItsCopy) {
  const std::string ours(64, 'a'), theirs(64, 'b');
  auto worker_holding = [&](const std::string& digest) {
    WorkerRegistration registration;
    registration.hostname = "holder-" + digest.substr(0, 1);
    v1::DatasetHolding held;
    held.set_name("tiny");
    held.set_digest(digest);
    registration.datasets = {held};
    absl::StatusOr<v1::Worker> worker = this->queue().RegisterWorker(registration);
    EXPECT_TRUE(worker.ok()) << worker.status();
    return worker.ok() ? worker->worker_id() : std::string();
  };
  const std::string other = worker_holding(theirs), holder = worker_holding(ours);
  const std::string bare = this->Worker();
  NewSweep sweep;
  sweep.spec.set_name("pinned");
  sweep.spec.set_max_attempts(2);
  for (int i = 0; i < 2; ++i) {
    v1::RunSpec& run = sweep.runs.emplace_back();
    run.set_name("pinned-" + std::to_string(i));
    run.mutable_resources()->set_cpu_threads(1);
    run.mutable_data()->set_corpus("tiny");
    run.mutable_data()->set_dataset_digest(ours);
  }
  ASSERT_TRUE(this->catalog().CreateSweep(sweep).ok());
  for (const std::string& worker : {other, bare}) {
    absl::StatusOr<std::optional<LeasedRun>> none = this->queue().LeaseNextRun(this->Cpu(worker));
    ASSERT_TRUE(none.ok()) << none.status();
    EXPECT_FALSE(none->has_value())
        << "a worker without the pinned copy must not lease the run, got "
        << (none->has_value() ? (*none)->run.spec().name() : "");
  }
  const std::vector<LeaseRequest> batch = {this->Cpu(holder), this->Cpu(other)};
  std::vector<const LeaseRequest*> requests = {&batch[0], &batch[1]};
  std::vector<absl::StatusOr<std::optional<LeasedRun>>> leased =
      this->queue().LeaseNextRuns(requests);
  ASSERT_EQ(leased.size(), 2u);
  ASSERT_TRUE(leased[1].ok() && !leased[1]->has_value())
      << "in a batch, the worker with the other copy still gets none";
  const LeasedRun first = this->LeaseOne(holder);
  EXPECT_EQ(first.run.spec().data().dataset_digest(), ours);
  this->Sweep("unpinned", 1);
  EXPECT_EQ(this->LeaseOne(other).run.spec().name(), "unpinned-0")
      << "an unpinned run goes to any worker";
}
