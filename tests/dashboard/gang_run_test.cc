// A gang run as a researcher sees it: a throwaway PostgreSQL, a real SchedulerServer with its
// HTTP port, a sweep of two-rank runs (gang_sweep.yaml) and two workers on two hosts played over
// the real gRPC API (LeaseRun with accepts_gangs, one rank checked in), then
//   - `parity status RUN`: the ranks with their hosts and devices, "waiting: 1 of 2 checked in,
//     deadline in …", and "released … after placement" once rank 0 posted;
//   - the run page in headless Chromium (dashboard_browser.mjs --mode gang, gang_run.mjs): the
//     ranks table (rank, worker, host, devices, checked in) and the rendezvous line, axe-core;
//   - the Python client's Client.gang() on the released gang.
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/planner.h"
#include "core/spec_loader.h"
#include "gtest/gtest.h"
#include "parity/v1/sweep_service.grpc.pb.h"
#include "parity/v1/worker_service.grpc.pb.h"
#include "server/scheduler_server.h"
#include "tests/dashboard/child_runner.h"
#include "tests/support/gang_lease_calls.h"
#include "tests/support/postgres_environment.h"
#include "tests/support/test_tokens.h"

namespace parity::dashboard_testing {
namespace {

constexpr const char* kHosts[] = {"gang-node-a", "gang-node-b"};

std::string Chromium() {
  const char* path = std::getenv("PARITY_CHROMIUM");
  return path != nullptr ? path : "/usr/bin/chromium";
}

std::unique_ptr<grpc::ClientContext> Context() {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(20)));
  return context;
}

class GangRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    PARITY_REQUIRE_POSTGRES();
    server::ServerOptions options;
    options.listen_address = "127.0.0.1:0";
    options.bootstrap_token = parity::testing::kTestAdminToken;
    options.http_listen = "127.0.0.1:0";
    options.database_url = parity::testing::PostgresEnvironment::FreshDatabase();
    options.pool_size = 4;
    options.scheduler.lease_ttl = absl::Minutes(10);  // no heartbeat needed while the test looks
    options.scheduler.idle_poll_interval = absl::Milliseconds(100);
    absl::StatusOr<std::unique_ptr<server::SchedulerServer>> started =
        server::SchedulerServer::Start(options, &core::PlanSweep);
    ASSERT_TRUE(started.ok()) << started.status();
    server_ = std::move(*started);
    channel_ = parity::testing::TokenChannel(server_->port());
    sweeps_ = v1::SweepService::NewStub(channel_);
    workers_ = v1::WorkerService::NewStub(channel_);
    scratch_ =
        std::filesystem::path(::testing::TempDir()) /
        absl::StrCat("gang-run-", ::testing::UnitTest::GetInstance()->random_seed(), "-", getpid());
    std::filesystem::remove_all(scratch_);
    std::filesystem::create_directories(scratch_);
  }
  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown(absl::Seconds(2));
    std::filesystem::remove_all(scratch_);
  }

  // `parity ARGS --scheduler … --token …`.
  ChildResult Cli(const std::vector<std::string>& args, const std::string& log) {
    std::vector<std::string> argv = {PARITY_CLI_BIN};
    argv.insert(argv.end(), args.begin(), args.end());
    for (const std::string& more :
         {std::string("--scheduler"), absl::StrCat("127.0.0.1:", server_->port()),
          std::string("--token"), std::string(parity::testing::kTestAdminToken)}) {
      argv.push_back(more);
    }
    return RunChild(argv, (scratch_ / log).string(), absl::Seconds(60));
  }

  std::unique_ptr<server::SchedulerServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::SweepService::Stub> sweeps_;
  std::unique_ptr<v1::WorkerService::Stub> workers_;
  std::filesystem::path scratch_;
};

TEST_F(GangRunTest, StatusAndTheRunPageShowTheRanksHostsAndRendezvous) {
  absl::StatusOr<v1::SweepSpec> spec = core::LoadSweepSpecFile("tests/dashboard/gang_sweep.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  v1::SubmitSweepRequest submit;
  *submit.mutable_spec() = *spec;
  v1::SubmitSweepResponse submitted;
  ASSERT_TRUE(sweeps_->SubmitSweep(Context().get(), submit, &submitted).ok());

  // Two workers of one CPU thread each, on two hosts: each takes one rank of the first gang.
  v1::Device cpu;
  cpu.set_kind(v1::DEVICE_KIND_CPU);
  cpu.set_threads(1);
  std::vector<std::string> ids;
  for (const char* host : kHosts) {
    v1::RegisterWorkerRequest request;
    request.set_hostname(host);
    *request.add_devices() = cpu;
    v1::RegisterWorkerResponse response;
    ASSERT_TRUE(workers_->RegisterWorker(Context().get(), request, &response).ok());
    ids.push_back(response.worker_id());
  }
  const std::vector<v1::LeaseRunResponse> answers =
      ::parity::testing::LeaseGangSlots(*workers_, ids, cpu, [] { return Context(); });
  ASSERT_FALSE(::testing::Test::HasFailure());
  const int r0 = answers[0].gang().ranks(0).rank() == 0 ? 0 : 1, r1 = 1 - r0;
  const std::string run_id = answers[r0].run().run_id();
  ASSERT_EQ(answers[r1].run().run_id(), run_id) << "one gang";
  v1::CheckInRendezvousRequest check_in;
  check_in.set_run_id(run_id);
  check_in.set_lease_epoch(answers[r1].gang().gang_epoch());
  check_in.set_worker_id(ids[r1]);
  check_in.set_rank(1);
  check_in.set_lease_secret(answers[r1].lease_secret());
  v1::RendezvousResponse state;
  ASSERT_TRUE(workers_->CheckInRendezvous(Context().get(), check_in, &state).ok());
  ASSERT_FALSE(state.released());

  const ChildResult waiting = Cli({"status", run_id}, "status-waiting.log");
  ASSERT_EQ(waiting.exit_code, 0) << waiting.output;
  for (const std::string& expected :
       {std::string("gang: 2 ranks on 2 hosts"),
        std::string("rendezvous: waiting: 1 of 2 checked in, deadline in "),
        absl::StrCat("   0  ", ids[r0], "  ", kHosts[r0]),
        absl::StrCat("   1  ", ids[r1], "  ", kHosts[r1])}) {
    EXPECT_NE(waiting.output.find(expected), std::string::npos)
        << "expected \"" << expected << "\" in:\n"
        << waiting.output;
  }

  ASSERT_TRUE(std::filesystem::exists(Chromium()))
      << Chromium() << " is missing: install Debian's chromium (deploy/setup.sh does)";
  const std::filesystem::path shots = PARITY_SCREENSHOT_DIR;
  const ChildResult browser =
      RunChild({PARITY_NODE_BIN,  PARITY_BROWSER_SCRIPT,
                "--mode",         "gang",
                "--node-modules", PARITY_NODE_MODULES,
                "--chromium",     Chromium(),
                "--screenshots",  shots.string(),
                "--base-url",     absl::StrCat("http://127.0.0.1:", server_->http_port()),
                "--token",        parity::testing::kTestAdminToken,
                "--gang-run",     run_id,
                "--rank-hosts",   absl::StrCat(kHosts[r0], ",", kHosts[r1]),
                "--rank-workers", absl::StrCat(ids[r0], ",", ids[r1])},
               (scratch_ / "browser-gang.log").string(), absl::Seconds(180));
  EXPECT_FALSE(browser.timed_out) << browser.output;
  EXPECT_EQ(browser.exit_code, 0) << browser.output;

  v1::PostRendezvousRequest post;
  post.set_run_id(run_id);
  post.set_lease_epoch(answers[r0].gang().gang_epoch());
  post.set_worker_id(ids[r0]);
  post.set_address("127.0.0.1:29500#token");
  post.set_lease_secret(answers[r0].lease_secret());
  ASSERT_TRUE(workers_->PostRendezvous(Context().get(), post, &state).ok());
  ASSERT_TRUE(state.released());
  const ChildResult released = Cli({"status", run_id}, "status-released.log");
  ASSERT_EQ(released.exit_code, 0) << released.output;
  EXPECT_NE(released.output.find("rendezvous: released "), std::string::npos) << released.output;
  EXPECT_NE(released.output.find(" s after placement"), std::string::npos) << released.output;
  EXPECT_EQ(released.output.find("#token"), std::string::npos)
      << "the address carries the gang's secret: never shown\n"
      << released.output;

  // The Python client's Client.gang(): the same placement, by the run's name.
  const std::string script = absl::StrCat(
      "import sys, parity_client\n"
      "c = parity_client.connect(sys.argv[1], token=sys.argv[2])\n"
      "g = c.gang(sys.argv[3])\n"
      "assert g.released and g.checked_in == 2, g\n"
      "assert [r.hostname for r in g.ranks] == sys.argv[4].split(','), g\n"
      "assert g.rendezvous_seconds >= 0, g\n"
      "assert c.gang(sys.argv[5]) is None, 'the other gang is not placed'\n"
      "print('gang ok')\n");
  const std::string other =
      submitted.run_ids(0) == run_id ? submitted.run_ids(1) : submitted.run_ids(0);
  const ChildResult python =
      RunChild({"/usr/bin/env", absl::StrCat("PYTHONPATH=", PARITY_PYTHON_CLIENT_DIR),
                PARITY_PYTHON, "-c", script, absl::StrCat("127.0.0.1:", server_->port()),
                parity::testing::kTestAdminToken, "gang-study/" + answers[r0].run().spec().name(),
                absl::StrCat(kHosts[r0], ",", kHosts[r1]), other},
               (scratch_ / "python-gang.log").string(), absl::Seconds(60));
  EXPECT_EQ(python.exit_code, 0) << python.output;
  EXPECT_NE(python.output.find("gang ok"), std::string::npos) << python.output;
}

}  // namespace
}  // namespace parity::dashboard_testing
