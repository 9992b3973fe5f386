// The worker's confinement of names to its own directories: a dataset name resolves only inside
// --corpus-dir, a leased checkpoint URI only inside the run's prefix of --checkpoint-dir. Each
// attack reproduced against a clean build (issue #23) is here and must not get through.
#include "worker/dataset_resolver.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "worker/checkpoint_store.h"
#include "worker/failure_text.h"

namespace parity::worker {
namespace {

namespace fs = std::filesystem;

class ConfinementTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::path(::testing::TempDir()) /
            absl::StrCat("confine_", getpid(), "_",
                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    data_ = root_ / "corpus";
    fs::create_directories(data_);
    std::ofstream(data_ / "kjv.txt") << std::string(1000, 'k');
    std::ofstream(data_ / "raw") << std::string(10, 'r');
    std::ofstream(root_ / "secret.txt") << "the worker's own file";
  }
  void TearDown() override { fs::remove_all(root_); }

  absl::StatusOr<ResolvedDataset> Resolve(const std::string& name, int64_t max_bytes = 1 << 20) {
    return ResolveDataset(data_.string(), name, DatasetLimits{.max_bytes = max_bytes});
  }

  fs::path root_, data_;
};

TEST_F(ConfinementTest, ANameResolvesToItsFileInsideTheDataDirectory) {
  absl::StatusOr<ResolvedDataset> kjv = Resolve("kjv");
  ASSERT_TRUE(kjv.ok()) << kjv.status();
  EXPECT_EQ(kjv->path, (fs::canonical(data_) / "kjv.txt").string()) << "NAME → DIR/NAME.txt";
  EXPECT_EQ(kjv->bytes, 1000);
  absl::StatusOr<ResolvedDataset> raw = Resolve("raw");
  ASSERT_TRUE(raw.ok()) << raw.status();
  EXPECT_EQ(raw->path, (fs::canonical(data_) / "raw").string()) << "else DIR/NAME";
}

TEST_F(ConfinementTest, PathsAreRefusedAsNames) {
  for (const std::string& name :
       std::vector<std::string>{"/etc/passwd", "../../../../etc/passwd", "/dev/zero", "../secret",
                                "corpus/../secret", ".", "..", ".hidden", ""}) {
    absl::StatusOr<ResolvedDataset> r = Resolve(name);
    ASSERT_FALSE(r.ok()) << "'" << name << "' resolved to " << r->path;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << name << ": " << r.status();
  }
}

TEST_F(ConfinementTest, ASymbolicLinkIsRefusedWhereverItPoints) {
  fs::create_symlink(root_ / "secret.txt", data_ / "out.txt");  // out of the directory
  fs::create_symlink(data_ / "kjv.txt", data_ / "alias.txt");   // to a dataset inside
  fs::create_symlink("/etc/passwd", data_ / "passwd");
  for (const std::string& name : std::vector<std::string>{"out", "alias", "passwd"}) {
    absl::StatusOr<ResolvedDataset> r = Resolve(name);
    ASSERT_FALSE(r.ok()) << "the link '" << name << "' resolved to " << r->path;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound) << r.status();
    EXPECT_NE(r.status().message().find("symbolic link"), std::string::npos)
        << "the worker's log should say why: " << r.status();
  }
}

TEST_F(ConfinementTest, OnlyARegularFileIsADataset) {
  ASSERT_EQ(mkfifo((data_ / "pipe").c_str(), 0600), 0);
  fs::create_directories(data_ / "dir.txt");
  for (const std::string& name : std::vector<std::string>{"pipe", "dir"}) {
    absl::StatusOr<ResolvedDataset> r = Resolve(name);
    ASSERT_FALSE(r.ok()) << "'" << name << "' is not a regular file but resolved";
    EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound) << r.status();
  }
  // A device, found in a data directory that holds devices: /dev/zero grew the engine until the
  // host ran out of memory.
  for (const std::string& name : std::vector<std::string>{"zero", "null", "urandom"}) {
    absl::StatusOr<ResolvedDataset> r =
        ResolveDataset("/dev", name, DatasetLimits{.max_bytes = 1 << 20});
    ASSERT_FALSE(r.ok()) << "/dev/" << name << " resolved as a dataset";
    EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound) << r.status();
  }
}

TEST_F(ConfinementTest, AFileOverTheLimitIsRefused) {
  absl::StatusOr<ResolvedDataset> r = Resolve("kjv", /*max_bytes=*/999);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted) << r.status();
  EXPECT_TRUE(Resolve("kjv", /*max_bytes=*/1000).ok()) << "exactly the limit is allowed";
}

TEST_F(ConfinementTest, AMissingDatasetOrDataDirectoryIsNotFound) {
  EXPECT_EQ(Resolve("absent").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ResolveDataset("", "kjv", {}).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ResolveDataset((root_ / "nowhere").string(), "kjv", {}).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(ConfinementTest, ViewersReadOnlyTheNameTheWorkerAndAWord) {
  for (const std::string& name : std::vector<std::string>{"absent", "out"}) {
    const std::string told = DatasetFailureForViewers(name, "w-1", Resolve(name).status());
    EXPECT_EQ(told, absl::StrCat("dataset '", name, "' not found on worker w-1"));
  }
  const std::string big = DatasetFailureForViewers("kjv", "w-1", Resolve("kjv", 10).status());
  EXPECT_EQ(big.find("1000"), std::string::npos) << "no size: " << big;
  EXPECT_EQ(big.find(root_.string()), std::string::npos) << "no path: " << big;
  const std::string bad =
      DatasetFailureForViewers("../../etc/passwd", "w-1", Resolve("../../etc/passwd").status());
  EXPECT_NE(bad.find("--corpus-dir"), std::string::npos) << "the remedy: " << bad;
}

constexpr char kRun[] = "run-1";

TEST_F(ConfinementTest, ALeasedCheckpointUriIsFoundOnlyInsideTheRunsPrefix) {
  const fs::path store = root_ / "ckpt";
  fs::create_directories(store / kRun / "recorded-3");
  fs::create_directories(store / "run-2" / "recorded-1");
  std::ofstream(store / kRun / "recorded-3" / "step-00000010.ckpt") << "10";
  std::ofstream(store / "run-2" / "recorded-1" / "step-00000010.ckpt") << "other run";
  fs::create_symlink(root_ / "secret.txt", store / kRun / "recorded-3" / "step-00000020.ckpt");
  fs::create_directory_symlink(store / "run-2", store / kRun / "epoch-9");

  absl::StatusOr<std::string> ok =
      CheckpointFileOfUri(store.string(), kRun, "run-1/recorded-3/step-00000010.ckpt");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(*ok, (fs::canonical(store) / kRun / "recorded-3" / "step-00000010.ckpt").string());

  for (const std::string& uri : std::vector<std::string>{
           "../../root/.ssh/id_rsa", "/root/.ssh/id_rsa", (root_ / "secret.txt").string(),
           "run-2/recorded-1/step-00000010.ckpt", "run-1/../run-2/recorded-1/step-00000010.ckpt",
           "run-1/recorded-3/step-00000020.ckpt",          // a link out
           "run-1/epoch-9/recorded-1/step-00000010.ckpt",  // through a linked directory
           "run-1/recorded-3"}) {                          // a directory
    absl::StatusOr<std::string> r = CheckpointFileOfUri(store.string(), kRun, uri);
    ASSERT_FALSE(r.ok()) << "'" << uri << "' was accepted as " << *r;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument)
        << "'" << uri << "' must be refused, not taken for a pruned file: " << r.status();
  }
  EXPECT_EQ(CheckpointFileOfUri(store.string(), kRun, "run-1/recorded-3/step-00000030.ckpt")
                .status()
                .code(),
            absl::StatusCode::kNotFound)
      << "a file that is simply gone lets the resume fall back to an older one";
}

TEST_F(ConfinementTest, AWorkerReportsOnlyUrisInsideTheRunsPrefix) {
  const std::string store = (root_ / "ckpt").string();
  absl::StatusOr<std::string> uri =
      CheckpointUriOfFile(store, kRun, store + "/run-1/recorded-3/step-00000010.ckpt");
  ASSERT_TRUE(uri.ok()) << uri.status();
  EXPECT_EQ(*uri, "run-1/recorded-3/step-00000010.ckpt");
  for (const std::string& path : std::vector<std::string>{
           store + "/run-2/epoch-1/step-00000010.ckpt", store + "/run-1/../../secret.txt",
           std::string("/etc/passwd"), std::string("run-1/epoch-1/x"), store}) {
    EXPECT_FALSE(CheckpointUriOfFile(store, kRun, path).ok()) << path << " must not be reported";
  }
}

TEST(FailureTextTest, PathsAndByteCountsDoNotReachViewers) {
  const std::string text =
      "cannot open '/etc/shadow': 1234 bytes; checkpoint /data/ckpt/run-1/epoch-2/step-1.ckpt; "
      "corpus /data/corpus/kjv.txt of 5000000 B (path=/x/y) at 3.2 bits/byte, step 12";
  const std::string out = ScrubForViewers(
      text, {{"/data/corpus/kjv.txt", "<dataset>"}, {"/data/ckpt", "<checkpoint-dir>"}});
  EXPECT_EQ(
      out,
      "cannot open '<path>': <n> bytes; checkpoint <checkpoint-dir>/run-1/epoch-2/step-1.ckpt; "
      "corpus <dataset> of <n> bytes (path=<path>) at 3.2 bits/byte, step 12");
}

}  // namespace
}  // namespace parity::worker
