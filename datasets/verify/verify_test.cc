// VerifyPreparedDataset / VerifyRawFile against real files: every way a copy can differ from its
// manifest or its pin is DATA_LOSS with words for viewers, and the cache spares re-hashing.
#include "datasets/verify/verify.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "datasets/verify/test_dataset.h"
#include "gtest/gtest.h"

namespace parity::datasets {
namespace {

namespace fs = std::filesystem;

VerifyOptions Full() {
  VerifyOptions options;
  options.mode = VerifyMode::kFull;
  return options;
}

class VerifyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("verify-test-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
    absl::StatusOr<std::string> digest = testing::WriteTestDataset(root_.string(), {});
    ASSERT_TRUE(digest.ok()) << digest.status();
    digest_ = *digest;
    dir_ = (root_ / "tiny").string();
  }
  void TearDown() override { fs::remove_all(root_); }

  // Flips one byte of `file` in place, keeping its size.
  void Flip(const std::string& file, int64_t offset = 3) {
    std::fstream f(dir_ + "/" + file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(offset);
    char c = 0;
    f.read(&c, 1);
    f.seekp(offset);
    c = static_cast<char>(c ^ 0x5a);
    f.write(&c, 1);
  }

  fs::path root_;
  std::string dir_;
  std::string digest_;
  VerifyCache cache_{""};
};

TEST_F(VerifyTest, AnIntactCopyVerifiesAgainstItsPin) {
  absl::StatusOr<VerifiedDataset> v = VerifyPreparedDataset(dir_, digest_, cache_, {});
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->digest, digest_);
  EXPECT_EQ(v->manifest.train.tokens, 128);
  EXPECT_EQ(v->hashed_files, 6);  // 2 train + 1 validation shard, each .tok and .doc
  EXPECT_EQ(v->hashed_bytes, 3 * (64 * 2 + 8));
}

TEST_F(VerifyTest, ATamperedShardByteIsAMismatchNamingTheShard) {
  Flip("train-00001.tok");
  absl::StatusOr<VerifiedDataset> v = VerifyPreparedDataset(dir_, digest_, cache_, {});
  ASSERT_EQ(v.status().code(), absl::StatusCode::kDataLoss) << v.status();
  EXPECT_EQ(ViewerDetail(v.status()), "train-00001.tok differs from its manifest");
  EXPECT_FALSE(absl::StrContains(ViewerDetail(v.status()), root_.string()));
}

TEST_F(VerifyTest, ATruncatedShardIsAMismatchOfSize) {
  fs::resize_file(dir_ + "/validation-00000.tok", 10);
  absl::StatusOr<VerifiedDataset> v = VerifyPreparedDataset(dir_, digest_, cache_, {});
  ASSERT_EQ(v.status().code(), absl::StatusCode::kDataLoss) << v.status();
  EXPECT_EQ(ViewerDetail(v.status()),
            "validation-00000.tok has another size than its manifest says");
  EXPECT_EQ(cache_.size(), 0u) << "nothing is hashed when a size is already wrong";
}

TEST_F(VerifyTest, AMissingShardIsAMismatch) {
  fs::remove(dir_ + "/train-00000.doc");
  absl::StatusOr<VerifiedDataset> v = VerifyPreparedDataset(dir_, digest_, cache_, {});
  ASSERT_EQ(v.status().code(), absl::StatusCode::kDataLoss) << v.status();
  EXPECT_EQ(ViewerDetail(v.status()), "train-00000.doc is missing");
}

TEST_F(VerifyTest, AShardReplacedByALinkIsRefused) {
  fs::rename(dir_ + "/train-00000.tok", root_ / "elsewhere.tok");
  fs::create_symlink(root_ / "elsewhere.tok", dir_ + "/train-00000.tok");
  absl::StatusOr<VerifiedDataset> v = VerifyPreparedDataset(dir_, digest_, cache_, {});
  ASSERT_EQ(v.status().code(), absl::StatusCode::kDataLoss) << v.status();
  EXPECT_EQ(ViewerDetail(v.status()), "train-00000.tok is missing");
}

TEST_F(VerifyTest, AnEditedManifestIsNotThePinnedDigest) {
  {
    std::ofstream out(dir_ + "/manifest.json", std::ios::app);
    out << "\n";
  }
  absl::StatusOr<VerifiedDataset> v = VerifyPreparedDataset(dir_, digest_, cache_, {});
  ASSERT_EQ(v.status().code(), absl::StatusCode::kDataLoss) << v.status();
  EXPECT_TRUE(absl::StartsWith(ViewerDetail(v.status()), "its manifest digest "))
      << ViewerDetail(v.status());
  // Without a pin the edited (still valid) manifest is its own dataset.
  EXPECT_TRUE(VerifyPreparedDataset(dir_, "", cache_, {}).ok());
}

TEST_F(VerifyTest, AnAbsentDatasetIsNotFoundNotAMismatch) {
  EXPECT_EQ(VerifyPreparedDataset((root_ / "absent").string(), digest_, cache_, {}).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(VerifyRawFile((root_ / "absent.txt").string(), "", cache_, {}).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(VerifyTest, TheCacheSparesRehashingAndFullModeRehashesEverything) {
  const std::string file = (root_ / "cache.json").string();
  {
    VerifyCache cache(file);
    ASSERT_TRUE(cache.Load().ok());
    absl::StatusOr<VerifiedDataset> first = VerifyPreparedDataset(dir_, digest_, cache, {});
    ASSERT_TRUE(first.ok()) << first.status();
    EXPECT_GT(first->hashed_bytes, 0);
    ASSERT_TRUE(cache.Save().ok());
  }
  VerifyCache cache(file);  // as a restarted worker reads it
  ASSERT_TRUE(cache.Load().ok());
  absl::StatusOr<VerifiedDataset> cached = VerifyPreparedDataset(dir_, digest_, cache, {});
  ASSERT_TRUE(cached.ok()) << cached.status();
  EXPECT_EQ(cached->hashed_bytes, 0) << "every file's identity was known";

  absl::StatusOr<VerifiedDataset> full = VerifyPreparedDataset(dir_, digest_, cache, Full());
  ASSERT_TRUE(full.ok()) << full.status();
  EXPECT_EQ(full->hashed_bytes, 3 * (64 * 2 + 8));

  // A rewrite (new mtime) is re-hashed in cached mode, and only that file.
  {
    std::ofstream out(dir_ + "/train-00000.doc", std::ios::binary | std::ios::trunc);
    out << std::string(8, '\1');
  }
  fs::last_write_time(dir_ + "/train-00000.doc",
                      fs::last_write_time(dir_ + "/train-00000.doc") + std::chrono::seconds(5));
  absl::StatusOr<VerifiedDataset> changed = VerifyPreparedDataset(dir_, digest_, cache, {});
  ASSERT_EQ(changed.status().code(), absl::StatusCode::kDataLoss) << changed.status();
  EXPECT_EQ(ViewerDetail(changed.status()), "train-00000.doc differs from its manifest");
}

TEST_F(VerifyTest, ATamperKeepingSizeAndMtimeEvadesOnlyCachedMode) {
  ASSERT_TRUE(VerifyPreparedDataset(dir_, digest_, cache_, {}).ok());
  const auto mtime = fs::last_write_time(dir_ + "/train-00000.tok");
  Flip("train-00000.tok");
  fs::last_write_time(dir_ + "/train-00000.tok", mtime);
  EXPECT_TRUE(VerifyPreparedDataset(dir_, digest_, cache_, {}).ok())
      << "the documented trade-off of cached mode";
  EXPECT_EQ(VerifyPreparedDataset(dir_, digest_, cache_, Full()).status().code(),
            absl::StatusCode::kDataLoss);
}

TEST_F(VerifyTest, ARawFileDigestIsTheSha256OfItsBytes) {
  {
    std::ofstream out(root_ / "kjv.txt", std::ios::binary);
    out << "In the beginning";
  }
  const std::string path = (root_ / "kjv.txt").string();
  absl::StatusOr<VerifiedDataset> v = VerifyRawFile(path, "", cache_, {});
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->digest, Sha256Hex("In the beginning"));
  EXPECT_TRUE(VerifyRawFile(path, v->digest, cache_, {}).ok());
  EXPECT_EQ(VerifyRawFile(path, std::string(64, 'a'), cache_, {}).status().code(),
            absl::StatusCode::kDataLoss);
}

TEST(VerifyModeTest, ParsesTheFlagWords) {
  EXPECT_EQ(*ParseVerifyMode("cached"), VerifyMode::kCached);
  EXPECT_EQ(*ParseVerifyMode("full"), VerifyMode::kFull);
  EXPECT_EQ(ParseVerifyMode("sometimes").status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace parity::datasets
