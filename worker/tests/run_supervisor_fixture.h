// The fixture of the RunSupervisor tests: a scratch checkpoint store, work directory and data
// directory (with the dataset "tiny"), FakeSchedulerClient, the fake engine, short timings.
#pragma once

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "gtest/gtest.h"
#include "worker/run_supervisor.h"
#include "worker/tests/fake_scheduler_client.h"

namespace parity::worker {

class RunSupervisorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    namespace fs = std::filesystem;
    root_ = fs::path(::testing::TempDir()) /
            ("sup_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(root_);
    fs::create_directories(root_ / "corpus");
    std::ofstream(root_ / "corpus" / "tiny.txt") << "a small dataset the fake engine never reads\n";
    options_.worker_id = "worker-1";
    options_.train_binary = PARITY_FAKE_ENGINE;
    options_.checkpoint_root = (root_ / "ckpt").string();
    options_.work_root = (root_ / "work").string();
    options_.corpus_dir = (root_ / "corpus").string();
    options_.heartbeat_interval = absl::Milliseconds(100);
    options_.lease_ttl = absl::Seconds(5);
    options_.kill_grace = absl::Seconds(1);
    options_.report_timeout = absl::Seconds(20);
    options_.metrics.max_delay = absl::Milliseconds(100);
    options_.backoff = {.initial = absl::Milliseconds(20), .max = absl::Milliseconds(200)};
    options_.engine_env = {{"FAKE_STEP_MS", "10"}};
  }

  parity::v1::LeaseRunResponse Lease(uint64_t steps, uint32_t attempt = 1,
                                     std::optional<parity::v1::Checkpoint> recorded = {}) {
    parity::v1::LeaseRunResponse l;
    l.mutable_lease()->set_run_id("run-1");
    l.mutable_lease()->set_lease_epoch(6 + attempt);
    if (recorded) *l.mutable_run()->mutable_checkpoint() = *recorded;
    l.mutable_run()->set_run_id("run-1");
    l.mutable_run()->set_attempt(attempt);
    l.mutable_run()->mutable_spec()->set_name("dense-test");
    l.mutable_run()->mutable_spec()->mutable_data()->set_corpus("tiny");
    l.mutable_run()->mutable_spec()->mutable_training()->set_steps(steps);
    l.mutable_run()->mutable_spec()->mutable_training()->set_log_every_steps(1);
    l.mutable_run()->mutable_spec()->mutable_training()->set_checkpoint_every_steps(5);
    return l;
  }

  RunOutcome RunToEnd(parity::v1::LeaseRunResponse lease) {
    RunSupervisor sup(fake_, options_, std::move(lease), DeviceGrant{.threads = 1});
    sup.Start();
    sup.Join();
    return sup.outcome();
  }

  std::filesystem::path root_;
  RunSupervisorOptions options_;
  FakeSchedulerClient fake_;
};

}  // namespace parity::worker
