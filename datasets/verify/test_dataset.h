// Tests only: writes a tiny prepared dataset (byte tokenizer, 2-byte tokens) the way
// `parity data prepare` lays one out (datasets/format/manifest.h), so that verification, the
// worker and the scheduler can be tested before and apart from the real preparation tool.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "datasets/format/manifest.h"

namespace parity::datasets::testing {

struct TestDatasetOptions {
  std::string name = "tiny";
  int train_shards = 2;
  int tokens_per_shard = 64;
  std::vector<std::string> eval_sets = {"validation"};  // one shard each
  int seed = 1;                                         // varies the bytes (and so the digest)
};

// Writes <corpus_dir>/<name>/ (shards, document files, manifest.json last) and returns the
// manifest's SHA-256, the dataset's digest.
absl::StatusOr<std::string> WriteTestDataset(const std::string& corpus_dir,
                                             const TestDatasetOptions& options);

}  // namespace parity::datasets::testing
