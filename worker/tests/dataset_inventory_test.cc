// Prepared datasets on a worker (issue #24): a name resolves to its directory before any raw file,
// a link where the directory would be is refused, the scan at start reports what verifies and
// leaves out what does not, and a copy that differs from the pin is DATA_LOSS with words for
// viewers that name no path.
#include "worker/dataset_inventory.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "datasets/verify/test_dataset.h"
#include "gtest/gtest.h"

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
