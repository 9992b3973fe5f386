// The prepared-dataset format (docs/data.md): one directory per dataset inside a worker's
// --corpus-dir, written by `parity data prepare` and read by the engine through memory maps.
//
//   <corpus-dir>/<name>/manifest.json      this struct, as JSON; written last, atomically
//   <corpus-dir>/<name>/tokenizer.model    the SentencePiece model (sentencepiece only)
//   <corpus-dir>/<name>/<split>-NNNNN.tok  token ids, little-endian, token_width bytes each, no
//                                          header: the file is exactly tokens × width bytes
//   <corpus-dir>/<name>/<split>-NNNNN.doc  uint64 little-endian offsets (in tokens, from the
//                                          shard's start) of each document starting in the shard
//
// A split's token stream is its shards concatenated in order; documents follow each other in it
// (a sentencepiece tokenizer ends each with its end-of-document id, the byte tokenizer adds
// nothing) and may run across a shard boundary. The manifest's SHA-256 names the dataset: it
// holds every shard's and the tokenizer's SHA-256, so equal digests mean equal bytes.
//
// No I/O here but ReadManifest; no protobuf, no Abseil beyond Status.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace parity::datasets {

inline constexpr absl::string_view kFormat = "parity-tokens/1";
inline constexpr absl::string_view kManifestFile = "manifest.json";
inline constexpr absl::string_view kTokenizerModelFile = "tokenizer.model";
inline constexpr absl::string_view kTrainSplit = "train";
// The held-out documents of the training sources: always the first evaluation set.
inline constexpr absl::string_view kValidationSet = "validation";

enum class TokenizerKind { kBytes, kSentencePiece };

struct Tokenizer {
  TokenizerKind kind = TokenizerKind::kBytes;
  int64_t vocab_size = 256;  // token ids are < vocab_size
  int64_t eos_id = -1;       // appended after each document; −1 = none (bytes)
  std::string model_sha256;  // of tokenizer.model; empty for bytes
  std::string model_type;    // "bpe" or "unigram" for sentencepiece; empty for bytes
  // Bytes of text each token id stands for (UTF-8 of its piece, "▁" counting as one space, a
  // byte-fallback piece as one byte, control ids as 0): BPC = Σ token loss / (ln 2 · Σ bytes).
  std::vector<int32_t> token_bytes;  // vocab_size entries
};

struct Shard {
  std::string file;      // "<split>-NNNNN.tok", relative to the dataset directory
  std::string doc_file;  // "<split>-NNNNN.doc"
  int64_t tokens = 0;
  int64_t documents = 0;   // documents starting in this shard (entries in doc_file)
  std::string sha256;      // of file
  std::string doc_sha256;  // of doc_file
};

struct Split {
  std::string name;         // "train", "validation" or an evaluation set's name
  int64_t tokens = 0;       // Σ shard tokens
  int64_t documents = 0;    // Σ shard documents
  int64_t text_bytes = 0;   // UTF-8 bytes of the documents' text as read
  int64_t token_bytes = 0;  // Σ tokenizer.token_bytes over the split's tokens (BPC's divisor)
  std::vector<std::string> sources;  // the inputs it was prepared from, as given (for people)
  std::vector<Shard> shards;
};

// How documents of the training sources were divided between "train" and "validation".
struct SplitRule {
  uint64_t seed = 1;
  double validation_fraction = 0.01;  // of documents, each assigned by a seeded hash of its index
};

struct Manifest {
  std::string format = std::string(kFormat);
  std::string name;     // the dataset's name (its directory's)
  int token_width = 2;  // bytes per token id: 2 when vocab_size ≤ 65536, else 4
  Tokenizer tokenizer;
  SplitRule split_rule;
  Split train;
  std::vector<Split> eval_sets;  // "validation" first, then the named sets in the order given
  std::string created_by;        // tool and version, for people
};

// 2 when every id fits 16 bits, else 4 (the rule; the byte tokenizer takes 2 too).
int TokenWidthFor(int64_t vocab_size);

// Canonical JSON (sorted keys, two-space indent, trailing newline): the bytes manifest.json
// holds, so its SHA-256 is the dataset's digest.
std::string SerializeManifest(const Manifest& manifest);
// InvalidArgument naming the JSON path that is wrong ("manifest.json: train.shards[3].tokens:
// negative"); checks consistency (sums, widths, names, token_bytes size, file names are plain
// names inside the directory) but reads no shard.
absl::StatusOr<Manifest> ParseManifest(absl::string_view json);
// Reads <dir>/manifest.json (a regular file, no link, at most 64 MiB) and parses it; also returns
// its SHA-256 through digest_out when not null.
absl::StatusOr<Manifest> ReadManifest(const std::string& dir, std::string* digest_out);

// Lowercase hex SHA-256 of bytes / of a file's contents (streamed, never wholly in memory).
std::string Sha256Hex(absl::string_view bytes);
absl::StatusOr<std::string> Sha256OfFile(const std::string& path);

// The evaluation set by name, or nullptr.
const Split* FindEvalSet(const Manifest& manifest, absl::string_view name);

}  // namespace parity::datasets
