// Text → token ids for `parity data prepare`. Two implementations behind one interface: bytes
// (ids = the UTF-8 bytes, vocabulary 256, nothing appended: the engine's historical tokenizer)
// and SentencePiece (a trained BPE or unigram .model; its end-of-document id is appended by the
// preparation, not here). Both are immutable once made and safe to call from many threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "datasets/format/manifest.h"

namespace parity::datasets {

class TextTokenizer {
 public:
  virtual ~TextTokenizer() = default;
  // Appends the ids of `text` to `ids`; no end-of-document id. Thread-safe.
  virtual absl::Status Encode(absl::string_view text, std::vector<uint32_t>& ids) const = 0;
  // What the manifest records: kind, vocabulary, eos, model digest and type, token_bytes.
  virtual const Tokenizer& description() const = 0;
  // The .model file to copy into the dataset; empty for bytes.
  virtual const std::string& model_path() const = 0;
};

std::unique_ptr<TextTokenizer> MakeBytesTokenizer();

// Loads a SentencePiece .model; InvalidArgument naming the file when it is missing or is not a
// model. Its SHA-256 is taken from the file's bytes (what tokenizer.model will hold).
absl::StatusOr<std::unique_ptr<TextTokenizer>> LoadSentencePieceTokenizer(const std::string& path);

// "bytes", or the path of a .model file.
absl::StatusOr<std::unique_ptr<TextTokenizer>> LoadTokenizer(const std::string& spec);

}  // namespace parity::datasets
