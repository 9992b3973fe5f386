// The data path: a byte corpus file split once into training and validation parts, cut into
// sequence windows of S+1 bytes (S inputs, S shifted targets; consecutive windows share one byte),
// a unique budget D̂ of training windows, and a per-epoch seeded shuffle of that budget.
//
// A run's position in its data is one integer, the number of windows consumed so far: window g
// is unique window perm_{epoch}(g mod n) with epoch = g div n. So a checkpoint needs only that
// integer, and a fractional last epoch simply stops part-way through a permutation.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/model/config.h"

namespace parity::kernels {

class ByteCorpus {
 public:
  // Reads the file and builds the split and the unique window set. InvalidArgument names the
  // data.* field that cannot be met, or says the file is no regular file or is over
  // config.max_corpus_bytes (never reading past that bound); NotFound if it cannot be opened.
  // No message carries the path or the file's size: it may end up in a run's failure.
  static absl::StatusOr<ByteCorpus> Load(const DataConfig& config, int64_t seq_len, uint64_t seed);

  int64_t seq_len() const { return seq_len_; }
  int64_t NumUniqueWindows() const { return static_cast<int64_t>(unique_.size()); }
  int64_t UniqueTokens() const { return NumUniqueWindows() * seq_len_; }
  int64_t NumValidationWindows() const { return validation_windows_; }
  int64_t TrainBytes() const { return split_; }
  // FNV-1a over the whole file's bytes: identifies the content independent of its path.
  uint64_t Digest() const { return digest_; }

  // Fills `count` training sequences starting at global window index `cursor`:
  // inputs/targets [count, S]. Not const: caches the current epoch's permutation.
  void FillTraining(int64_t cursor, int64_t count, int32_t* inputs, int32_t* targets);
  // Validation window i (0-based, < NumValidationWindows()) into inputs/targets [S].
  void FillValidation(int64_t index, int32_t* inputs, int32_t* targets) const;

 private:
  ByteCorpus() = default;
  void FillWindow(int64_t start, int32_t* inputs, int32_t* targets) const;
  const std::vector<int64_t>& EpochOrder(int64_t epoch);

  std::vector<unsigned char> bytes_;
  int64_t seq_len_ = 0;
  int64_t split_ = 0;  // first validation byte
  int64_t validation_windows_ = 0;
  uint64_t seed_ = 0;
  uint64_t digest_ = 0;
  std::vector<int64_t> unique_;  // start byte of each unique training window
  int64_t cached_epoch_ = -1;
  std::vector<int64_t> order_;  // permutation of unique_ for cached_epoch_
};

}  // namespace parity::kernels
