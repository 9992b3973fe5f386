// A gang over real gRPC and PostgreSQL (SchedulerServer, PostgresRunStore): two workers' LeaseRun
// long polls answered with one gang's slots, the rendezvous RPCs with the workers' tokens, rank
// 0 alone reporting metrics, and a follower's failure stopping rank 0 at its next heartbeat; what
// GetRun shows of the gang (ranks, hosts, check-ins, the release) at each of those steps.
#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <vector>

#include "parity/v1/sweep_service.grpc.pb.h"
#include "parity/v1/worker_service.grpc.pb.h"
#include "server/scheduler_server.h"
#include "tests/scheduler/scheduler_fixture.h"
#include "tests/support/gang_lease_calls.h"
#include "tests/support/test_tokens.h"

namespace parity::server::testing {
namespace {

class GrpcGangTest : public ::testing::Test {
 protected:
  void SetUp() override {
    PARITY_REQUIRE_POSTGRES();
    ServerOptions options;
    options.listen_address = "127.0.0.1:0";
    options.bootstrap_token = parity::testing::kTestAdminToken;
    options.database_url = parity::testing::PostgresEnvironment::FreshDatabase();
    options.pool_size = 4;
    options.reap_interval = absl::Milliseconds(100);
    options.scheduler.idle_poll_interval = absl::Milliseconds(100);
    absl::StatusOr<std::unique_ptr<SchedulerServer>> server =
        SchedulerServer::Start(options, &StubPlanner);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    channel_ = parity::testing::TokenChannel(server_->port());
    sweeps_ = v1::SweepService::NewStub(channel_);
    workers_ = v1::WorkerService::NewStub(channel_);
  }

  std::unique_ptr<grpc::ClientContext> Context() {
    auto context = std::make_unique<grpc::ClientContext>();
    context->set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(20)));
    return context;
  }
  std::string RegisterWorker() {
    v1::RegisterWorkerRequest request;
    request.set_hostname("grpc-gang");
    *request.add_devices() = CpuDevice();
    v1::RegisterWorkerResponse response;
    EXPECT_TRUE(workers_->RegisterWorker(Context().get(), request, &response).ok());
    return response.worker_id();
  }

  // GetRun's answer for `run_id` (its gang, when placed, in .gang()).
  v1::GetRunResponse GetRun(const std::string& run_id) {
    v1::GetRunRequest request;
    request.set_run_id(run_id);
    v1::GetRunResponse response;
    const grpc::Status status = sweeps_->GetRun(Context().get(), request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response;
  }

  std::unique_ptr<SchedulerServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::SweepService::Stub> sweeps_;
  std::unique_ptr<v1::WorkerService::Stub> workers_;
};

TEST_F(GrpcGangTest, TwoWorkersGetOneGangMeetAtTheRendezvousAndRestartTogether) {
  v1::SubmitSweepRequest submit;
  *submit.mutable_spec() = MakeSweepSpec("grpc-gang", 1);
  (*submit.mutable_spec()->mutable_labels())["ranks"] = "2";
  v1::SubmitSweepResponse submitted;
  ASSERT_TRUE(sweeps_->SubmitSweep(Context().get(), submit, &submitted).ok());
  const std::vector<std::string> ids = {RegisterWorker(), RegisterWorker()};

  const std::vector<v1::LeaseRunResponse> answers =
      ::parity::testing::LeaseGangSlots(*workers_, ids, CpuDevice(), [this] { return Context(); });
  ASSERT_FALSE(HasFailure());
  const int r0 = answers[0].gang().ranks(0).rank() == 0 ? 0 : 1, r1 = 1 - r0;
  EXPECT_EQ(answers[r0].gang().gang_epoch(), answers[r1].gang().gang_epoch());
  EXPECT_EQ(answers[r0].lease().worker_id(), ids[r0]);
  const std::string run_id = submitted.run_ids(0);
  const int64_t epoch = answers[r0].gang().gang_epoch();
  // What `parity status` and the dashboard read: every rank's worker, host and devices.
  v1::GetRunResponse shown = GetRun(run_id);
  ASSERT_TRUE(shown.has_gang()) << "a placed gang";
  EXPECT_EQ(shown.gang().world_size(), 2u);
  EXPECT_EQ(shown.gang().lease_epoch(), epoch);
  EXPECT_FALSE(shown.gang().released());
  ASSERT_EQ(shown.gang().ranks_size(), 2);
  for (int rank = 0; rank < 2; ++rank) {
    const int holder = rank == 0 ? r0 : r1;
    EXPECT_EQ(shown.gang().ranks(rank).rank(), static_cast<uint32_t>(rank));
    EXPECT_EQ(shown.gang().ranks(rank).worker_id(), ids[holder]);
    EXPECT_EQ(shown.gang().ranks(rank).hostname(), "grpc-gang");
    EXPECT_EQ(shown.gang().ranks(rank).device_indices_size(),
              answers[holder].gang().ranks(0).device_indices_size());
    EXPECT_FALSE(shown.gang().ranks(rank).checked_in());
  }

  v1::CheckInRendezvousRequest check_in;
  check_in.set_run_id(run_id);
  check_in.set_lease_epoch(epoch);
  check_in.set_worker_id(ids[r1]);
  check_in.set_rank(1);
  check_in.set_lease_secret(answers[r1].lease_secret());
  v1::RendezvousResponse state;
  ASSERT_TRUE(workers_->CheckInRendezvous(Context().get(), check_in, &state).ok());
  EXPECT_FALSE(state.released());
  shown = GetRun(run_id);
  EXPECT_TRUE(shown.gang().ranks(1).checked_in()) << "rank 1 checked in";
  EXPECT_FALSE(shown.gang().released()) << "waiting: 1 of 2 checked in";
  v1::PostRendezvousRequest post;
  post.set_run_id(run_id);
  post.set_lease_epoch(epoch);
  post.set_worker_id(ids[r0]);
  post.set_address("127.0.0.1:29500");
  post.set_lease_secret(answers[r0].lease_secret());
  ASSERT_TRUE(workers_->PostRendezvous(Context().get(), post, &state).ok());
  EXPECT_TRUE(state.released());
  ASSERT_TRUE(workers_->CheckInRendezvous(Context().get(), check_in, &state).ok());
  EXPECT_EQ(state.address(), "127.0.0.1:29500");
  shown = GetRun(run_id);
  EXPECT_TRUE(shown.gang().released());
  EXPECT_TRUE(shown.gang().has_released_time());
  EXPECT_TRUE(shown.gang().ranks(0).checked_in());

  v1::ReportMetricsRequest metrics;
  metrics.set_run_id(run_id);
  metrics.set_lease_epoch(epoch);
  metrics.set_lease_secret(answers[r1].lease_secret());
  metrics.add_points()->set_step(1);
  v1::ReportMetricsResponse stored;
  EXPECT_EQ(workers_->ReportMetrics(Context().get(), metrics, &stored).error_code(),
            grpc::StatusCode::PERMISSION_DENIED)
      << "only rank 0 reports metrics";

  v1::CompleteRunRequest failure;
  failure.set_run_id(run_id);
  failure.set_lease_epoch(epoch);
  failure.set_lease_secret(answers[r1].lease_secret());
  failure.mutable_failure()->set_failure_class(v1::FAILURE_CLASS_INFRASTRUCTURE);
  v1::CompleteRunResponse completed;
  ASSERT_TRUE(workers_->CompleteRun(Context().get(), failure, &completed).ok());
  EXPECT_EQ(completed.run().state(), v1::RUN_STATE_PENDING);
  EXPECT_FALSE(GetRun(run_id).has_gang()) << "restarted: waiting to be placed again";
  v1::HeartbeatRequest beat;
  beat.set_worker_id(ids[r0]);
  beat.set_run_id(run_id);
  beat.set_lease_epoch(epoch);
  beat.set_lease_secret(answers[r0].lease_secret());
  v1::HeartbeatResponse beaten;
  EXPECT_EQ(workers_->Heartbeat(Context().get(), beat, &beaten).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION)
      << "rank 0 is stopped at its next heartbeat";
}

}  // namespace
}  // namespace parity::server::testing
