// Writes small prepared datasets (datasets/format/manifest.h) for the engine's tests without the
// preparation tool: token ids as given, cut into shards of a chosen size, one empty-text document
// per shard in the .doc index, and a manifest whose digests are the files' real SHA-256s.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "datasets/format/manifest.h"

namespace parity::kernels::testing {

struct PreparedSplitSpec {
  std::string name;                  // "train", "validation", another set's name
  std::vector<int64_t> tokens = {};  // the split's token stream
  int64_t shard_tokens = 0;          // tokens per shard (the last may be shorter); 0 = one shard
};

struct PreparedDatasetSpec {
  int64_t vocab_size = 256;  // ids are written 2 bytes wide up to 65536, else 4 (the format's rule)
  std::vector<int32_t> token_bytes = {};  // empty = 1 byte per id
  PreparedSplitSpec train = {};
  std::vector<PreparedSplitSpec> eval_sets = {};  // "validation" first
};

inline std::string WriteBytes(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  return datasets::Sha256Hex(bytes);
}

inline datasets::Split WritePreparedSplit(const std::filesystem::path& dir,
                                          const PreparedSplitSpec& spec, int width,
                                          const std::vector<int32_t>& token_bytes) {
  datasets::Split split;
  split.name = spec.name;
  const int64_t total = static_cast<int64_t>(spec.tokens.size());
  const int64_t per = spec.shard_tokens > 0 ? spec.shard_tokens : std::max<int64_t>(total, 1);
  for (int64_t start = 0, index = 0; start < total; start += per, ++index) {
    const int64_t n = std::min(per, total - start);
    std::string tok;
    for (int64_t i = start; i < start + n; ++i) {
      for (int b = 0; b < width; ++b) tok.push_back(static_cast<char>(spec.tokens[i] >> (8 * b)));
      split.token_bytes += token_bytes[spec.tokens[i]];
    }
    std::string doc(8, '\0');  // one document starting at the shard's token 0
    datasets::Shard shard;
    shard.file = absl::StrFormat("%s-%05d.tok", spec.name, index);
    shard.doc_file = absl::StrFormat("%s-%05d.doc", spec.name, index);
    shard.tokens = n;
    shard.documents = 1;
    shard.sha256 = WriteBytes(dir / shard.file, tok);
    shard.doc_sha256 = WriteBytes(dir / shard.doc_file, doc);
    split.tokens += n;
    split.documents += 1;
    split.shards.push_back(shard);
  }
  split.text_bytes = split.token_bytes;
  split.sources = {"test"};
  return split;
}

// Writes the dataset into `dir` (created) and returns the manifest's SHA-256 hex.
inline std::string WritePreparedDataset(const std::filesystem::path& dir,
                                        const PreparedDatasetSpec& spec) {
  std::filesystem::create_directories(dir);
  datasets::Manifest m;
  m.name = dir.filename().string();
  m.token_width = datasets::TokenWidthFor(spec.vocab_size);
  m.tokenizer.vocab_size = spec.vocab_size;
  m.tokenizer.token_bytes = spec.token_bytes;
  if (m.tokenizer.token_bytes.empty()) m.tokenizer.token_bytes.assign(spec.vocab_size, 1);
  if (spec.vocab_size != 256) {
    m.tokenizer.kind = datasets::TokenizerKind::kSentencePiece;
    m.tokenizer.model_type = "bpe";
    m.tokenizer.model_sha256 = WriteBytes(dir / std::string(datasets::kTokenizerModelFile), "m");
  }
  m.train = WritePreparedSplit(dir, spec.train, m.token_width, m.tokenizer.token_bytes);
  for (const PreparedSplitSpec& set : spec.eval_sets) {
    m.eval_sets.push_back(WritePreparedSplit(dir, set, m.token_width, m.tokenizer.token_bytes));
  }
  m.created_by = "kernels test";
  return WriteBytes(dir / std::string(datasets::kManifestFile), datasets::SerializeManifest(m));
}

}  // namespace parity::kernels::testing
