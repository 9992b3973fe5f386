// The two rules that keep a spec's names from becoming paths on a worker: a dataset is a plain
// name (data.corpus), a checkpoint URI lies inside its run's prefix of the checkpoint store.
// Every attack string seen against a clean build is here, refused.
#include <string>
#include <vector>

#include "core/checkpoint_uri.h"
#include "core/dataset_name.h"
#include "gtest/gtest.h"

namespace parity::core {
namespace {

TEST(DatasetNameTest, PlainNamesAreAccepted) {
  for (const std::string& name : std::vector<std::string>{"kjv", "pretraining-mix", "web_2024.v2",
                                                          "A", std::string(128, 'x')}) {
    EXPECT_TRUE(CheckDatasetName(name).ok()) << "'" << name << "' is a plain dataset name";
  }
}

TEST(DatasetNameTest, PathsAndOddNamesAreRefusedWithTheRemedy) {
  for (const std::string& name : std::vector<std::string>{
           std::string("/etc/passwd"), std::string("../../../../etc/passwd"),
           std::string("/dev/zero"), std::string("data/kjv.txt"), std::string(".."),
           std::string("."), std::string(".hidden"), std::string("a..b"), std::string("kjv\\..\\x"),
           std::string("k jv"), std::string("kjv\n"), std::string("kjv\0x", 5),
           std::string("~root"), std::string(129, 'x'), std::string()}) {
    const absl::Status s = CheckDatasetName(name);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument)
        << "'" << name << "' must be refused as a dataset name";
    EXPECT_NE(s.message().find("--corpus-dir"), std::string::npos)
        << "the refusal must say what to do instead: " << s.message();
  }
}

constexpr char kRun[] = "5f0c2a4e-1d2b-4c3d-8e9f-0a1b2c3d4e5f";

TEST(CheckpointUriTest, UrisInsideTheRunsPrefixAreAccepted) {
  for (const std::string& uri : std::vector<std::string>{
           std::string(""), CheckpointUri(kRun, "recorded-7/step-00000120.ckpt"),
           CheckpointUri(kRun, "epoch-3/step-00000005.ckpt"), CheckpointUri(kRun, "a/b/c")}) {
    EXPECT_TRUE(CheckCheckpointUri(kRun, uri).ok())
        << "'" << uri << "' lies inside the run's prefix: " << CheckCheckpointUri(kRun, uri);
  }
}

TEST(CheckpointUriTest, UrisOutsideTheRunsPrefixAreRefused) {
  const std::string run = kRun;
  for (const std::string& uri : std::vector<std::string>{
           std::string("../../root/.ssh/id_rsa"),
           std::string("/root/.ssh/id_rsa"),
           std::string("/var/lib/parity/checkpoints/") + run + "/recorded-7/step-00000120.ckpt",
           run,                                                  // the prefix, not a file
           run + "/",                                            // an empty part
           run + "/../other/recorded-1/step-1.ckpt",             // up and out
           run + "/recorded-7/../../x",                          //
           run + "/./step-1.ckpt",                               //
           run + "//step-1.ckpt",                                //
           run + "/recorded-7/.step",                            // a hidden file
           run + "/a/b/c/d",                                     // too deep
           run + "/recorded 7/step",                             // odd characters
           "6a1b2c3d-0000-4000-8000-000000000000/recorded-1/x",  // another run
           std::string("./") + run + "/recorded-1/x",
           std::string(5000, 'a'),
       }) {
    EXPECT_EQ(CheckCheckpointUri(kRun, uri).code(), absl::StatusCode::kInvalidArgument)
        << "'" << uri << "' must be refused as run " << kRun << "'s checkpoint";
  }
}

TEST(CheckpointUriTest, ARunIdThatIsNoPlainNameConfinesNothing) {
  EXPECT_FALSE(CheckCheckpointUri("..", "../x/y").ok());
  EXPECT_FALSE(CheckCheckpointUri("", "/x/y").ok());
  EXPECT_FALSE(CheckCheckpointUri("a/b", "a/b/c").ok());
}

}  // namespace
}  // namespace parity::core
