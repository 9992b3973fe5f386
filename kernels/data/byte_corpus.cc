#include "kernels/data/byte_corpus.h"

#include <algorithm>
#include <fstream>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "kernels/model/rng.h"

namespace parity::kernels {
namespace {

// Seeded Fisher–Yates over [0, n) with our portable generator.
std::vector<int64_t> Permutation(int64_t n, uint64_t seed) {
  std::vector<int64_t> p(n);
  for (int64_t i = 0; i < n; ++i) p[i] = i;
  Rng rng{.seed = seed};
  for (int64_t i = n - 1; i > 0; --i) std::swap(p[i], p[rng.Below(i + 1)]);
  return p;
}

}  // namespace

absl::StatusOr<ByteCorpus> ByteCorpus::Load(const DataConfig& config, int64_t seq_len,
                                            uint64_t seed) {
  std::ifstream in(config.corpus_path, std::ios::binary);
  if (!in)
    return absl::NotFoundError(
        absl::StrCat("data.corpus_path: cannot open '", config.corpus_path, "'"));
  ByteCorpus c;
  c.bytes_.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  c.seq_len_ = seq_len;
  c.seed_ = seed;
  c.digest_ = 1469598103934665603ULL;
  for (unsigned char b : c.bytes_) c.digest_ = (c.digest_ ^ b) * 1099511628211ULL;
  const int64_t size = static_cast<int64_t>(c.bytes_.size());
  c.split_ = static_cast<int64_t>(static_cast<double>(size) * (1.0 - config.validation_fraction));
  const int64_t train_windows = c.split_ > seq_len ? (c.split_ - 1) / seq_len : 0;
  c.validation_windows_ = size - c.split_ > seq_len ? (size - c.split_ - 1) / seq_len : 0;
  if (train_windows == 0) {
    return absl::InvalidArgumentError(absl::StrCat("data.corpus_path: training split of ", c.split_,
                                                   " bytes holds no window of ", seq_len));
  }
  if (c.validation_windows_ == 0) {
    return absl::InvalidArgumentError(absl::StrCat("data.validation_fraction: validation split of ",
                                                   size - c.split_, " bytes holds no window of ",
                                                   seq_len));
  }
  int64_t n = train_windows;
  if (config.unique_tokens > 0) {
    n = config.unique_tokens / seq_len;
    if (n > train_windows) {
      return absl::InvalidArgumentError(absl::StrCat("data.unique_tokens: ", config.unique_tokens,
                                                     " exceeds the training split's ",
                                                     train_windows * seq_len, " tokens"));
    }
  }
  std::vector<int64_t> chosen(n);
  if (config.subset == SubsetMode::kPrefix) {
    for (int64_t i = 0; i < n; ++i) chosen[i] = i;
  } else {
    // A seeded subset, independent of the epoch shuffles (different stream). Spread over the
    // whole split, and nested: for one seed a smaller D̂ is a subset of a larger one.
    std::vector<int64_t> all = Permutation(train_windows, Rng::Mix(seed ^ 0x5eed5eedULL));
    chosen.assign(all.begin(), all.begin() + n);
    std::sort(chosen.begin(), chosen.end());
  }
  c.unique_.resize(n);
  for (int64_t i = 0; i < n; ++i) c.unique_[i] = chosen[i] * seq_len;
  return c;
}

const std::vector<int64_t>& ByteCorpus::EpochOrder(int64_t epoch) {
  if (epoch != cached_epoch_) {
    order_ = Permutation(NumUniqueWindows(), Rng::Mix(seed_ + 0x9e37ULL * (epoch + 1)));
    cached_epoch_ = epoch;
  }
  return order_;
}

void ByteCorpus::FillWindow(int64_t start, int32_t* inputs, int32_t* targets) const {
  for (int64_t j = 0; j < seq_len_; ++j) {
    inputs[j] = bytes_[start + j];
    targets[j] = bytes_[start + j + 1];
  }
}

void ByteCorpus::FillTraining(int64_t cursor, int64_t count, int32_t* inputs, int32_t* targets) {
  const int64_t n = NumUniqueWindows();
  for (int64_t i = 0; i < count; ++i) {
    const int64_t g = cursor + i;
    const std::vector<int64_t>& order = EpochOrder(g / n);
    FillWindow(unique_[order[g % n]], inputs + i * seq_len_, targets + i * seq_len_);
  }
}

void ByteCorpus::FillValidation(int64_t index, int32_t* inputs, int32_t* targets) const {
  FillWindow(split_ + index * seq_len_, inputs, targets);
}

}  // namespace parity::kernels
