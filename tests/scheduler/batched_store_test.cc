// Leases and completions in batches (RunStore::LeaseNextRuns / CompleteRuns, server/sql/)
// against a real PostgreSQL: a batch must answer each request as if it had come alone.
#include <pqxx/pqxx>
#include <set>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "tests/scheduler/scheduler_fixture.h"

namespace parity::server::testing {
namespace {

using ::testing::ElementsAre;

class BatchedStoreTest : public SchedulerTest {
 protected:
  LeaseRequest CpuRequest(const std::string& worker_id) {
    LeaseRequest request;
    request.worker_id = worker_id;
    request.offer.cpu_threads = 4;
    request.ttl = absl::Seconds(30);
    return request;
  }

  std::vector<absl::StatusOr<std::optional<LeasedRun>>> Lease(
      const std::vector<LeaseRequest>& requests) {
    std::vector<const LeaseRequest*> pointers;
    for (const LeaseRequest& request : requests) pointers.push_back(&request);
    return store_->LeaseNextRuns(pointers);
  }

  std::vector<absl::StatusOr<CompletionResult>> Complete(
      const std::vector<Completion>& completions) {
    std::vector<const Completion*> pointers;
    for (const Completion& completion : completions) pointers.push_back(&completion);
    return store_->CompleteRuns(pointers);
  }

  static Completion Success(const LeasedRun& leased, double val_bpc) {
    Completion completion;
    completion.run_id = leased.run.run_id();
    completion.lease_epoch = leased.lease.lease_epoch();
    completion.success = core::PlannedSummary(leased.run.spec(), val_bpc, val_bpc);
    return completion;
  }
};

TEST_F(BatchedStoreTest, OneBatchSharesRunsAsLeasingOneAtATimeWould) {
  const std::string a = Submit(MakeSweepSpec("batch-a", 3)).sweep().sweep_id();
  const std::string b = Submit(MakeSweepSpec("batch-b", 3)).sweep().sweep_id();
  const std::string c = Submit(MakeSweepSpec("batch-c", 1)).sweep().sweep_id();
  std::vector<LeaseRequest> requests;
  for (int i = 0; i < 6; ++i) requests.push_back(CpuRequest(Register()));
  const auto results = Lease(requests);
  std::vector<std::string> sweeps;
  std::vector<int> ordinals;
  for (const auto& result : results) {
    ASSERT_TRUE(result.ok()) << result.status();
    ASSERT_TRUE(result->has_value()) << "expected every request of the batch to get a run";
    sweeps.push_back((*result)->run.sweep_id());
    EXPECT_EQ((*result)->lease.worker_id(), requests[sweeps.size() - 1].worker_id)
        << "expected each run leased to the worker that asked for it";
    EXPECT_EQ((*result)->lease.lease_epoch(), 1);
  }
  // Fair share, oldest first on ties: a, b, c each get one, then a and b a second, then a
  // (c has no run left).
  EXPECT_THAT(sweeps, ElementsAre(a, b, c, a, b, a));
  // Within a sweep, grid order.
  EXPECT_EQ((*results[0])->run.spec().name(), "dense-1C-0");
  EXPECT_EQ((*results[3])->run.spec().name(), "moe-1");
  EXPECT_EQ((*results[5])->run.spec().name(), "moe-2");
  EXPECT_EQ(Sql(database_url_, "SELECT count(*) FROM events WHERE to_state = 'LEASED'"), "6");
}

// Runs another transaction holds (another scheduler's batch, the reaper) are skipped: the
// sweep's next run is taken in its place, and a sweep with none left free gives its share up
// to the others in the same call.
TEST_F(BatchedStoreTest, RunsHeldElsewhereAreSkippedAndAShortSweepsShareGoesToTheOthers) {
  const std::string a = Submit(MakeSweepSpec("held-a", 3)).sweep().sweep_id();
  const std::string b = Submit(MakeSweepSpec("held-b", 3)).sweep().sweep_id();
  pqxx::connection holder(database_url_);
  pqxx::work held(holder);
  held.exec("SELECT 1 FROM runs WHERE sweep_id = '" + a + "' AND ordinal = 0 FOR UPDATE");

  const auto first = Lease({CpuRequest(Register())});
  ASSERT_TRUE(first[0].ok() && first[0]->has_value()) << "expected a run";
  EXPECT_EQ((*first[0])->run.sweep_id(), a) << "the oldest sweep's turn";
  EXPECT_EQ((*first[0])->run.spec().name(), "moe-1")
      << "expected the held first run skipped for the next in grid order";

  held.exec("SELECT 1 FROM runs WHERE sweep_id = '" + a + "' FOR UPDATE");
  const auto second = Lease({CpuRequest(Register()), CpuRequest(Register())});
  for (const auto& result : second) {
    ASSERT_TRUE(result.ok() && result->has_value())
        << "expected both requests served although a's runs are all held";
    EXPECT_EQ((*result)->run.sweep_id(), b);
  }
  held.abort();

  const auto third = Lease({CpuRequest(Register())});
  ASSERT_TRUE(third[0].ok() && third[0]->has_value());
  EXPECT_EQ((*third[0])->run.sweep_id(), a) << "released, a has fewer live runs than b";
  EXPECT_EQ((*third[0])->run.spec().name(), "dense-1C-0") << "its held first run, now free";
}

TEST_F(BatchedStoreTest, UnknownWorkersFailAloneAndTheOthersAreServed) {
  Submit(MakeSweepSpec("batch-unknown", 4));
  std::vector<LeaseRequest> requests = {CpuRequest(Register()),
                                        CpuRequest("7a1c3f6e-0000-4000-8000-000000000000"),
                                        CpuRequest("not-a-uuid"), CpuRequest(Register())};
  const auto results = Lease(requests);
  ASSERT_TRUE(results[0].ok() && results[0]->has_value()) << results[0].status();
  EXPECT_EQ(results[1].status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(results[2].status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(results[3].ok() && results[3]->has_value()) << results[3].status();
  EXPECT_NE((*results[0])->run.run_id(), (*results[3])->run.run_id());
  EXPECT_EQ(Sql(database_url_, "SELECT count(*) FROM runs WHERE state = 'LEASED'"), "2");
}

TEST_F(BatchedStoreTest, RequestsWithDifferentDevicesEachGetARunThatFits) {
  Submit(MakeSweepSpec("batch-cpu", 1));
  Submit(MakeSweepSpec("batch-gpu", 1, /*gpus=*/2));
  LeaseRequest gpu = CpuRequest(Register({GpuDevice(0), GpuDevice(1)}));
  gpu.offer.gpus = {{3, 40ull << 30}, {5, 0}};
  gpu.offer.cpu_threads = 0;  // its CPU is busy: only the GPU run fits
  LeaseRequest one_gpu = CpuRequest(Register({GpuDevice(0)}));
  one_gpu.offer.gpus = {{0, 0}};
  one_gpu.offer.cpu_threads = 0;
  const LeaseRequest cpu = CpuRequest(Register());
  const auto results = Lease({gpu, one_gpu, cpu});
  ASSERT_TRUE(results[0].ok() && results[0]->has_value()) << results[0].status();
  EXPECT_EQ((*results[0])->run.spec().resources().gpus(), 2u);
  EXPECT_THAT((*results[0])->lease.device_indices(), ElementsAre(5u, 3u))
      << "expected the unknown-memory GPU first, then the 40 GiB one";
  ASSERT_TRUE(results[1].ok());
  EXPECT_FALSE(results[1]->has_value()) << "one GPU and no CPU threads fit neither run";
  ASSERT_TRUE(results[2].ok() && results[2]->has_value()) << results[2].status();
  EXPECT_EQ((*results[2])->run.spec().resources().gpus(), 0u);
}

TEST_F(BatchedStoreTest, ABatchLargerThanTheQueueLeasesEachRunOnce) {
  Submit(MakeSweepSpec("batch-small", 3));
  std::vector<LeaseRequest> requests;
  for (int i = 0; i < 5; ++i) requests.push_back(CpuRequest(Register()));
  const auto results = Lease(requests);
  std::set<std::string> runs;
  int empty = 0;
  for (const auto& result : results) {
    ASSERT_TRUE(result.ok()) << result.status();
    result->has_value() ? static_cast<void>(runs.insert((*result)->run.run_id())) : void(++empty);
  }
  EXPECT_EQ(runs.size(), 3u);
  EXPECT_EQ(empty, 2);
  EXPECT_EQ(Sql(database_url_, "SELECT max(lease_epoch) FROM runs"), "1");
}

TEST_F(BatchedStoreTest, ConcurrentBatchesFromTwoSchedulersNeverShareARun) {
  constexpr int kRuns = 240;
  Submit(MakeSweepSpec("batch-race-a", kRuns / 2));
  Submit(MakeSweepSpec("batch-race-b", kRuns / 2));
  // A second store on the same database stands for a second scheduler replica.
  PostgresRunStore other(PostgresRunStoreOptions{database_url_, 4});
  absl::Mutex mu;
  std::vector<std::string> leased;
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    RunStore& store = t % 2 == 0 ? static_cast<RunStore&>(*store_) : other;
    std::vector<LeaseRequest> requests;
    for (int i = 0; i < 8; ++i) requests.push_back(CpuRequest(Register()));
    threads.emplace_back([&, requests, &store = store] {
      std::vector<const LeaseRequest*> pointers;
      for (const LeaseRequest& request : requests) pointers.push_back(&request);
      while (true) {
        int got = 0;
        for (const auto& result : store.LeaseNextRuns(pointers)) {
          if (!result.ok()) {
            ++errors;
            return;
          }
          if (!result->has_value()) continue;
          ++got;
          absl::MutexLock lock(&mu);
          leased.push_back((*result)->run.run_id());
        }
        if (got == 0) return;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(errors.load(), 0);
  const std::set<std::string> unique(leased.begin(), leased.end());
  EXPECT_EQ(unique.size(), leased.size()) << "a run was leased twice";
  EXPECT_EQ(leased.size(), static_cast<size_t>(kRuns)) << "expected every run leased once";
  EXPECT_EQ(Sql(database_url_, "SELECT max(lease_epoch) FROM runs"), "1");
}

TEST_F(BatchedStoreTest, EachCompletionOfABatchIsCheckedOnItsOwn) {
  const std::string sweep = Submit(MakeSweepSpec("batch-complete", 3)).sweep().sweep_id();
  std::vector<LeaseRequest> requests;
  for (int i = 0; i < 3; ++i) requests.push_back(CpuRequest(Register()));
  const auto leased = Lease(requests);
  for (const auto& result : leased) ASSERT_TRUE(result.ok() && result->has_value());
  const LeasedRun& first = **leased[0];
  const LeasedRun& second = **leased[1];
  const LeasedRun& third = **leased[2];

  Completion stale = Success(second, 1.5);
  stale.lease_epoch = 7;
  Completion unknown = Success(second, 1.5);
  unknown.run_id = "7a1c3f6e-0000-4000-8000-000000000001";
  Completion failure;
  failure.run_id = third.run.run_id();
  failure.lease_epoch = third.lease.lease_epoch();
  failure.failure_class = v1::FAILURE_CLASS_PREEMPTED;
  failure.failure_status.set_message("spot instance reclaimed");
  // The store applies what the scheduler decided (retry_policy.h: preemption spends no attempt).
  failure.retry = {v1::RUN_STATE_PENDING, third.run.attempt(), absl::ZeroDuration()};
  failure.decided_at_attempt = third.run.attempt();
  const auto results =
      Complete({Success(first, 1.25), stale, unknown, Success(first, 1.25), failure});

  ASSERT_TRUE(results[0].ok()) << results[0].status();
  EXPECT_EQ(results[0]->run.state(), v1::RUN_STATE_SUCCEEDED);
  EXPECT_DOUBLE_EQ(results[0]->run.summary().final_val_bpc(), 1.25);
  EXPECT_EQ(results[1].status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(results[1].status().message()), ::testing::HasSubstr("current is 1"));
  EXPECT_EQ(results[2].status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(results[3].ok()) << "the same completion twice in one batch is a repeat";
  EXPECT_EQ(results[3]->run.state(), v1::RUN_STATE_SUCCEEDED);
  ASSERT_TRUE(results[4].ok()) << results[4].status();
  EXPECT_EQ(results[4]->run.state(), v1::RUN_STATE_PENDING) << "preemption retries";

  EXPECT_EQ(
      Sql(database_url_, "SELECT state FROM runs WHERE run_id = '" + second.run.run_id() + "'"),
      "LEASED")
      << "a stale token must change nothing";
  EXPECT_EQ(Sql(database_url_, "SELECT count(*) FROM events WHERE to_state = 'SUCCEEDED'"), "1");
  EXPECT_EQ(
      Sql(database_url_, "SELECT ended_at IS NULL FROM sweeps WHERE sweep_id = '" + sweep + "'"),
      "t");
}

TEST_F(BatchedStoreTest, TheBatchThatEndsTheLastRunEndsTheSweep) {
  const std::string sweep = Submit(MakeSweepSpec("batch-end", 2)).sweep().sweep_id();
  const auto leased = Lease({CpuRequest(Register()), CpuRequest(Register())});
  for (const auto& result : leased) ASSERT_TRUE(result.ok() && result->has_value());
  const auto results = Complete({Success(**leased[0], 1.1), Success(**leased[1], 1.2)});
  for (const auto& result : results) ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(Sql(database_url_, "SELECT state FROM sweeps WHERE sweep_id = '" + sweep + "'"),
            "SUCCEEDED");
}

TEST_F(BatchedStoreTest, ABatchThatLeavesARunLiveLeavesTheSweepOpen) {
  const std::string sweep = Submit(MakeSweepSpec("batch-open", 3)).sweep().sweep_id();
  const auto leased =
      Lease({CpuRequest(Register()), CpuRequest(Register()), CpuRequest(Register())});
  for (const auto& result : leased) ASSERT_TRUE(result.ok() && result->has_value());
  const std::string ended =
      "SELECT CASE WHEN ended_at IS NULL THEN 'open' ELSE state || ' ended' END FROM sweeps "
      "WHERE sweep_id = '" +
      sweep + "'";
  for (const auto& result : Complete({Success(**leased[0], 1.1), Success(**leased[2], 1.3)})) {
    ASSERT_TRUE(result.ok()) << result.status();
  }
  EXPECT_EQ(Sql(database_url_, ended), "open") << "the second run is still live";
  for (const auto& result : Complete({Success(**leased[1], 1.2)})) {
    ASSERT_TRUE(result.ok()) << result.status();
  }
  EXPECT_EQ(Sql(database_url_, ended), "SUCCEEDED ended") << "its last live run just ended";
}

// Events have no foreign key to their run (migration 0008: its check cost every lease and
// completion a lookup), and metrics never had one; deleting a sweep must still take its runs'
// events and metrics with it, and leave other sweeps' alone.
TEST_F(BatchedStoreTest, DeletingASweepDeletesItsRunsWithTheirEventsAndMetrics) {
  const std::string gone = Submit(MakeSweepSpec("deleted", 2)).sweep().sweep_id();
  const std::string kept = Submit(MakeSweepSpec("kept", 1)).sweep().sweep_id();
  const auto leased = Lease({CpuRequest(Register()), CpuRequest(Register())});
  for (const auto& result : leased) ASSERT_TRUE(result.ok() && result->has_value());
  for (const auto& result : leased) {
    ASSERT_TRUE(store_
                    ->AppendMetrics((*result)->run.run_id(), (*result)->lease.lease_epoch(),
                                    {Point(1, 3.5)})
                    .ok());
  }
  auto count = [&](const std::string& table, const std::string& sweep) {
    return Sql(database_url_, "SELECT count(*) FROM " + table +
                                  " t JOIN (SELECT run_id FROM runs WHERE sweep_id = '" + sweep +
                                  "') r USING (run_id)");
  };
  const std::string kept_events = count("events", kept);
  ASSERT_EQ(count("metrics", kept), "1") << "fair share leased one run of each sweep";
  ASSERT_EQ(count("metrics", gone), "1");

  Sql(database_url_, "DELETE FROM sweeps WHERE sweep_id = '" + gone + "'");
  EXPECT_EQ(Sql(database_url_, "SELECT count(*) FROM runs WHERE sweep_id = '" + gone + "'"), "0");
  for (const std::string table : {"events", "metrics"}) {
    EXPECT_EQ(Sql(database_url_, "SELECT count(*) FROM " + table +
                                     " t WHERE NOT EXISTS (SELECT 1 FROM runs r WHERE r.run_id "
                                     "= t.run_id)"),
              "0")
        << "expected no row of " << table << " left without its run";
  }
  EXPECT_EQ(count("events", kept), kept_events) << "another sweep's events must stay";
  EXPECT_EQ(count("metrics", kept), "1") << "another sweep's metrics must stay";
}

}  // namespace
}  // namespace parity::server::testing
