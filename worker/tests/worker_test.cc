// WorkerDaemon's lease loop against FakeSchedulerClient and the fake engine.
#include "worker/worker.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <thread>

#include "gtest/gtest.h"
#include "worker/tests/fake_scheduler_client.h"

namespace parity::worker {
namespace {

namespace fs = std::filesystem;

parity::v1::LeaseRunResponse Lease(const std::string& id, uint64_t steps) {
  parity::v1::LeaseRunResponse l;
  l.mutable_lease()->set_run_id(id);
  l.mutable_lease()->set_lease_epoch(1);
  l.mutable_run()->set_run_id(id);
  l.mutable_run()->set_attempt(1);
  l.mutable_run()->mutable_spec()->mutable_data()->set_corpus("tiny");
  l.mutable_run()->mutable_spec()->mutable_training()->set_steps(steps);
  l.mutable_run()->mutable_spec()->mutable_training()->set_checkpoint_every_steps(5);
  l.mutable_run()->mutable_spec()->mutable_resources()->set_cpu_threads(1);
  return l;
}

class WorkerDaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ =
        fs::path(::testing::TempDir()) /
        ("daemon_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(root_);
    options_.hostname = "test-host";
    options_.worker_id_file = (root_ / "worker-id").string();
    options_.lease_wait = absl::Milliseconds(50);
    options_.run.train_binary = PARITY_FAKE_ENGINE;
    options_.run.checkpoint_root = (root_ / "ckpt").string();
    options_.run.work_root = (root_ / "work").string();
    options_.run.corpus_dir = (root_ / "corpus").string();
    options_.run.heartbeat_interval = absl::Milliseconds(100);
    options_.run.kill_grace = absl::Seconds(2);
    options_.run.engine_env = {{"FAKE_STEP_MS", "10"}};
    options_.backoff = {.initial = absl::Milliseconds(10), .max = absl::Milliseconds(100)};
    fs::create_directories(root_ / "corpus");
    std::ofstream(root_ / "corpus" / "tiny.txt") << "a small dataset\n";
  }

  parity::v1::Device Cpu(uint32_t threads) {
    parity::v1::Device d;
    d.set_kind(parity::v1::DEVICE_KIND_CPU);
    d.set_threads(threads);
    return d;
  }

  fs::path root_;
  WorkerOptions options_;
  FakeSchedulerClient fake_;
};

TEST_F(WorkerDaemonTest, RunsLeasedRunsConcurrentlyAndStopsOnShutdown) {
  {
    absl::MutexLock l(&fake_.mu);
    fake_.leases = {Lease("a", 20), Lease("b", 20), Lease("c", 20)};
  }
  DeviceSlots slots({Cpu(2)}, /*max_runs=*/2);
  WorkerDaemon daemon(fake_, slots, options_);
  std::thread loop([&] { EXPECT_TRUE(daemon.Run().ok()); });
  const bool all_done = [&] {
    for (int i = 0; i < 200; ++i) {
      {
        absl::MutexLock l(&fake_.mu);
        if (fake_.completes.size() == 3) return true;
      }
      absl::SleepFor(absl::Milliseconds(50));
    }
    return false;
  }();
  daemon.Shutdown();
  loop.join();
  ASSERT_TRUE(all_done) << "three runs should complete";
  absl::MutexLock l(&fake_.mu);
  ASSERT_EQ(fake_.registrations.size(), 1u);
  EXPECT_EQ(fake_.registrations[0].devices(0).threads(), 2u);
  for (const auto& c : fake_.completes) EXPECT_TRUE(c.has_success()) << c.run_id();
  size_t max_offered = 0;
  for (const auto& r : fake_.lease_requests) {
    EXPECT_EQ(r.worker_id(), "worker-1");
    max_offered =
        std::max<size_t>(max_offered, r.free_devices_size() > 0 ? r.free_devices(0).threads() : 0);
  }
  EXPECT_EQ(max_offered, 2u);
  std::ifstream id(options_.worker_id_file);
  std::string saved;
  std::getline(id, saved);
  EXPECT_EQ(saved, "worker-1") << "the id is kept for a restart";
}

TEST_F(WorkerDaemonTest, ShutdownPreemptsRunningRuns) {
  {
    absl::MutexLock l(&fake_.mu);
    fake_.leases = {Lease("long", 100000)};
  }
  DeviceSlots slots({Cpu(1)}, /*max_runs=*/1);
  WorkerDaemon daemon(fake_, slots, options_);
  std::thread loop([&] { EXPECT_TRUE(daemon.Run().ok()); });
  absl::SleepFor(absl::Milliseconds(500));
  EXPECT_EQ(daemon.active_runs(), 1u);
  const absl::Time t0 = absl::Now();
  daemon.Shutdown();
  loop.join();
  EXPECT_LT(absl::Now() - t0, absl::Seconds(3)) << "the engine checkpoints and exits on SIGTERM";
  absl::MutexLock l(&fake_.mu);
  ASSERT_EQ(fake_.completes.size(), 1u);
  EXPECT_EQ(fake_.completes[0].failure().failure_class(), parity::v1::FAILURE_CLASS_PREEMPTED);
  EXPECT_GT(fake_.completes[0].checkpoint().step(), 0u);
}

TEST_F(WorkerDaemonTest, ShutdownWhileIdleEndsTheLongPoll) {
  DeviceSlots slots({Cpu(1)}, 1);
  WorkerDaemon daemon(fake_, slots, options_);
  std::thread loop([&] { EXPECT_TRUE(daemon.Run().ok()); });
  absl::SleepFor(absl::Milliseconds(200));
  const absl::Time t0 = absl::Now();
  daemon.Shutdown();
  loop.join();
  EXPECT_LT(absl::Now() - t0, absl::Seconds(1));
}

// Waits until the daemon has sent `count` LeaseRun requests, stops it, and returns them.
std::vector<parity::v1::LeaseRunRequest> LeaseRequestsUntil(FakeSchedulerClient& fake,
                                                            WorkerDaemon& daemon, size_t count) {
  std::thread loop([&] { EXPECT_TRUE(daemon.Run().ok()); });
  for (int i = 0; i < 200; ++i) {
    {
      absl::MutexLock l(&fake.mu);
      if (fake.lease_requests.size() >= count) break;
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  daemon.Shutdown();
  loop.join();
  absl::MutexLock l(&fake.mu);
  return fake.lease_requests;
}

// A LeaseRun whose answer never came may have leased a run: the next attempt repeats its
// request_id with retry = true (the scheduler hands that lease back); any answer ends it.
TEST_F(WorkerDaemonTest, ALeaseRunWithoutAnAnswerIsRepeatedWithItsRequestId) {
  {
    absl::MutexLock l(&fake_.mu);
    fake_.fail_leases = 2;  // UNAVAILABLE twice, then empty answers
  }
  DeviceSlots slots({Cpu(1)}, 1);
  WorkerDaemon daemon(fake_, slots, options_);
  const std::vector<parity::v1::LeaseRunRequest> sent = LeaseRequestsUntil(fake_, daemon, 5);
  ASSERT_GE(sent.size(), 5u);
  EXPECT_FALSE(sent[0].request_id().empty());
  EXPECT_FALSE(sent[0].retry());
  for (int i : {1, 2}) {
    EXPECT_EQ(sent[i].request_id(), sent[0].request_id()) << "attempt " << i;
    EXPECT_TRUE(sent[i].retry()) << "attempt " << i;
    EXPECT_EQ(sent[i].free_devices_size(), sent[0].free_devices_size());
  }
  // The third was answered (empty): fresh ids from then on.
  EXPECT_NE(sent[3].request_id(), sent[0].request_id());
  EXPECT_FALSE(sent[3].retry());
  EXPECT_NE(sent[4].request_id(), sent[3].request_id());
  EXPECT_FALSE(sent[4].retry());
}

TEST_F(WorkerDaemonTest, ALeaseRunTheSchedulerRefusedIsNotRepeatedAsARetry) {
  {
    absl::MutexLock l(&fake_.mu);
    fake_.fail_leases = 1;
    fake_.lease_failure = absl::StatusCode::kPermissionDenied;  // refused: nothing was leased
  }
  DeviceSlots slots({Cpu(1)}, 1);
  WorkerDaemon daemon(fake_, slots, options_);
  const std::vector<parity::v1::LeaseRunRequest> sent = LeaseRequestsUntil(fake_, daemon, 2);
  ASSERT_GE(sent.size(), 2u);
  EXPECT_NE(sent[1].request_id(), sent[0].request_id());
  EXPECT_FALSE(sent[1].retry());
}

}  // namespace
}  // namespace parity::worker
