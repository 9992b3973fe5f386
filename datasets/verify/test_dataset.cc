#include "datasets/verify/test_dataset.h"

#include <cstdint>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace parity::datasets::testing {
namespace {

absl::Status WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
  if (!out.good()) return absl::InternalError(absl::StrCat("write ", path));
  return absl::OkStatus();
}

// One shard of `tokens` byte tokens (2 bytes each) with one document starting at 0.
absl::StatusOr<Shard> WriteShard(const std::string& dir, const std::string& split, int index,
                                 int tokens, int seed) {
  Shard shard;
  shard.file = absl::StrFormat("%s-%05d.tok", split, index);
  shard.doc_file = absl::StrFormat("%s-%05d.doc", split, index);
  shard.tokens = tokens;
  shard.documents = 1;
  std::string tok;
  for (int i = 0; i < tokens; ++i) {
    const uint16_t id = static_cast<uint16_t>((i * 7 + index * 13 + seed * 31) % 256);
    tok.push_back(static_cast<char>(id & 0xff));
    tok.push_back(static_cast<char>(id >> 8));
  }
  const std::string doc(8, '\0');  // one document at offset 0
  if (auto s = WriteFile(dir + "/" + shard.file, tok); !s.ok()) return s;
  if (auto s = WriteFile(dir + "/" + shard.doc_file, doc); !s.ok()) return s;
  shard.sha256 = Sha256Hex(tok);
  shard.doc_sha256 = Sha256Hex(doc);
  return shard;
}

absl::StatusOr<Split> WriteSplit(const std::string& dir, const std::string& name, int shards,
                                 int tokens, int seed) {
  Split split;
  split.name = name;
  split.sources = {"test"};
  for (int i = 0; i < shards; ++i) {
    absl::StatusOr<Shard> shard = WriteShard(dir, name, i, tokens, seed);
    if (!shard.ok()) return shard.status();
    split.tokens += shard->tokens;
    split.documents += shard->documents;
    split.shards.push_back(*std::move(shard));
  }
  split.text_bytes = split.tokens;
  split.token_bytes = split.tokens;
  return split;
}

}  // namespace

absl::StatusOr<std::string> WriteTestDataset(const std::string& corpus_dir,
                                             const TestDatasetOptions& options) {
  const std::string dir = corpus_dir + "/" + options.name;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("create ", dir, ": ", ec.message()));
  Manifest manifest;
  manifest.name = options.name;
  manifest.token_width = TokenWidthFor(256);
  manifest.tokenizer.token_bytes.assign(256, 1);
  manifest.created_by = "datasets/verify/test_dataset";
  absl::StatusOr<Split> train = WriteSplit(dir, std::string(kTrainSplit), options.train_shards,
                                           options.tokens_per_shard, options.seed);
  if (!train.ok()) return train.status();
  manifest.train = *std::move(train);
  for (const std::string& set : options.eval_sets) {
    absl::StatusOr<Split> split = WriteSplit(dir, set, 1, options.tokens_per_shard, options.seed);
    if (!split.ok()) return split.status();
    manifest.eval_sets.push_back(*std::move(split));
  }
  const std::string json = SerializeManifest(manifest);
  if (absl::StatusOr<Manifest> back = ParseManifest(json); !back.ok()) return back.status();
  if (auto s = WriteFile(dir + "/" + std::string(kManifestFile), json); !s.ok()) return s;
  return Sha256Hex(json);
}

}  // namespace parity::datasets::testing
