// Several scheduler replicas on one PostgreSQL (issue #25), with the real binaries: one replica
// leads the upkeep; a long poll parked on one replica is answered at once when a sweep is
// submitted through the other (LISTEN/NOTIFY reaches every replica); and when the leading
// replica is killed with kill -9 mid-sweep, the other takes over the upkeep within its leader TTL,
// the workers and the test's client (both given both addresses) carry on through the survivor,
// and the sweep completes with every run SUCCEEDED once, no curve hole and no step twice.
#include <algorithm>
#include <filesystem>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "clients/cpp/scheduler_target.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "parity/v1/worker_service.grpc.pb.h"
#include "tests/e2e/local_stack.h"
#include "tests/support/postgres_environment.h"
#include "tests/support/test_tokens.h"

namespace parity::e2e {
namespace {

namespace fs = std::filesystem;

std::string EngineBinary() {
  const char* e = std::getenv("PARITY_E2E_ENGINE");
  if (e != nullptr && std::string(e) == "fake") return PARITY_FAKE_ENGINE;
  if (e != nullptr && *e != '\0') return e;
  return std::string(PARITY_TRAIN_BIN).empty() ? PARITY_FAKE_ENGINE : PARITY_TRAIN_BIN;
}

// One MoE point of the micro example with its dense baselines: 3 tiny runs.
std::string SweepYaml(const std::string& name, bool baselines) {
  return absl::StrCat("name: ", name, R"(
moe:
  d_model: 64
  num_layers: 2
  num_heads: 4
  moe: {layout: all-moe, total_ffn_ratio: 16, granularity: 4, router: {balance: aux_loss}}
dense: {d_model: 128, num_layers: 2, num_heads: 8, ffn_hidden: 384}
training:
  rule: explicit
  learning_rate: 3e-3
  batch_tokens: 64
  sequence_length: 64
  schedule: cosine
  log_every_steps: 5
  eval_every_steps: 25
  eval_tokens: 2048
  checkpoint_every_steps: 25
  threads: 1
data: {corpus: kjv, validation_fraction: 0.01}
grid:
  moe:
    - {target_activation_rate: 0.25}
  compute:
    - {name: C1, compute_flops: 1e11}
  data:
    - {name: unique, reuse: unique}
  seeds: [0]
)",
                      baselines ? "baselines:\n  - {name: dense-1C, compute_multiple: 1}\n  - "
                                  "{name: dense-2C, compute_multiple: 2}\n"
                                : "",
                      "resources:\n  cpu_threads: 1\n");
}

std::shared_ptr<grpc::Channel> Channel(const std::string& address) {
  clients::SchedulerChannelOptions options;
  options.address = address;
  options.token = parity::testing::kTestAdminToken;
  return *clients::MakeSchedulerChannel(options);
}

class ReplicasE2ETest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::string(PARITY_SCHEDULER_BIN).empty()) GTEST_SKIP() << "parity-scheduler not built";
    PARITY_REQUIRE_POSTGRES();
    const std::string url = parity::testing::PostgresEnvironment::FreshDatabase();
    ASSERT_FALSE(url.empty());
    root_ =
        fs::path(::testing::TempDir()) /
        absl::StrCat("replicas_", ::testing::UnitTest::GetInstance()->current_test_info()->name(),
                     "_", getpid());
    fs::remove_all(root_);
    fs::create_directories(root_);
    StackOptions options{.scheduler_bin = PARITY_SCHEDULER_BIN,
                         .worker_bin = PARITY_WORKER_BIN,
                         .engine_bin = EngineBinary()};
    options.worker_env = {{"FAKE_STEP_MS", "20"}};
    options.replicas = 2;
    options.leader_ttl = "2s";
    absl::StatusOr<std::unique_ptr<LocalStack>> s = LocalStack::Start(options, url, root_.string());
    ASSERT_TRUE(s.ok()) << s.status();
    stack_ = std::move(*s);
  }

  void TearDown() override {
    if (HasFailure() && stack_) {
      for (const char* log : {"scheduler.log", "scheduler-1.log", "worker-0.log", "worker-1.log"}) {
        std::cerr << "---- " << log << " (tail)\n" << stack_->LogTail(log);
      }
    }
    stack_.reset();
  }

  std::string Leader() {
    absl::StatusOr<std::vector<std::string>> rows = stack_->Query(
        "SELECT leader_id || ' ' || epoch FROM leader_leases WHERE name = 'upkeep' "
        "AND expires_at > now()");
    return rows.ok() && !rows->empty() ? (*rows)[0] : "";
  }

  fs::path root_;
  std::unique_ptr<LocalStack> stack_;
};

TEST_F(ReplicasE2ETest, ALongPollOnOneReplicaWakesOnASubmissionThroughTheOther) {
  EXPECT_EQ(Leader(), "replica-0 1") << "the first replica to start leads, in term 1";
  auto via_a = v1::SweepService::NewStub(Channel(stack_->replica_address(0)));
  auto via_b = v1::WorkerService::NewStub(Channel(stack_->replica_address(1)));
  v1::RegisterWorkerRequest registration;
  registration.set_hostname("long-poll");
  v1::Device* cpu = registration.add_devices();
  cpu->set_kind(v1::DEVICE_KIND_CPU);
  cpu->set_threads(8);
  v1::RegisterWorkerResponse registered;
  ASSERT_TRUE(via_b->RegisterWorker(Deadline().get(), registration, &registered).ok());
  std::vector<int64_t> waits_ms;
  for (int trial = 0; trial < 7; ++trial) {
    v1::LeaseRunRequest request;
    request.set_worker_id(registered.worker_id());
    *request.add_free_devices() = *cpu;
    request.mutable_wait_time()->set_seconds(10);
    v1::LeaseRunResponse leased;
    grpc::Status status;
    absl::Time answered;
    std::thread poll([&] {
      status = via_b->LeaseRun(Deadline().get(), request, &leased);
      answered = absl::Now();
    });
    absl::SleepFor(absl::Milliseconds(400));  // parked on replica B by now
    stack_->Submit(SweepYaml(absl::StrCat("wake-", trial), /*baselines=*/false), via_a.get());
    const absl::Time submitted = absl::Now();
    poll.join();
    ASSERT_TRUE(status.ok()) << status.error_message();
    ASSERT_TRUE(leased.has_lease()) << "trial " << trial << ": the long poll ended empty";
    waits_ms.push_back(absl::ToInt64Milliseconds(answered - submitted));
  }
  std::sort(waits_ms.begin(), waits_ms.end());
  std::string all;
  for (int64_t w : waits_ms) absl::StrAppend(&all, w, " ");
  std::printf("lease answered on replica B after a submission through A: %s ms\n", all.c_str());
  // The idle re-check is every second: without the notification the median would be ~500 ms.
  EXPECT_LT(waits_ms[waits_ms.size() / 2], 250) << all;
}

TEST_F(ReplicasE2ETest, SweepCompletesWhenTheLeadingReplicaIsKilledMidSweep) {
  ASSERT_EQ(Leader(), "replica-0 1");
  const std::string sweep = stack_->Submit(SweepYaml("replicas", /*baselines=*/true));
  ASSERT_TRUE(stack_->StartWorker(0).ok());
  ASSERT_TRUE(stack_->StartWorker(1).ok());
  ASSERT_TRUE(WaitUntil(
      [&] {
        for (const v1::Run& run : stack_->Runs(sweep)) {
          if (run.state() == v1::RUN_STATE_RUNNING && run.latest_step() >= 1) return true;
        }
        return false;
      },
      absl::Minutes(3)));
  const absl::Time killed = absl::Now();
  stack_->KillReplica(0);  // kill -9 of the leader
  ASSERT_TRUE(WaitUntil([&] { return Leader() == "replica-1 2"; }, absl::Seconds(10)))
      << "leader now: '" << Leader() << "'";
  const absl::Duration takeover = absl::Now() - killed;
  std::printf("replica-1 took over the upkeep %lld ms after replica-0 was killed (TTL 2 s)\n",
              static_cast<long long>(absl::ToInt64Milliseconds(takeover)));
  EXPECT_LT(takeover, absl::Seconds(3));
  // The client given both addresses carries on through the survivor: not one call fails.
  for (int i = 0; i < 10; ++i) {
    v1::GetSweepRequest request;
    request.set_sweep_id(sweep);
    v1::GetSweepResponse response;
    const grpc::Status status = stack_->sweeps().GetSweep(Deadline(10).get(), request, &response);
    ASSERT_TRUE(status.ok()) << "call " << i << ": " << status.error_message();
  }
  ASSERT_TRUE(WaitUntil(
      [&] {
        v1::GetSweepRequest request;
        request.set_sweep_id(sweep);
        v1::GetSweepResponse response;
        return stack_->sweeps().GetSweep(Deadline(10).get(), request, &response).ok() &&
               response.sweep().state() != v1::SWEEP_STATE_ACTIVE;
      },
      absl::Minutes(6)));
  const std::vector<v1::Run> runs = stack_->Runs(sweep);
  ASSERT_EQ(runs.size(), 3u);
  for (const v1::Run& run : runs) {
    EXPECT_EQ(run.state(), v1::RUN_STATE_SUCCEEDED)
        << run.spec().name() << ": " << run.failure().message();
    absl::StatusOr<std::vector<std::string>> succeeded = stack_->Query(
        absl::StrCat("SELECT count(*) FROM events WHERE to_state = 'SUCCEEDED' AND run_id = '",
                     run.run_id(), "'"));
    ASSERT_TRUE(succeeded.ok() && !succeeded->empty()) << succeeded.status();
    EXPECT_EQ((*succeeded)[0], "1") << run.spec().name() << " succeeded more than once";
    absl::StatusOr<std::vector<std::string>> twice =
        stack_->Query(absl::StrCat("SELECT step FROM metrics WHERE run_id = '", run.run_id(),
                                   "' GROUP BY step HAVING count(*) > 1"));
    ASSERT_TRUE(twice.ok()) << twice.status();
    EXPECT_TRUE(twice->empty()) << run.spec().name() << " has steps stored twice";
    const uint64_t every = std::max<uint64_t>(1, run.spec().training().log_every_steps());
    absl::StatusOr<std::vector<std::string>> holes = stack_->Query(absl::StrCat(
        "SELECT 'holes: ' || coalesce(string_agg(prev || '..' || step, ', '), 'none') FROM "
        "(SELECT step, coalesce(lag(step) OVER (ORDER BY step), 0) AS prev FROM metrics "
        "WHERE run_id = '",
        run.run_id(), "') g WHERE step - prev > ", every));
    ASSERT_TRUE(holes.ok() && !holes->empty()) << holes.status();
    EXPECT_EQ((*holes)[0], "holes: none") << run.spec().name();
    absl::StatusOr<std::vector<std::string>> last = stack_->Query(absl::StrCat(
        "SELECT coalesce(max(step), 0) FROM metrics WHERE run_id = '", run.run_id(), "'"));
    ASSERT_TRUE(last.ok() && !last->empty());
    EXPECT_EQ(std::stoull((*last)[0]), run.summary().steps()) << run.spec().name();
  }
}

// The address forms the C++ clients (CLI, worker) accept for several replicas.
TEST(SchedulerTargetTest, ListsBecomeOneTargetAndGrpcSyntaxPassesThrough) {
  for (const char* same : {"localhost:50051", "dns:///scheduler.parity:50051",
                           "ipv4:127.0.0.1:1,127.0.0.1:2", "ipv6:[::1]:1", "unix:/run/s.sock"}) {
    absl::StatusOr<clients::SchedulerTarget> target = clients::ResolveSchedulerTarget(same);
    ASSERT_TRUE(target.ok()) << same << ": " << target.status();
    EXPECT_EQ(target->target, same);
  }
  absl::StatusOr<clients::SchedulerTarget> v4 =
      clients::ResolveSchedulerTarget("127.0.0.1:5001, 127.0.0.2:5002");
  ASSERT_TRUE(v4.ok()) << v4.status();
  EXPECT_EQ(v4->target, "ipv4:127.0.0.1:5001,127.0.0.2:5002");
  absl::StatusOr<clients::SchedulerTarget> v6 =
      clients::ResolveSchedulerTarget("[::1]:5001,[::1]:5002");
  ASSERT_TRUE(v6.ok()) << v6.status();
  EXPECT_EQ(v6->target, "ipv6:[::1]:5001,[::1]:5002");
  absl::StatusOr<clients::SchedulerTarget> named =
      clients::ResolveSchedulerTarget("localhost:5001,127.0.0.1:5002");
  ASSERT_TRUE(named.ok()) << named.status();
  EXPECT_EQ(named->target.rfind("ipv4:127.0.0.1:5001", 0), 0u) << named->target;
  EXPECT_EQ(named->server_name, "localhost");
  EXPECT_EQ(clients::ResolveSchedulerTarget("127.0.0.1:1,").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(clients::ResolveSchedulerTarget("127.0.0.1,127.0.0.2:2").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(clients::ResolveSchedulerTarget("nowhere.invalid:1,127.0.0.1:2").status().code(),
            absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace parity::e2e
