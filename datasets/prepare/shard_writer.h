// One split's token stream cut into shard files (datasets/format/manifest.h): <split>-NNNNN.tok
// holds at most `shard_tokens` ids of `token_width` bytes each, little-endian, no header;
// <split>-NNNNN.doc holds the uint64 offset, from the shard's start, of every document whose
// first token lies in that shard. A document may run on into the next shard; a shard file is only
// created once it has a token, so no split has an empty shard. Each file is hashed while it is
// written (no second read) and fsync'd when closed.
//
// Not thread-safe: one writer per split, driven by the preparation's single writer thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "datasets/format/manifest.h"

namespace parity::datasets {

class OutputFile;  // a buffered, hashed file (shard_writer.cc)

class ShardWriter {
 public:
  // `on_shard_closed` (may be empty) hears each finished shard: progress and the tests' hook.
  ShardWriter(std::string dir, std::string split, int token_width, int64_t shard_tokens,
              std::function<void(const Shard&)> on_shard_closed = {});
  ~ShardWriter();
  ShardWriter(const ShardWriter&) = delete;
  ShardWriter& operator=(const ShardWriter&) = delete;

  // The next ids appended start a document (its offset goes into the .doc of the shard that
  // receives its first id).
  void BeginDocument() { document_pending_ = true; }
  // Appends ids (each must fit token_width bytes: the caller checked them against the vocabulary).
  absl::Status Append(const uint32_t* ids, size_t count);
  // Closes the last shard; the split's counts and shards (text_bytes and token_bytes are the
  // caller's to fill). The writer is spent afterwards.
  absl::StatusOr<Split> Finish();

 private:
  absl::Status OpenShard();
  absl::Status CloseShard();

  const std::string dir_;
  const std::string split_;
  const int token_width_;
  const int64_t shard_tokens_;
  const std::function<void(const Shard&)> on_shard_closed_;
  std::unique_ptr<OutputFile> tok_;  // null between shards
  std::unique_ptr<OutputFile> doc_;
  Shard shard_;                    // the open shard's counts
  bool document_pending_ = false;  // BeginDocument seen, its first id not yet written
  std::vector<char> encoded_;      // scratch for the little-endian ids
  Split split_out_;
};

}  // namespace parity::datasets
