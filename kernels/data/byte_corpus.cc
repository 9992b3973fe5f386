#include "kernels/data/byte_corpus.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

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

// The file's bytes, refusing anything but a regular file of at most `max_bytes` (defence in
// depth behind the worker's dataset resolver: a device or a FIFO never ends, and the whole file is
// held in memory). Never reads more than max_bytes + 1 bytes, even if the file grows meanwhile.
// The messages name no path: they can reach a run's failure, which every viewer reads.
absl::StatusOr<std::vector<unsigned char>> ReadCorpusFile(const std::string& path,
                                                          int64_t max_bytes) {
  // O_NONBLOCK: opening a FIFO for reading must not wait for a writer.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return absl::NotFoundError("data.corpus: the dataset file cannot be opened");
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError("data.corpus: the dataset is not a regular file");
  }
  if (st.st_size > max_bytes) {
    ::close(fd);
    return absl::InvalidArgumentError(
        absl::StrCat("data.corpus: the dataset is over the engine's limit of ", max_bytes,
                     " bytes (--max-corpus-bytes)"));
  }
  std::vector<unsigned char> bytes(static_cast<size_t>(st.st_size));
  size_t done = 0;
  unsigned char extra = 0;
  for (;;) {
    unsigned char* dst = done < bytes.size() ? bytes.data() + done : &extra;
    const size_t want = done < bytes.size() ? bytes.size() - done : 1;
    const ssize_t n = ::read(fd, dst, want);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ::close(fd);
      return absl::NotFoundError("data.corpus: the dataset file cannot be read");
    }
    if (n == 0) break;
    if (dst == &extra) {  // it grew since fstat: refuse rather than read on
      ::close(fd);
      return absl::InvalidArgumentError("data.corpus: the dataset changed while it was read");
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  bytes.resize(done);  // it shrank since fstat
  return bytes;
}

}  // namespace

absl::StatusOr<ByteCorpus> ByteCorpus::Load(const DataConfig& config, int64_t seq_len,
                                            uint64_t seed) {
  ByteCorpus c;
  absl::StatusOr<std::vector<unsigned char>> bytes =
      ReadCorpusFile(config.corpus_path, config.max_corpus_bytes);
  if (!bytes.ok()) return bytes.status();
  c.bytes_ = *std::move(bytes);
  c.seq_len_ = seq_len;
  c.seed_ = seed;
  c.digest_ = 1469598103934665603ULL;
  for (unsigned char b : c.bytes_) c.digest_ = (c.digest_ ^ b) * 1099511628211ULL;
  const int64_t size = static_cast<int64_t>(c.bytes_.size());
  c.split_ = static_cast<int64_t>(static_cast<double>(size) * (1.0 - config.validation_fraction));
  const int64_t train_windows = c.split_ > seq_len ? (c.split_ - 1) / seq_len : 0;
  c.validation_windows_ = size - c.split_ > seq_len ? (size - c.split_ - 1) / seq_len : 0;
  if (train_windows == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("data.corpus: the dataset's training split holds no window of "
                     "sequence_length ",
                     seq_len));
  }
  if (c.validation_windows_ == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("data.validation_fraction: the dataset's validation split holds no window "
                     "of sequence_length ",
                     seq_len));
  }
  int64_t n = train_windows;
  if (config.unique_tokens > 0) {
    n = config.unique_tokens / seq_len;
    if (n > train_windows) {
      // The split's size is not told: it is the dataset file's size, a worker's business.
      return absl::InvalidArgumentError(absl::StrCat(
          "data.unique_tokens: ", config.unique_tokens,
          " exceeds the dataset's training split; name a larger dataset or ask for fewer"));
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
