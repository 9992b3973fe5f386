#include "worker/checkpoint_retention.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "fmt/format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/tests/fake_scheduler_client.h"
#include "worker/worker.h"

namespace parity::worker {
namespace {

namespace fs = std::filesystem;
using ::testing::UnorderedElementsAre;

// A run directory as the supervisor lays it out: epoch-<lease>/step-NNNNNNNN.ckpt + LATEST.
class CheckpointRetentionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            absl::StrCat("parity-retention-", getpid(), "-",
                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    run_dir_ = root_ / "0b5b7c1e-6b0a-4a57-9d55-2f1f2f1f2f1f";
  }
  void TearDown() override { fs::remove_all(root_); }

  std::string Write(int epoch, uint64_t step) {
    const fs::path dir = run_dir_ / absl::StrCat("epoch-", epoch);
    fs::create_directories(dir);
    const fs::path file = dir / fmt::format("step-{:08d}.ckpt", step);
    std::ofstream(file) << "weights";
    std::ofstream(dir / "LATEST") << file.filename().string() << "\n";
    return Uri(absl::StrCat("epoch-", epoch, "/", file.filename().string()));
  }

  // A checkpoint URI of the run as the scheduler records it: relative to the store.
  std::string Uri(const std::string& below_run) const {
    return absl::StrCat(run_dir_.filename().string(), "/", below_run);
  }

  // Every regular file left under the run directory, relative to it.
  std::vector<std::string> Left() const {
    std::vector<std::string> files;
    std::error_code ec;
    for (fs::recursive_directory_iterator it(run_dir_, ec), end; !ec && it != end; ++it) {
      if (it->is_regular_file()) files.push_back(fs::relative(it->path(), run_dir_).string());
    }
    return files;
  }

  static parity::v1::RunRetention Retention(parity::v1::RunState state, const std::string& uri,
                                            uint64_t step, int64_t lease_epoch) {
    parity::v1::RunRetention retention;
    retention.set_exists(true);
    retention.set_state(state);
    if (step > 0) {
      retention.mutable_checkpoint()->set_step(step);
      retention.mutable_checkpoint()->set_uri(uri);
    }
    retention.set_lease_epoch(lease_epoch);
    return retention;
  }

  fs::path root_, run_dir_;
};

TEST_F(CheckpointRetentionTest, AFinishedRunKeepsOnlyItsFinalCheckpoint) {
  Write(1, 40);
  Write(1, 80);
  Write(2, 120);
  const std::string final_ckpt = Write(2, 200);
  ApplyCheckpointRetention(run_dir_.string(),
                           Retention(parity::v1::RUN_STATE_SUCCEEDED, final_ckpt, 200, 0));
  EXPECT_THAT(Left(), UnorderedElementsAre("epoch-2/step-00000200.ckpt"))
      << "a finished run needs only the checkpoint of its result";
}

TEST_F(CheckpointRetentionTest, AFinishedRunWhoseFinalCheckpointIsElsewhereLeavesNothing) {
  Write(1, 40);
  ApplyCheckpointRetention(run_dir_.string(), Retention(parity::v1::RUN_STATE_SUCCEEDED,
                                                        Uri("epoch-9/step-00000200.ckpt"), 200, 0));
  EXPECT_FALSE(fs::exists(run_dir_)) << "the result's checkpoint is on another worker's disk";
}

// A recorded URI that leaves the run's prefix, or a link in the run's directory that points out,
// is not the run's checkpoint: retention keeps nothing for it and follows nothing out.
TEST_F(CheckpointRetentionTest, ARecordedUriOutsideTheRunIsNeverKeptNorFollowed) {
  Write(1, 40);
  const fs::path outside = root_ / "outside.ckpt";
  std::ofstream(outside) << "not the run's";
  fs::create_directories(run_dir_ / "recorded-1");
  fs::create_symlink(outside, run_dir_ / "recorded-1" / "step-00000200.ckpt");
  for (const std::string& uri :
       std::vector<std::string>{std::string("../outside.ckpt"), (root_ / "outside.ckpt").string(),
                                Uri("recorded-1/step-00000200.ckpt")}) {
    EXPECT_THAT(CheckpointsToDelete(run_dir_.string(),
                                    Retention(parity::v1::RUN_STATE_SUCCEEDED, uri, 200, 0)),
                ::testing::ElementsAre(run_dir_.string()))
        << "'" << uri << "' is not a checkpoint of the run here: the run keeps nothing";
  }
  ApplyCheckpointRetention(
      run_dir_.string(),
      Retention(parity::v1::RUN_STATE_SUCCEEDED, Uri("recorded-1/step-00000200.ckpt"), 200, 0));
  EXPECT_TRUE(fs::exists(outside)) << "deleting the run's directory must not follow its link";
}

TEST_F(CheckpointRetentionTest, ADeletedRunLeavesNothing) {
  Write(1, 40);
  parity::v1::RunRetention gone;
  gone.set_exists(false);
  EXPECT_EQ(ApplyCheckpointRetention(run_dir_.string(), gone), 1);
  EXPECT_FALSE(fs::exists(run_dir_));
}

TEST_F(CheckpointRetentionTest, ALiveRunKeepsItsResumePointAndTheLiveLeasesDirectory) {
  Write(1, 40);
  const std::string recorded = Write(1, 80);
  Write(1, 120);  // past the recorded step: its points were never all stored
  Write(3, 160);  // the live lease's: its holder may be writing there
  fs::create_directories(run_dir_ / "recorded-3");  // a link the holder is about to record
  std::ofstream(run_dir_ / "recorded-3" / "step-00000160.ckpt") << "weights";
  ApplyCheckpointRetention(run_dir_.string(),
                           Retention(parity::v1::RUN_STATE_RUNNING, recorded, 80, 3));
  EXPECT_THAT(Left(),
              UnorderedElementsAre("epoch-1/step-00000080.ckpt", "epoch-3/LATEST",
                                   "epoch-3/step-00000160.ckpt", "recorded-3/step-00000160.ckpt"));
}

TEST_F(CheckpointRetentionTest, APendingRunWhoseRecordedFileIsGoneKeepsTheNewestOlderOne) {
  Write(1, 40);
  Write(2, 60);
  Write(2, 100);
  ApplyCheckpointRetention(run_dir_.string(), Retention(parity::v1::RUN_STATE_PENDING,
                                                        Uri("epoch-9/step-00000080.ckpt"), 80, 0));
  EXPECT_THAT(Left(), UnorderedElementsAre("epoch-2/step-00000060.ckpt"))
      << "where a resume falls back to: the newest at or before the recorded step";
}

TEST_F(CheckpointRetentionTest, AMissingDirectoryIsNothingToDo) {
  EXPECT_THAT(
      CheckpointsToDelete(run_dir_.string(), Retention(parity::v1::RUN_STATE_SUCCEEDED, "", 0, 0)),
      ::testing::IsEmpty());
}

// The daemon's pass at start: it asks about every run directory on its disk and applies the
// answers; a directory that is not a run's is left alone.
TEST_F(CheckpointRetentionTest, TheWorkersPassAtStartAppliesWhatTheSchedulerSays) {
  const std::string kept = Write(2, 200);
  Write(1, 100);
  const fs::path deleted_run = root_ / "5e1f0c2a-1111-4a57-9d55-2f1f2f1f2f1f";
  fs::create_directories(deleted_run / "epoch-1");
  std::ofstream(deleted_run / "epoch-1" / "step-00000010.ckpt") << "w";
  fs::create_directories(root_ / "not-a-run");

  FakeSchedulerClient client;
  client.retention[run_dir_.filename().string()] =
      Retention(parity::v1::RUN_STATE_SUCCEEDED, kept, 200, 0);
  parity::v1::Device cpu;
  cpu.set_kind(parity::v1::DEVICE_KIND_CPU);
  cpu.set_threads(1);
  DeviceSlots slots({cpu}, 1);
  WorkerOptions options;
  options.run.checkpoint_root = root_.string();
  options.lease_wait = absl::Milliseconds(10);
  WorkerDaemon daemon(client, slots, options);
  std::thread stopper([&] {
    for (int i = 0; i < 200; ++i) {
      {
        absl::MutexLock lock(&client.mu);
        if (!client.retention_requests.empty()) break;
      }
      absl::SleepFor(absl::Milliseconds(10));
    }
    daemon.Shutdown();
  });
  ASSERT_TRUE(daemon.Run().ok());
  stopper.join();
  ASSERT_EQ(client.retention_requests.size(), 1u);
  EXPECT_EQ(client.retention_requests[0].run_ids_size(), 2) << "both run directories, not more";
  EXPECT_THAT(Left(), UnorderedElementsAre("epoch-2/step-00000200.ckpt"));
  EXPECT_FALSE(fs::exists(deleted_run)) << "a run the scheduler does not know is deleted";
  EXPECT_TRUE(fs::exists(root_ / "not-a-run"));
}

}  // namespace
}  // namespace parity::worker
