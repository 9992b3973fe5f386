// The scheduler over real gRPC on a loopback port and a throwaway PostgreSQL: what a client sees,
// including error codes and their google.rpc details decoded from the trailer.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <condition_variable>
#include <fstream>
#include <memory>
#include <mutex>
#include <pqxx/pqxx>
#include <set>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "core/summary_check.h"
#include "gmock/gmock.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "parity/v1/sweep_service.grpc.pb.h"
#include "parity/v1/worker_service.grpc.pb.h"
#include "server/scheduler_server.h"
#include "server/store/postgres/postgres_run_store.h"
#include "tests/scheduler/scheduler_fixture.h"
#include "tests/support/test_tokens.h"
#include "tests/support/violated_fields.h"

namespace parity::server::testing {
namespace {

using ::parity::testing::ViolatedFields;
using ::testing::ElementsAre;
using ::testing::UnorderedElementsAre;

// The google.rpc details a failed call carried.
google::rpc::Status DetailsOf(const grpc::Status& status) {
  google::rpc::Status details;
  details.ParseFromString(status.error_details());
  return details;
}

class GrpcApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    PARITY_REQUIRE_POSTGRES();
    ServerOptions options;
    options.listen_address = "127.0.0.1:0";
    options.bootstrap_token = parity::testing::kTestAdminToken;
    options.database_url = parity::testing::PostgresEnvironment::FreshDatabase();
    options.pool_size = 4;
    options.migrate_on_start = true;  // already migrated: exercises the no-op path
    options.reap_interval = absl::Milliseconds(100);
    options.scheduler.lease_ttl = absl::Seconds(30);
    options.scheduler.idle_poll_interval = absl::Milliseconds(100);
    options.scheduler.watch_poll_interval = absl::Milliseconds(20);
    database_url_ = options.database_url;
    absl::StatusOr<std::unique_ptr<SchedulerServer>> server =
        SchedulerServer::Start(options, &StubPlanner);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    // The start-up pass recorded the outage a start is (nothing reaped for two TTLs, lapses
    // within a TTL not charged); these tests play a server up for long, whose reaper charges.
    ASSERT_TRUE(server_->elector().is_leader()) << "a lone replica leads from its start";
    Sql(database_url_,
        "UPDATE reaper_liveness SET charge_from = '-infinity', reap_from = '-infinity'");
    channel_ = parity::testing::TokenChannel(server_->port());
    sweeps_ = v1::SweepService::NewStub(channel_);
    workers_ = v1::WorkerService::NewStub(channel_);
  }

  std::unique_ptr<grpc::ClientContext> Context(absl::Duration timeout = absl::Seconds(10)) {
    auto context = std::make_unique<grpc::ClientContext>();
    context->set_deadline(absl::ToChronoTime(absl::Now() + timeout));
    return context;
  }

  std::string RegisterWorker() {
    v1::RegisterWorkerRequest request;
    request.set_hostname("grpc-test");
    *request.add_devices() = CpuDevice();
    v1::RegisterWorkerResponse response;
    const grpc::Status status = workers_->RegisterWorker(Context().get(), request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(response.lease_ttl().seconds(), 30);
    return response.worker_id();
  }

  v1::SubmitSweepResponse SubmitSweep(int runs) {
    v1::SubmitSweepRequest request;
    *request.mutable_spec() = MakeSweepSpec("grpc", runs);
    v1::SubmitSweepResponse response;
    const grpc::Status status = sweeps_->SubmitSweep(Context().get(), request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response;
  }

  std::string database_url_;
  std::unique_ptr<SchedulerServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::SweepService::Stub> sweeps_;
  std::unique_ptr<v1::WorkerService::Stub> workers_;
};

TEST_F(GrpcApiTest, RunLifecycleOverGrpc) {
  const v1::SubmitSweepResponse submitted = SubmitSweep(1);
  ASSERT_EQ(submitted.run_ids_size(), 1);
  const std::string worker = RegisterWorker();

  v1::LeaseRunRequest lease_request;
  lease_request.set_worker_id(worker);
  *lease_request.add_free_devices() = CpuDevice();
  lease_request.mutable_wait_time()->set_seconds(5);
  v1::LeaseRunResponse leased;
  ASSERT_TRUE(workers_->LeaseRun(Context().get(), lease_request, &leased).ok());
  ASSERT_TRUE(leased.has_lease());
  EXPECT_EQ(leased.run().run_id(), submitted.run_ids(0));
  EXPECT_EQ(leased.run().spec().name(), "dense-1C-0");

  v1::HeartbeatRequest heartbeat;
  heartbeat.set_worker_id(worker);
  heartbeat.set_run_id(leased.run().run_id());
  heartbeat.set_lease_epoch(leased.lease().lease_epoch());
  heartbeat.set_lease_secret(leased.lease_secret());
  heartbeat.set_step(1);
  v1::HeartbeatResponse beat;
  ASSERT_TRUE(workers_->Heartbeat(Context().get(), heartbeat, &beat).ok());
  EXPECT_FALSE(beat.cancel_requested());
  EXPECT_GT(beat.expire_time().seconds(), 0);

  // A watcher started now sees the points and the end of the run.
  std::vector<uint64_t> watched_steps;
  std::vector<v1::RunState> watched_states;
  std::thread watcher([&] {
    v1::WatchRunRequest watch;
    watch.set_run_id(leased.run().run_id());
    auto context = Context(absl::Seconds(20));
    auto reader = sweeps_->WatchRun(context.get(), watch);
    v1::WatchRunResponse message;
    while (reader->Read(&message)) {
      if (message.has_metric()) watched_steps.push_back(message.metric().step());
      if (message.has_state_change()) watched_states.push_back(message.state_change().to_state());
    }
    EXPECT_TRUE(reader->Finish().ok());
  });

  v1::ReportMetricsRequest metrics;
  metrics.set_run_id(leased.run().run_id());
  metrics.set_lease_epoch(leased.lease().lease_epoch());
  metrics.set_lease_secret(leased.lease_secret());
  for (uint64_t step = 1; step <= 3; ++step) {
    v1::MetricPoint* point = metrics.add_points();
    point->set_step(step);
    point->set_attempt(1);
    point->set_train_bpc(2.0);
  }
  v1::ReportMetricsResponse stored;
  ASSERT_TRUE(workers_->ReportMetrics(Context().get(), metrics, &stored).ok());
  EXPECT_EQ(stored.accepted(), 3u);

  absl::SleepFor(absl::Milliseconds(200));
  v1::CompleteRunRequest complete;
  complete.set_run_id(leased.run().run_id());
  complete.set_lease_epoch(leased.lease().lease_epoch());
  complete.set_lease_secret(leased.lease_secret());
  *complete.mutable_success() = core::PlannedSummary(leased.run().spec(), 1.25, 1.25);
  v1::CompleteRunResponse done;
  ASSERT_TRUE(workers_->CompleteRun(Context().get(), complete, &done).ok());
  EXPECT_EQ(done.run().state(), v1::RUN_STATE_SUCCEEDED);
  watcher.join();
  EXPECT_THAT(watched_steps, ElementsAre(1u, 2u, 3u));
  EXPECT_THAT(watched_states, ElementsAre(v1::RUN_STATE_RUNNING, v1::RUN_STATE_SUCCEEDED));

  v1::GetSweepRequest get;
  get.set_sweep_id(submitted.sweep().sweep_id());
  v1::GetSweepResponse sweep;
  ASSERT_TRUE(sweeps_->GetSweep(Context().get(), get, &sweep).ok());
  EXPECT_EQ(sweep.sweep().state(), v1::SWEEP_STATE_SUCCEEDED);
}

TEST_F(GrpcApiTest, MalformedRequestIsInvalidArgumentWithFieldViolations) {
  v1::HeartbeatRequest heartbeat;
  heartbeat.set_worker_id("nope");
  heartbeat.set_run_id("00000000-0000-0000-0000-00000000000z");
  v1::HeartbeatResponse response;
  const grpc::Status status = workers_->Heartbeat(Context().get(), heartbeat, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(ViolatedFields(status), ElementsAre("worker_id", "run_id", "lease_epoch"));
}

TEST_F(GrpcApiTest, InvalidSpecIsInvalidArgumentAndWritesNothing) {
  v1::SubmitSweepRequest request;  // the stub planner requires a name
  v1::SubmitSweepResponse response;
  const grpc::Status status = sweeps_->SubmitSweep(Context().get(), request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(ViolatedFields(status), ElementsAre("name"));
  v1::ListSweepsResponse sweeps;
  ASSERT_TRUE(sweeps_->ListSweeps(Context().get(), v1::ListSweepsRequest(), &sweeps).ok());
  EXPECT_EQ(sweeps.sweeps_size(), 0);
}

TEST_F(GrpcApiTest, OversizedMetricsBatchIsResourceExhausted) {
  v1::ReportMetricsRequest metrics;
  metrics.set_run_id("00000000-0000-0000-0000-000000000001");
  metrics.set_lease_epoch(1);
  for (int i = 0; i < 4097; ++i) metrics.add_points()->set_step(i);
  v1::ReportMetricsResponse response;
  EXPECT_EQ(workers_->ReportMetrics(Context().get(), metrics, &response).error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);
}

// What a worker's retention pass asks, and what deleting a sweep changes in the answer: a live
// sweep is refused, an ended one goes with its runs, and its runs then no longer exist.
TEST_F(GrpcApiTest, DeletingAnEndedSweepTellsWorkersItsCheckpointsMayGo) {
  const v1::SubmitSweepResponse submitted = SubmitSweep(1);
  const std::string worker = RegisterWorker();
  v1::LeaseRunRequest lease_request;
  lease_request.set_worker_id(worker);
  *lease_request.add_free_devices() = CpuDevice();
  v1::LeaseRunResponse leased;
  ASSERT_TRUE(workers_->LeaseRun(Context().get(), lease_request, &leased).ok());
  ASSERT_TRUE(leased.has_lease());

  v1::DeleteSweepRequest remove;
  remove.set_sweep_id(submitted.sweep().sweep_id());
  v1::DeleteSweepResponse removed;
  EXPECT_EQ(sweeps_->DeleteSweep(Context().get(), remove, &removed).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION)
      << "a sweep with a live run must not be deleted";

  v1::CompleteRunRequest complete;
  complete.set_run_id(leased.run().run_id());
  complete.set_lease_epoch(leased.lease().lease_epoch());
  complete.set_lease_secret(leased.lease_secret());
  *complete.mutable_success() = core::PlannedSummary(leased.run().spec(), 1.25, 1.25);
  complete.mutable_checkpoint()->set_step(leased.run().spec().training().steps());
  complete.mutable_checkpoint()->set_uri(leased.run().run_id() + "/epoch-1/step-final.ckpt");
  v1::CompleteRunResponse done;
  ASSERT_TRUE(workers_->CompleteRun(Context().get(), complete, &done).ok());

  v1::CheckpointRetentionRequest ask;
  ask.set_worker_id(worker);
  ask.add_run_ids(leased.run().run_id());
  v1::CheckpointRetentionResponse answer;
  ASSERT_TRUE(workers_->CheckpointRetention(Context().get(), ask, &answer).ok());
  ASSERT_EQ(answer.runs_size(), 1);
  EXPECT_TRUE(answer.runs(0).exists());
  EXPECT_EQ(answer.runs(0).state(), v1::RUN_STATE_SUCCEEDED);
  EXPECT_EQ(answer.runs(0).checkpoint().uri(), leased.run().run_id() + "/epoch-1/step-final.ckpt")
      << "the result's checkpoint";

  ASSERT_TRUE(sweeps_->DeleteSweep(Context().get(), remove, &removed).ok());
  EXPECT_EQ(removed.deleted_runs(), 1u);
  ASSERT_TRUE(workers_->CheckpointRetention(Context().get(), ask, &answer).ok());
  ASSERT_EQ(answer.runs_size(), 1);
  EXPECT_EQ(answer.runs(0).run_id(), leased.run().run_id());
  EXPECT_FALSE(answer.runs(0).exists()) << "a deleted sweep's runs no longer exist";

  ask.add_run_ids("not-a-uuid");
  const grpc::Status bad = workers_->CheckpointRetention(Context().get(), ask, &answer);
  EXPECT_EQ(bad.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(ViolatedFields(bad), ElementsAre("run_ids[1]"));
}

TEST_F(GrpcApiTest, UnknownIdsAreNotFoundAndBadIdsInvalidArgument) {
  v1::GetRunRequest get_run;
  get_run.set_run_id("00000000-0000-0000-0000-000000000001");
  v1::GetRunResponse run;
  EXPECT_EQ(sweeps_->GetRun(Context().get(), get_run, &run).error_code(),
            grpc::StatusCode::NOT_FOUND);
  get_run.set_run_id("'; DROP TABLE runs; --");
  const grpc::Status bad = sweeps_->GetRun(Context().get(), get_run, &run);
  EXPECT_EQ(bad.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(ViolatedFields(bad), ElementsAre("run_id"));

  v1::CancelSweepRequest cancel;
  cancel.set_sweep_id("00000000-0000-0000-0000-000000000002");
  v1::CancelSweepResponse cancelled;
  EXPECT_EQ(sweeps_->CancelSweep(Context().get(), cancel, &cancelled).error_code(),
            grpc::StatusCode::NOT_FOUND);

  // Results of a sweep that does not exist: NOT_FOUND, not an empty table that reads as "no
  // runs yet"; a sweep whose runs a filter leaves out is still an empty page.
  v1::QueryResultsRequest results;
  results.mutable_filter()->set_sweep_id("00000000-0000-0000-0000-000000000005");
  v1::QueryResultsResponse rows;
  EXPECT_EQ(sweeps_->QueryResults(Context().get(), results, &rows).error_code(),
            grpc::StatusCode::NOT_FOUND);
  const v1::SubmitSweepResponse submitted = SubmitSweep(1);
  results.mutable_filter()->set_sweep_id(submitted.sweep().sweep_id());
  results.mutable_filter()->add_states(v1::RUN_STATE_FAILED);
  const grpc::Status filtered = sweeps_->QueryResults(Context().get(), results, &rows);
  EXPECT_TRUE(filtered.ok()) << "a filter that leaves no run is an empty page, got "
                             << filtered.error_message();
  EXPECT_EQ(rows.rows_size(), 0);

  v1::WatchRunRequest watch;
  watch.set_run_id("00000000-0000-0000-0000-000000000003");
  auto context = Context();
  auto reader = sweeps_->WatchRun(context.get(), watch);
  v1::WatchRunResponse message;
  EXPECT_FALSE(reader->Read(&message));
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::NOT_FOUND);

  v1::LeaseRunRequest lease;
  lease.set_worker_id("00000000-0000-0000-0000-000000000004");
  *lease.add_free_devices() = CpuDevice();
  v1::LeaseRunResponse leased;
  EXPECT_EQ(workers_->LeaseRun(Context().get(), lease, &leased).error_code(),
            grpc::StatusCode::NOT_FOUND);
}

TEST_F(GrpcApiTest, StaleEpochIsFailedPreconditionWithPreconditionFailure) {
  const v1::SubmitSweepResponse submitted = SubmitSweep(1);
  const std::string worker = RegisterWorker();
  v1::LeaseRunRequest lease_request;
  lease_request.set_worker_id(worker);
  *lease_request.add_free_devices() = CpuDevice();
  v1::LeaseRunResponse leased;
  ASSERT_TRUE(workers_->LeaseRun(Context().get(), lease_request, &leased).ok());
  // The lease lapses, the reaper (every 100 ms) requeues the run and it is leased again.
  Sql(database_url_, "UPDATE runs SET lease_expires_at = now() - interval '1 s'");
  lease_request.mutable_wait_time()->set_seconds(5);
  v1::LeaseRunResponse again;
  ASSERT_TRUE(workers_->LeaseRun(Context().get(), lease_request, &again).ok());
  ASSERT_EQ(again.lease().lease_epoch(), leased.lease().lease_epoch() + 1);
  // The first holder writes with its own (now stale) lease: its epoch and secret.
  v1::ReportMetricsRequest metrics;
  metrics.set_run_id(submitted.run_ids(0));
  metrics.set_lease_epoch(leased.lease().lease_epoch());
  metrics.set_lease_secret(leased.lease_secret());
  metrics.add_points()->set_step(1);
  v1::ReportMetricsResponse response;
  const grpc::Status status = workers_->ReportMetrics(Context().get(), metrics, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  google::rpc::PreconditionFailure failure;
  ASSERT_EQ(DetailsOf(status).details_size(), 1);
  ASSERT_TRUE(DetailsOf(status).details(0).UnpackTo(&failure));
  EXPECT_EQ(failure.violations(0).type(), "LEASE_EPOCH");
}

TEST_F(GrpcApiTest, IdempotentResubmissionAndConflictingKey) {
  v1::SubmitSweepRequest request;
  *request.mutable_spec() = MakeSweepSpec("idem", 2);
  request.set_idempotency_key("k");
  v1::SubmitSweepResponse first, second;
  ASSERT_TRUE(sweeps_->SubmitSweep(Context().get(), request, &first).ok());
  ASSERT_TRUE(sweeps_->SubmitSweep(Context().get(), request, &second).ok());
  EXPECT_TRUE(second.deduplicated());
  EXPECT_EQ(second.sweep().sweep_id(), first.sweep().sweep_id());
  request.mutable_spec()->set_description("changed");
  EXPECT_EQ(sweeps_->SubmitSweep(Context().get(), request, &second).error_code(),
            grpc::StatusCode::ALREADY_EXISTS);
}

TEST_F(GrpcApiTest, IdleLongPollEndsEmptyAtItsWaitTime) {
  v1::LeaseRunRequest lease_request;
  lease_request.set_worker_id(RegisterWorker());
  *lease_request.add_free_devices() = CpuDevice();
  lease_request.mutable_wait_time()->set_nanos(300'000'000);
  v1::LeaseRunResponse leased;
  const absl::Time start = absl::Now();
  ASSERT_TRUE(workers_->LeaseRun(Context().get(), lease_request, &leased).ok());
  EXPECT_FALSE(leased.has_lease());
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(250));
}

// Threads of this process, the scheduler's included (/proc/self/status).
int ProcessThreads() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
  }
  return -1;
}

// A LeaseRun issued through the callback client, so that the test holds no thread per call.
struct AsyncLease {
  grpc::ClientContext context;
  v1::LeaseRunRequest request;
  v1::LeaseRunResponse response;
  grpc::Status status;
};

TEST_F(GrpcApiTest, IdleLongPollsHoldNoThreadAndAllGetRunsWhenWorkArrives) {
  constexpr int kWorkers = 64;
  std::vector<std::unique_ptr<AsyncLease>> calls;
  for (int i = 0; i < kWorkers; ++i) {
    auto call = std::make_unique<AsyncLease>();
    call->context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
    call->request.set_worker_id(RegisterWorker());
    *call->request.add_free_devices() = CpuDevice();
    call->request.mutable_wait_time()->set_seconds(30);
    calls.push_back(std::move(call));
  }
  const int threads_before = ProcessThreads();
  absl::Mutex mu;
  int answered = 0;
  for (auto& call : calls) {
    workers_->async()->LeaseRun(&call->context, &call->request, &call->response,
                                [&mu, &answered, c = call.get()](grpc::Status status) {
                                  absl::MutexLock lock(&mu);
                                  c->status = std::move(status);
                                  ++answered;
                                });
  }
  absl::SleepFor(absl::Milliseconds(500));  // every first try found nothing: all are parked
  const int threads_waiting = ProcessThreads();
  {
    absl::MutexLock lock(&mu);
    EXPECT_EQ(answered, 0) << "expected every long poll still waiting for work";
  }
  EXPECT_LT(threads_waiting - threads_before, kWorkers / 4)
      << "expected " << kWorkers << " parked long polls to hold no thread each; the process went "
      << "from " << threads_before << " to " << threads_waiting << " threads";

  SubmitSweep(kWorkers);
  {
    absl::MutexLock lock(&mu);
    auto all_answered = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return answered == kWorkers; };
    ASSERT_TRUE(mu.AwaitWithTimeout(absl::Condition(&all_answered), absl::Seconds(30)))
        << "expected all " << kWorkers << " long polls answered; got " << answered;
  }
  std::set<std::string> runs;
  for (const auto& call : calls) {
    ASSERT_TRUE(call->status.ok()) << call->status.error_message();
    EXPECT_TRUE(call->response.has_lease()) << "expected each waiting worker to get a run";
    runs.insert(call->response.run().run_id());
  }
  EXPECT_EQ(runs.size(), static_cast<size_t>(kWorkers)) << "expected no run leased twice";
}

TEST_F(GrpcApiTest, ShutdownAnswersParkedLongPollsEmptyWithoutWaitingOutTheGrace) {
  AsyncLease call;
  call.context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
  call.request.set_worker_id(RegisterWorker());
  *call.request.add_free_devices() = CpuDevice();
  call.request.mutable_wait_time()->set_seconds(30);
  absl::Notification answered;
  workers_->async()->LeaseRun(&call.context, &call.request, &call.response,
                              [&](grpc::Status status) {
                                call.status = std::move(status);
                                answered.Notify();
                              });
  absl::SleepFor(absl::Milliseconds(300));  // parked
  const absl::Time start = absl::Now();
  server_->Shutdown(absl::Seconds(20));
  ASSERT_TRUE(answered.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_LT(absl::Now() - start, absl::Seconds(10))
      << "expected the parked long poll answered at shutdown, not at the grace's end";
  EXPECT_TRUE(call.status.ok()) << call.status.error_message();
  EXPECT_FALSE(call.response.has_lease());
}

TEST_F(GrpcApiTest, ReaperThreadRequeuesExpiredLease) {
  const v1::SubmitSweepResponse submitted = SubmitSweep(1);
  v1::LeaseRunRequest lease_request;
  lease_request.set_worker_id(RegisterWorker());
  *lease_request.add_free_devices() = CpuDevice();
  v1::LeaseRunResponse leased;
  ASSERT_TRUE(workers_->LeaseRun(Context().get(), lease_request, &leased).ok());
  {
    pqxx::connection connection(database_url_);
    pqxx::work tx(connection);
    tx.exec("UPDATE runs SET lease_expires_at = now() - interval '1 s'");
    tx.commit();
  }
  v1::GetRunRequest get;
  get.set_run_id(submitted.run_ids(0));
  v1::GetRunResponse run;
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(sweeps_->GetRun(Context().get(), get, &run).ok());
    if (run.run().state() == v1::RUN_STATE_PENDING) break;
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_EQ(run.run().state(), v1::RUN_STATE_PENDING);
  EXPECT_EQ(run.run().attempt(), 2u);
}

TEST_F(GrpcApiTest, ListWorkersShowsRegisteredWorkersWithActiveRuns) {
  SubmitSweep(1);
  const std::string idle = RegisterWorker();
  const std::string busy = RegisterWorker();
  v1::LeaseRunRequest lease_request;
  lease_request.set_worker_id(busy);
  *lease_request.add_free_devices() = CpuDevice();
  v1::LeaseRunResponse leased;
  ASSERT_TRUE(workers_->LeaseRun(Context().get(), lease_request, &leased).ok());
  ASSERT_TRUE(leased.has_lease());
  v1::ListWorkersResponse listed;
  const grpc::Status status =
      sweeps_->ListWorkers(Context().get(), v1::ListWorkersRequest(), &listed);
  ASSERT_TRUE(status.ok()) << status.error_code() << " " << status.error_message();
  ASSERT_EQ(listed.workers_size(), 2);
  EXPECT_EQ(listed.workers(0).worker_id(), busy);  // seen last (its lease)
  EXPECT_EQ(listed.workers(0).active_runs(), 1u);
  EXPECT_EQ(listed.workers(1).worker_id(), idle);
  EXPECT_EQ(listed.workers(1).active_runs(), 0u);
  EXPECT_EQ(listed.workers(1).hostname(), "grpc-test");
  ASSERT_EQ(listed.workers(1).devices_size(), 1);
  EXPECT_EQ(listed.workers(1).devices(0).kind(), v1::DEVICE_KIND_CPU);

  v1::ListWorkersRequest bad;
  bad.set_page_size(5000);
  const grpc::Status invalid = sweeps_->ListWorkers(Context().get(), bad, &listed);
  EXPECT_EQ(invalid.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(ViolatedFields(invalid), ElementsAre("page_size"));
}

TEST_F(GrpcApiTest, AnalyzeSweepOverGrpc) {
  v1::SubmitSweepRequest submit;
  *submit.mutable_spec() = AnalysisSweepSpec("grpc-analysis");
  v1::SubmitSweepResponse submitted;
  ASSERT_TRUE(sweeps_->SubmitSweep(Context().get(), submit, &submitted).ok());
  ASSERT_EQ(submitted.run_ids_size(), kAnalysisSweepRuns);
  v1::AnalyzeSweepRequest request;
  request.set_sweep_id(submitted.sweep().sweep_id());
  v1::AnalyzeSweepResponse analysis;

  const std::string worker = RegisterWorker();
  for (int i = 0; i < kAnalysisSweepRuns; ++i) {
    if (i == 0) {
      // Nothing has finished: nothing to analyse.
      const grpc::Status early = sweeps_->AnalyzeSweep(Context().get(), request, &analysis);
      EXPECT_EQ(early.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
      google::rpc::PreconditionFailure failure;
      ASSERT_EQ(DetailsOf(early).details_size(), 1);
      ASSERT_TRUE(DetailsOf(early).details(0).UnpackTo(&failure));
      EXPECT_EQ(failure.violations(0).type(), "FINISHED_RUNS");
    }
    if (i == 1) {
      // Only dense-1C has finished: an answer that says no law can be fitted yet.
      const grpc::Status early = sweeps_->AnalyzeSweep(Context().get(), request, &analysis);
      ASSERT_TRUE(early.ok()) << early.error_message();
      EXPECT_THAT(analysis.dense_fit_refusal(), ::testing::HasSubstr("span 1 budget"));
    }
    v1::LeaseRunRequest lease_request;
    lease_request.set_worker_id(worker);
    *lease_request.add_free_devices() = CpuDevice();
    v1::LeaseRunResponse leased;
    ASSERT_TRUE(workers_->LeaseRun(Context().get(), lease_request, &leased).ok());
    ASSERT_TRUE(leased.has_lease());
    v1::CompleteRunRequest complete;
    complete.set_run_id(leased.run().run_id());
    complete.set_lease_epoch(leased.lease().lease_epoch());
    complete.set_lease_secret(leased.lease_secret());
    const double bpc = SyntheticBpc(leased.run().spec());
    *complete.mutable_success() = core::PlannedSummary(leased.run().spec(), bpc, bpc);
    v1::CompleteRunResponse done;
    ASSERT_TRUE(workers_->CompleteRun(Context().get(), complete, &done).ok());
  }
  const grpc::Status status = sweeps_->AnalyzeSweep(Context().get(), request, &analysis);
  ASSERT_TRUE(status.ok()) << status.error_code() << " " << status.error_message();
  EXPECT_NEAR(analysis.dense_fit().b(), kLawB, 1e-3);
  EXPECT_EQ(analysis.leverage_size(), 7);
  for (const v1::RunLeverage& run : analysis.leverage()) {
    if (run.name() == "moe-r0.2-strict") {
      EXPECT_NEAR(run.efficiency_leverage(), 2.0, 0.05);
    }
  }
  ASSERT_EQ(analysis.optimal_activation_size(), 2);
  // Three r_a leave no degree of freedom to test the curve: the best grid point and the region,
  // no point optimum (scheduler_workers_analysis_test.cc pins the rest).
  const v1::OptimalActivation& optimum = analysis.optimal_activation(0);
  EXPECT_EQ(optimum.status(), v1::OPTIMUM_STATUS_FIT_UNCHECKED) << optimum.reason();
  EXPECT_DOUBLE_EQ(optimum.best_grid_activation_rate(), 0.2);
  ASSERT_EQ(optimum.grid_size(), 3);
  EXPECT_EQ(optimum.grid(1).region(), v1::REGION_STATUS_BEST);
  EXPECT_FALSE(optimum.has_activation_rate_interval());
  ASSERT_TRUE(analysis.has_dense_frontier()) << analysis.dense_frontier_refusal();
}

// Evaluation sets through the worker calls a worker makes: several named sets per point and per
// summary stored, shown per set in the results (final BPC and ΔBPC against the dense baseline on
// that set), analysed per set; names and counts the scheduler refuses, naming the field.
TEST_F(GrpcApiTest, EvaluationSetsFromWorkerCallsToResultsAndAnalysis) {
  v1::SubmitSweepRequest submit;
  *submit.mutable_spec() = AnalysisSweepSpec("grpc-eval-sets");
  v1::SubmitSweepResponse submitted;
  ASSERT_TRUE(sweeps_->SubmitSweep(Context().get(), submit, &submitted).ok());
  const std::string worker = RegisterWorker();
  const double kCodeScale = 2.0;  // "code" BPC = 2 × validation BPC on every run
  std::string a_run;
  for (int i = 0; i < kAnalysisSweepRuns; ++i) {
    v1::LeaseRunRequest lease_request;
    lease_request.set_worker_id(worker);
    *lease_request.add_free_devices() = CpuDevice();
    v1::LeaseRunResponse leased;
    ASSERT_TRUE(workers_->LeaseRun(Context().get(), lease_request, &leased).ok());
    ASSERT_TRUE(leased.has_lease());
    const double bpc = SyntheticBpc(leased.run().spec());
    v1::ReportMetricsRequest metrics;
    metrics.set_run_id(leased.run().run_id());
    metrics.set_lease_epoch(leased.lease().lease_epoch());
    metrics.set_lease_secret(leased.lease_secret());
    v1::MetricPoint* point = metrics.add_points();
    point->set_step(1);
    point->set_train_bpc(bpc);
    point->set_val_bpc(bpc);
    (*point->mutable_eval_bpc())["validation"] = bpc;
    (*point->mutable_eval_bpc())["code"] = kCodeScale * bpc;
    v1::ReportMetricsResponse stored;
    if (i == 0) {
      v1::ReportMetricsRequest bad = metrics;
      (*bad.mutable_points(0)->mutable_eval_bpc())["../etc"] = 1.0;
      const grpc::Status refused = workers_->ReportMetrics(Context().get(), bad, &stored);
      EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
      EXPECT_THAT(ViolatedFields(refused), ElementsAre("points[0].eval_bpc"));
    }
    ASSERT_TRUE(workers_->ReportMetrics(Context().get(), metrics, &stored).ok());
    v1::CompleteRunRequest complete;
    complete.set_run_id(leased.run().run_id());
    complete.set_lease_epoch(leased.lease().lease_epoch());
    complete.set_lease_secret(leased.lease_secret());
    *complete.mutable_success() = core::PlannedSummary(leased.run().spec(), bpc, bpc);
    (*complete.mutable_success()->mutable_final_eval_bpc())["validation"] = bpc;
    (*complete.mutable_success()->mutable_final_eval_bpc())["code"] = kCodeScale * bpc;
    complete.mutable_success()->set_dataset_digest(std::string(64, 'd'));
    v1::CompleteRunResponse done;
    if (i == 0) {
      v1::CompleteRunRequest bad = complete;
      for (int s = 0; s < 16; ++s) {
        (*bad.mutable_success()->mutable_final_eval_bpc())[absl::StrCat("set", s)] = 1.0;
      }
      const grpc::Status refused = workers_->CompleteRun(Context().get(), bad, &done);
      EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
      EXPECT_THAT(ViolatedFields(refused), ElementsAre("success.final_eval_bpc"));
      a_run = leased.run().run_id();
    }
    ASSERT_TRUE(workers_->CompleteRun(Context().get(), complete, &done).ok());
  }

  // The points as the dashboard and WatchRun read them.
  PostgresRunStore store(PostgresRunStoreOptions{database_url_, 1});
  absl::StatusOr<std::vector<v1::MetricPoint>> points = store.ListMetrics(a_run, 0, 10);
  ASSERT_TRUE(points.ok()) << points.status();
  ASSERT_EQ(points->size(), 1u);
  EXPECT_EQ(points->front().eval_bpc_size(), 2);
  EXPECT_DOUBLE_EQ(points->front().eval_bpc().at("code"),
                   kCodeScale * points->front().eval_bpc().at("validation"));

  v1::QueryResultsRequest query;
  query.mutable_filter()->set_sweep_id(submitted.sweep().sweep_id());
  v1::QueryResultsResponse results;
  ASSERT_TRUE(sweeps_->QueryResults(Context().get(), query, &results).ok());
  ASSERT_EQ(results.rows_size(), kAnalysisSweepRuns);
  int with_delta = 0;
  for (const v1::ResultRow& row : results.rows()) {
    ASSERT_EQ(row.final_eval_bpc_size(), 2) << row.name();
    EXPECT_DOUBLE_EQ(row.final_eval_bpc().at("validation"), row.final_val_bpc());
    EXPECT_EQ(row.dataset_digest(), std::string(64, 'd'));
    if (row.delta_eval_bpc_vs_dense().contains("code")) {
      ++with_delta;
      EXPECT_NEAR(row.delta_eval_bpc_vs_dense().at("code"), kCodeScale * row.delta_bpc_vs_dense(),
                  1e-9)
          << row.name() << ": ΔBPC on code is against the baseline's code BPC";
      EXPECT_NEAR(row.delta_eval_bpc_vs_dense().at("validation"), row.delta_bpc_vs_dense(), 1e-9);
    }
  }
  EXPECT_GT(with_delta, 0) << "runs with a finished 1C baseline carry a per-set ΔBPC";

  v1::AnalyzeSweepRequest request;
  request.set_sweep_id(submitted.sweep().sweep_id());
  v1::AnalyzeSweepResponse on_validation, on_code;
  ASSERT_TRUE(sweeps_->AnalyzeSweep(Context().get(), request, &on_validation).ok());
  EXPECT_THAT(on_validation.eval_sets(), ElementsAre("validation", "code"));
  request.set_eval_set("code");
  const grpc::Status code_status = sweeps_->AnalyzeSweep(Context().get(), request, &on_code);
  ASSERT_TRUE(code_status.ok()) << code_status.error_message();
  EXPECT_EQ(on_code.eval_set(), "code");
  EXPECT_NEAR(on_code.dense_fit().b(), kLawB, 1e-3) << "the scale leaves the exponent";
  EXPECT_NEAR(on_code.dense_fit().c(), kCodeScale * on_validation.dense_fit().c(), 1e-3)
      << "the law is fitted to the code set's BPC";
  request.set_eval_set("wiki");
  const grpc::Status unknown = sweeps_->AnalyzeSweep(Context().get(), request, &on_code);
  EXPECT_EQ(unknown.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(ViolatedFields(unknown), ElementsAre("eval_set"));
}

TEST_F(GrpcApiTest, NotFoundCarriesResourceInfo) {
  v1::GetSweepRequest get;
  get.set_sweep_id("00000000-0000-0000-0000-000000000009");
  v1::GetSweepResponse sweep;
  const grpc::Status status = sweeps_->GetSweep(Context().get(), get, &sweep);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  google::rpc::ResourceInfo info;
  ASSERT_EQ(DetailsOf(status).details_size(), 1);
  ASSERT_TRUE(DetailsOf(status).details(0).UnpackTo(&info));
  EXPECT_EQ(info.resource_type(), "parity.v1.Sweep");
  EXPECT_EQ(info.resource_name(), "sweeps/00000000-0000-0000-0000-000000000009");
}

TEST_F(GrpcApiTest, HealthServiceReportsServing) {
  grpc::ClientContext context;
  grpc::ByteBuffer response;
  // grpc.health.v1.Health/Check with an empty HealthCheckRequest (service "").
  grpc::GenericStub stub(channel_);
  grpc::ByteBuffer request;
  grpc::Slice empty("", 0);
  request = grpc::ByteBuffer(&empty, 1);
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  grpc::Status status;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
  stub.UnaryCall(&context, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request, &response,
                 [&](grpc::Status s) {
                   std::lock_guard<std::mutex> lock(mu);
                   status = s;
                   done = true;
                   cv.notify_one();
                 });
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return done; });
  EXPECT_TRUE(status.ok()) << status.error_message();
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(response.Dump(&slices).ok());
  // HealthCheckResponse{status: SERVING (1)} is the two bytes 08 01.
  ASSERT_EQ(slices.size(), 1u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(slices[0].begin()), slices[0].size()),
            std::string("\x08\x01", 2));
}

}  // namespace
}  // namespace parity::server::testing
