// The data path: a corpus of token ids read through memory maps (token_source.h), its training
// split cut into windows of S+1 tokens (S inputs, S shifted targets; consecutive windows share one
// token), a unique budget D̂ of those windows, a per-epoch seeded order over that budget, and the
// named evaluation sets.
//
// Two inputs (DataConfig.corpus_path):
//   - a prepared dataset directory (datasets/format/manifest.h): the train split is its "train"
//     shards concatenated; evaluation sets are the manifest's (validation first); ids are 2 or 4
//     bytes; tokenizer.token_bytes gives the bytes of text each id stands for.
//   - a raw byte file (a token is a byte, vocabulary 256): the last validation_fraction of it is
//     the one evaluation set "validation", the rest the training split.
//
// A run's position in its data is one integer g, the number of windows consumed: window g is
// unique window j = order_{g div n}(g mod n), which is training window subset(j). `subset` and
// `order_e` are keyed bijections (permutation.h), so a checkpoint stores g alone and the memory
// held is O(1) in the corpus and in D̂.
//
// Threading: after Open every method is const and may be called from several threads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/data/permutation.h"
#include "kernels/data/token_source.h"
#include "kernels/model/config.h"

namespace parity::kernels {

inline constexpr char kValidationSetName[] = "validation";

class TokenCorpus {
 public:
  // Opens the dataset and checks it against the run. InvalidArgument names the field that cannot
  // be met (data.corpus, data.unique_tokens, data.eval_sets, data.validation_fraction,
  // model.vocab_size), or says the input is no regular file / over config.max_corpus_bytes (raw),
  // or that a shard's size disagrees with the manifest; NotFound if it cannot be opened. No
  // message carries a path or a file's size: it may end up in a run's failure.
  static absl::StatusOr<TokenCorpus> Open(const DataConfig& config, int64_t seq_len,
                                          int64_t vocab_size, uint64_t seed);

  int64_t seq_len() const { return seq_len_; }
  int64_t vocab_size() const { return vocab_size_; }
  int64_t NumTrainWindows() const { return train_windows_; }
  int64_t NumUniqueWindows() const { return subset_size_; }
  int64_t UniqueTokens() const { return NumUniqueWindows() * seq_len_; }
  int64_t TrainTokens() const { return train_.tokens(); }
  // SHA-256 hex of manifest.json (prepared) or of the raw file's bytes: the content, not the path.
  const std::string& Digest() const { return digest_; }

  // The training window (index into the split: tokens [w·S, w·S + S]) of global window g.
  int64_t TrainingWindow(int64_t g) const;
  // Fills `count` training sequences from global window `cursor`: inputs/targets [count, S].
  // Returns the bytes of text the targets cover; InvalidArgument (data.corpus) when an id is
  // outside the vocabulary (a corrupt dataset: not the checkpoint's DataLoss, exit 4).
  absl::StatusOr<int64_t> FillTraining(int64_t cursor, int64_t count, int32_t* inputs,
                                       int32_t* targets) const;
  // Asks the kernel to bring in the pages of those windows (a hint; see TokenStream::WillNeed).
  void WillNeedTraining(int64_t cursor, int64_t count) const;

  // The evaluation sets in report order (the first is the primary one, val_bpc).
  size_t NumEvalSets() const { return eval_.size(); }
  const std::string& EvalSetName(size_t set) const { return eval_[set].name; }
  int64_t NumEvalWindows(size_t set) const { return eval_[set].windows; }
  // Window `index` (from the set's start) into inputs/targets [S]; returns the targets' bytes.
  absl::StatusOr<int64_t> FillEval(size_t set, int64_t index, int32_t* inputs,
                                   int32_t* targets) const;

 private:
  struct EvalSet {
    std::string name;
    TokenStream stream;
    int64_t windows = 0;
  };
  TokenCorpus() : train_(1) {}
  absl::StatusOr<int64_t> FillWindow(const TokenStream& stream, int64_t start, int32_t* inputs,
                                     int32_t* targets) const;
  absl::Status SetUpWindows(const DataConfig& config);

  int64_t seq_len_ = 0;
  int64_t vocab_size_ = 256;
  uint64_t seed_ = 0;
  std::string digest_;
  TokenStream train_;
  std::vector<EvalSet> eval_;
  std::vector<int32_t> token_bytes_;  // [vocab]; empty = one byte per token (raw bytes)
  int64_t train_windows_ = 0;
  int64_t subset_size_ = 0;  // n = D̂ / S
  bool prefix_ = false;      // SubsetMode::kPrefix: subset(j) = j
  KeyedPermutation subset_;  // over [0, train_windows_)
};

// Bits per byte of text: Σ token losses (nats) / (ln 2 · Σ bytes of the target tokens), written
// as mean·(tokens/bytes)/ln 2 so that for bytes (tokens == bytes) it is exactly mean/ln 2.
double BitsPerByte(double mean_nats_per_token, int64_t tokens, int64_t bytes);

}  // namespace parity::kernels
