// `parity data prepare` as a library call: text in, a prepared dataset out
// (datasets/format/manifest.h, docs/data.md).
//
// The inputs are read in order by one reader thread, tokenized by `threads` workers in batches,
// and written in input order by the calling thread, so the bytes on disk do not depend on the
// thread count. Everything goes into a staging directory <out>/.<name>.partial-<pid>; the manifest
// is written last inside it, then the directory is renamed to <out>/<name> in one step. A
// preparation that fails removes its staging directory; one that is killed leaves it, never a
// manifest at the destination, and the next preparation of the same name removes it.
//
// Training sources give "train" and "validation": document i (counted over all training sources
// in input order) is held out when SplitHash(seed, i) / 2^64 < validation_fraction. Each --eval set
// is prepared whole from its own sources.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "datasets/format/manifest.h"
#include "datasets/prepare/inputs.h"

namespace parity::datasets {

// 2^28 ids: 512 MiB a shard at 16 bits, so a 500B-token mix is ~1,900 files, each small enough to
// copy, hash and re-fetch alone and large enough that per-file costs vanish.
inline constexpr int64_t kDefaultShardTokens = int64_t{1} << 28;

struct EvalSource {
  std::string name;  // a plain dataset-style name, not "train" or "validation"
  std::vector<std::string> inputs;
};

// Counters for the progress line; bytes are of input files as read.
struct PrepareProgress {
  std::string phase;  // "train" (the training sources) or an evaluation set's name
  int64_t bytes_read = 0;
  int64_t total_bytes = 0;  // of every input file; ETA = elapsed · (total − read) / read
  int64_t tokens = 0;
  int64_t documents = 0;
  double elapsed_seconds = 0;
};

struct PrepareOptions {
  std::string out_dir;
  std::string name;
  std::vector<std::string> inputs;  // the training sources
  std::vector<EvalSource> eval_sets;
  InputOptions input;
  std::string tokenizer = "bytes";  // "bytes" or a SentencePiece .model path
  SplitRule split_rule;
  int64_t shard_tokens = kDefaultShardTokens;
  int threads = 1;
  bool force = false;  // replace an existing <out>/<name>
  // Called from the writer (calling) thread after every batch; may be empty.
  std::function<void(const PrepareProgress&)> on_progress;
  // Called after each shard is closed, staging directory and all; may be empty (the tests pause
  // here to kill the process).
  std::function<void(const std::string& staging_dir, const Shard&)> on_shard_closed;
};

struct PrepareResult {
  Manifest manifest;
  std::string digest;           // SHA-256 of manifest.json
  std::string path;             // <out>/<name>
  int64_t empty_documents = 0;  // JSON Lines records whose text was empty, skipped
};

absl::StatusOr<PrepareResult> PrepareDataset(const PrepareOptions& options);

// The split rule's hash (SplitMix64 of seed and document index).
uint64_t SplitHash(uint64_t seed, int64_t document);
bool IsValidationDocument(const SplitRule& rule, int64_t document);

// The name rules for --name and --eval names (core/dataset_name.h; eval names may not be "train"
// or "validation").
absl::Status CheckEvalSetName(absl::string_view name);

}  // namespace parity::datasets
