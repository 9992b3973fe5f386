// Prepared datasets on a worker (issue #24): a name resolves to its directory before any raw file,
// a link where the directory would be is refused, the scan at start reports what verifies and
// leaves out what does not, and a copy that differs from the pin is DATA_LOSS with words for
// viewers that name no path.
#include "worker/dataset_inventory.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "absl/strings/str_cat.h"
#include "datasets/verify/test_dataset.h"
#include "gtest/gtest.h"
#include "worker/run_supervisor.h"
#include "worker/tests/run_supervisor_fixture.h"

namespace parity::worker {
namespace {

namespace fs = std::filesystem;

class DatasetInventoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::path(::testing::TempDir()) /
            absl::StrCat("inventory_", getpid(), "_",
                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    data_ = root_ / "corpus";
    fs::create_directories(data_);
    absl::StatusOr<std::string> digest = datasets::testing::WriteTestDataset(data_.string(), {});
    ASSERT_TRUE(digest.ok()) << digest.status();
    digest_ = *digest;
    std::ofstream(data_ / "tiny.txt") << "a raw file the prepared directory shadows";
    std::ofstream(data_ / "kjv.txt") << "In the beginning";
  }
  void TearDown() override { fs::remove_all(root_); }

  absl::StatusOr<ResolvedDataset> Verify(const std::string& name, const std::string& digest) {
    return ResolveAndVerifyDataset(data_.string(), name, digest, DatasetLimits{.max_bytes = 10},
                                   DatasetCheck{.cache = &cache_, .verify = {}});
  }

  fs::path root_, data_;
  std::string digest_;
  datasets::VerifyCache cache_{""};
};

TEST_F(DatasetInventoryTest, APreparedDirectoryComesFirstAndIsNotHeldToTheRawLimit) {
  absl::StatusOr<ResolvedDataset> tiny = Verify("tiny", digest_);
  ASSERT_TRUE(tiny.ok()) << tiny.status();
  EXPECT_EQ(tiny->kind, DatasetKind::kPrepared);
  EXPECT_EQ(tiny->path, (fs::canonical(data_) / "tiny").string());
  EXPECT_EQ(tiny->digest, digest_);
  // The raw file is still a raw file, held to --max-dataset-bytes (10 here).
  absl::StatusOr<ResolvedDataset> kjv = Verify("kjv", "");
  EXPECT_EQ(kjv.status().code(), absl::StatusCode::kResourceExhausted) << kjv.status();
}

TEST_F(DatasetInventoryTest, ALinkToAPreparedDirectoryIsRefused) {
  fs::create_directories(root_ / "outside");
  ASSERT_TRUE(
      datasets::testing::WriteTestDataset((root_ / "outside").string(), {.name = "elsewhere",
                                                                         .train_shards = 1,
                                                                         .tokens_per_shard = 8,
                                                                         .eval_sets = {},
                                                                         .seed = 2})
          .ok());
  fs::create_directory_symlink(root_ / "outside" / "elsewhere", data_ / "linked");
  absl::StatusOr<ResolvedDataset> linked = Verify("linked", "");
  ASSERT_EQ(linked.status().code(), absl::StatusCode::kNotFound) << linked.status();
  EXPECT_NE(linked.status().message().find("symbolic link"), std::string::npos) << linked.status();
  EXPECT_EQ(Verify("absent", "").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(DatasetInventoryTest, ATamperedShardIsAMismatchTheViewerReadsWithoutAPath) {
  {
    std::fstream f(data_ / "tiny" / "train-00000.tok",
                   std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(1);
    f.put('\x7f');
  }
  absl::StatusOr<ResolvedDataset> tiny = Verify("tiny", digest_);
  ASSERT_EQ(tiny.status().code(), absl::StatusCode::kDataLoss) << tiny.status();
  const std::string told = DatasetMismatchForViewers("tiny", "w-1", tiny.status());
  EXPECT_EQ(told,
            "dataset 'tiny' on worker w-1 is not the copy the sweep pinned: train-00000.tok "
            "differs from its manifest; re-copy the dataset to that worker or pin the digest the "
            "sweep should use (data.dataset_digest)");
  EXPECT_EQ(told.find(root_.string()), std::string::npos);
}

TEST_F(DatasetInventoryTest, TheScanReportsWhatVerifiesAndLeavesOutWhatDoesNot) {
  ASSERT_TRUE(datasets::testing::WriteTestDataset(data_.string(), {.name = "broken",
                                                                   .train_shards = 2,
                                                                   .tokens_per_shard = 64,
                                                                   .eval_sets = {"validation"},
                                                                   .seed = 3})
                  .ok());
  fs::remove(data_ / "broken" / "train-00001.tok");
  fs::create_directory(data_ / "not-a-dataset");  // no manifest
  fs::create_symlink("/etc/passwd", data_ / "passwd.txt");
  const std::vector<v1::DatasetHolding> held =
      ScanDatasets(data_.string(), DatasetLimits{}, DatasetCheck{.cache = &cache_, .verify = {}});
  ASSERT_EQ(held.size(), 2u);
  EXPECT_EQ(held[0].name(), "kjv");
  EXPECT_EQ(held[0].digest(), datasets::Sha256Hex("In the beginning"));
  EXPECT_EQ(held[0].vocab_size(), 256u);
  EXPECT_EQ(held[1].name(), "tiny");
  EXPECT_EQ(held[1].digest(), digest_);
  EXPECT_EQ(held[1].train_tokens(), 128u);
  ASSERT_EQ(held[1].eval_sets_size(), 1);
  EXPECT_EQ(held[1].eval_sets(0), "validation");
}

}  // namespace
}  // namespace parity::worker

namespace parity::worker {
namespace {

namespace fs = std::filesystem;

// The real RunSupervisor and fake engine on a prepared dataset pinned by digest: the engine gets
// the dataset's directory and the success carries the digest verified; a tampered shard fails the
// attempt as DATA_MISMATCH before any engine starts.
class RunOnPreparedDatasetTest : public RunSupervisorTest {
 protected:
  void SetUp() override {
    RunSupervisorTest::SetUp();
    fs::remove(root_ / "corpus" / "tiny.txt");
    absl::StatusOr<std::string> digest =
        datasets::testing::WriteTestDataset((root_ / "corpus").string(), {});
    ASSERT_TRUE(digest.ok()) << digest.status();
    digest_ = *digest;
  }
  parity::v1::LeaseRunResponse Pinned(const std::string& digest) {
    parity::v1::LeaseRunResponse lease = Lease(5);
    lease.mutable_run()->mutable_spec()->mutable_data()->set_dataset_digest(digest);
    return lease;
  }
  std::string digest_;
};

TEST_F(RunOnPreparedDatasetTest, TheEngineGetsTheDirectoryAndTheSuccessItsDigest) {
  EXPECT_EQ(RunToEnd(Pinned(digest_)), RunOutcome::kSucceeded);
  std::ifstream in(root_ / "work" / "run-1" / "run-attempt1.json");
  const std::string spec((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(spec.find(absl::StrCat("\"corpus\": \"",
                                   fs::canonical(root_ / "corpus" / "tiny").string(), "\"")),
            std::string::npos)
      << spec;
  absl::MutexLock l(&fake_.mu);
  ASSERT_EQ(fake_.completes.size(), 1u);
  EXPECT_EQ(fake_.completes[0].success().dataset_digest(), digest_)
      << "the worker fills in the digest it verified when the engine says none";
}

TEST_F(RunOnPreparedDatasetTest, ATamperedShardFailsTheAttemptAsDataMismatch) {
  {
    std::fstream f(root_ / "corpus" / "tiny" / "validation-00000.tok",
                   std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(0);
    f.put('\x01');
    f.put('\x01');
  }
  EXPECT_EQ(RunToEnd(Pinned(digest_)), RunOutcome::kFailed);
  EXPECT_FALSE(fs::exists(root_ / "work" / "run-1" / "engine.log")) << "no engine may start";
  absl::MutexLock l(&fake_.mu);
  ASSERT_EQ(fake_.completes.size(), 1u);
  const parity::v1::RunFailure& f = fake_.completes[0].failure();
  EXPECT_EQ(f.failure_class(), parity::v1::FAILURE_CLASS_DATA_MISMATCH);
  EXPECT_EQ(f.status().message(),
            "dataset 'tiny' on worker worker-1 is not the copy the sweep pinned: "
            "validation-00000.tok differs from its manifest; re-copy the dataset to that worker or "
            "pin the digest the sweep should use (data.dataset_digest)");
}

TEST_F(RunOnPreparedDatasetTest, ACopyWithAnotherDigestIsAMismatchAndAMissingOneAUserError) {
  EXPECT_EQ(RunToEnd(Pinned(std::string(64, '0'))), RunOutcome::kFailed);
  {
    absl::MutexLock l(&fake_.mu);
    ASSERT_EQ(fake_.completes.size(), 1u);
    EXPECT_EQ(fake_.completes[0].failure().failure_class(),
              parity::v1::FAILURE_CLASS_DATA_MISMATCH);
    fake_.completes.clear();
  }
  fs::remove_all(root_ / "work");
  fs::remove_all(root_ / "corpus" / "tiny");
  EXPECT_EQ(RunToEnd(Pinned(digest_)), RunOutcome::kFailed);
  absl::MutexLock l(&fake_.mu);
  ASSERT_EQ(fake_.completes.size(), 1u);
  EXPECT_EQ(fake_.completes[0].failure().failure_class(), parity::v1::FAILURE_CLASS_USER_ERROR)
      << "a dataset that is not there at all stays a USER_ERROR";
}

}  // namespace
}  // namespace parity::worker
