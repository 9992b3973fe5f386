// ShardWriter: bounded shards, documents across shard boundaries, .doc offsets, widths, digests.
#include "datasets/prepare/shard_writer.h"

#include <cstring>
#include <numeric>

#include "datasets/tests/test_corpus.h"
#include "gtest/gtest.h"

namespace parity::datasets {
namespace {

using testing::ReadFile;
using testing::ScratchDir;

std::vector<uint64_t> ReadOffsets(const std::string& path) {
  const std::string bytes = ReadFile(path);
  std::vector<uint64_t> offsets(bytes.size() / 8);
  std::memcpy(offsets.data(), bytes.data(), offsets.size() * 8);
  return offsets;
}

TEST(ShardWriterTest, DocumentsRunAcrossShardsAndOffsetsPointAtTheirFirstToken) {
  ScratchDir dir;
  ShardWriter writer(dir.path(), "train", 2, /*shard_tokens=*/4);
  // Documents of 3, 6, 1 and 2 tokens: ids count up so each token says where it is.
  uint32_t next = 0;
  for (const size_t length : {3, 6, 1, 2}) {
    std::vector<uint32_t> ids(length);
    std::iota(ids.begin(), ids.end(), next);
    next += static_cast<uint32_t>(length);
    writer.BeginDocument();
    ASSERT_TRUE(writer.Append(ids.data(), ids.size()).ok());
  }
  absl::StatusOr<Split> split = writer.Finish();
  ASSERT_TRUE(split.ok()) << split.status();
  // 12 tokens in shards of 4: [0 1 2 3] [4 5 6 7] [8 9 10 11]; documents start at 0, 3, 9, 10.
  ASSERT_EQ(split->shards.size(), 3u);
  EXPECT_EQ(split->tokens, 12);
  EXPECT_EQ(split->documents, 4);
  EXPECT_EQ(split->shards[0].file, "train-00000.tok");
  EXPECT_EQ(split->shards[2].doc_file, "train-00002.doc");
  EXPECT_EQ(ReadOffsets(dir / "train-00000.doc"), (std::vector<uint64_t>{0, 3}));
  EXPECT_EQ(ReadOffsets(dir / "train-00001.doc"), (std::vector<uint64_t>{}));
  EXPECT_EQ(ReadOffsets(dir / "train-00002.doc"), (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(split->shards[1].documents, 0);
  for (const Shard& shard : split->shards) {
    const std::string tokens = ReadFile(dir / shard.file);
    EXPECT_EQ(static_cast<int64_t>(tokens.size()), shard.tokens * 2) << shard.file;
    EXPECT_EQ(*Sha256OfFile(dir / shard.file), shard.sha256) << shard.file;
    EXPECT_EQ(*Sha256OfFile(dir / shard.doc_file), shard.doc_sha256) << shard.doc_file;
  }
  const std::string last = ReadFile(dir / "train-00002.tok");
  EXPECT_EQ(static_cast<uint8_t>(last[0]), 8) << "little-endian uint16: low byte first";
  EXPECT_EQ(static_cast<uint8_t>(last[1]), 0);
}

TEST(ShardWriterTest, ADocumentStartingExactlyAtABoundaryIsIndexedInTheNextShard) {
  ScratchDir dir;
  ShardWriter writer(dir.path(), "validation", 2, /*shard_tokens=*/4);
  const std::vector<uint32_t> four = {1, 2, 3, 4};
  writer.BeginDocument();
  ASSERT_TRUE(writer.Append(four.data(), 4).ok());
  writer.BeginDocument();
  ASSERT_TRUE(writer.Append(four.data(), 4).ok());
  absl::StatusOr<Split> split = writer.Finish();
  ASSERT_TRUE(split.ok());
  ASSERT_EQ(split->shards.size(), 2u);
  EXPECT_EQ(ReadOffsets(dir / "validation-00000.doc"), (std::vector<uint64_t>{0}));
  EXPECT_EQ(ReadOffsets(dir / "validation-00001.doc"), (std::vector<uint64_t>{0}));
}

TEST(ShardWriterTest, VocabulariesOver65536TakeFourBytesAndKeepLargeIds) {
  EXPECT_EQ(TokenWidthFor(256), 2);
  EXPECT_EQ(TokenWidthFor(65536), 2);
  EXPECT_EQ(TokenWidthFor(65537), 4);
  EXPECT_EQ(TokenWidthFor(128256), 4);
  ScratchDir dir;
  ShardWriter writer(dir.path(), "train", TokenWidthFor(128256), 1024);
  const std::vector<uint32_t> ids = {0, 65535, 65536, 128255};
  writer.BeginDocument();
  ASSERT_TRUE(writer.Append(ids.data(), ids.size()).ok());
  absl::StatusOr<Split> split = writer.Finish();
  ASSERT_TRUE(split.ok());
  const std::string bytes = ReadFile(dir / "train-00000.tok");
  ASSERT_EQ(bytes.size(), 16u);
  std::vector<uint32_t> back(4);
  std::memcpy(back.data(), bytes.data(), 16);
  EXPECT_EQ(back, ids);
}

TEST(ShardWriterTest, NoTokensMeansNoShardFiles) {
  ScratchDir dir;
  ShardWriter writer(dir.path(), "train", 2, 1024);
  absl::StatusOr<Split> split = writer.Finish();
  ASSERT_TRUE(split.ok());
  EXPECT_TRUE(split->shards.empty());
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

}  // namespace
}  // namespace parity::datasets
