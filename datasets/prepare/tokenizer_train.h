// `parity data tokenizer train`: a SentencePiece BPE or unigram model from a sample of a corpus.
//
// The sample is drawn deterministically: every line of the inputs' documents (read as `prepare`
// reads them) is kept when its seeded hash falls under sample_bytes / total input bytes, until
// sample_bytes are taken, so it spreads over the whole corpus rather than its first files. It goes
// to a temporary file beside --out that SentencePiece trains on whole (no sampling of its own).
// The model keeps text as it is — identity normalization, no whitespace folding, no dummy prefix
// — so a prepared split's token bytes equal its text bytes and BPC is per byte of the raw text;
// byte fallback makes every byte representable (no <unk> in practice). Ids: <unk> 0, </s> 1 (the
// end-of-document id), then 256 byte pieces, then the learned pieces.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "datasets/prepare/inputs.h"

namespace parity::datasets {

// 256 byte pieces, <unk> and </s>, and room for at least one learned piece.
inline constexpr int64_t kMinSentencePieceVocab = 259;

struct TokenizerTrainOptions {
  std::vector<std::string> inputs;
  InputOptions input;
  int64_t vocab_size = 32000;
  std::string model_type = "bpe";  // "bpe" or "unigram"
  int64_t sample_bytes = int64_t{256} << 20;
  double character_coverage = 0.9995;
  uint64_t seed = 1;
  int threads = 1;
  std::string out;  // DIR/NAME.model; NAME.vocab is written beside it
  bool force = false;
};

struct TrainedTokenizer {
  std::string model_path;
  int64_t vocab_size = 0;
  int64_t sample_bytes = 0;
  int64_t sample_lines = 0;
};

absl::StatusOr<TrainedTokenizer> TrainTokenizer(const TokenizerTrainOptions& options);

}  // namespace parity::datasets
