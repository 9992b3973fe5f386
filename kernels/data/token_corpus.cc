#include "kernels/data/token_corpus.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/status_macros.h"
#include "datasets/format/manifest.h"
#include "kernels/model/rng.h"

namespace parity::kernels {
namespace {

constexpr char kField[] = "data.corpus";
constexpr double kLn2 = 0.6931471805599453;

int64_t WindowsOf(int64_t tokens, int64_t seq_len) {
  return tokens > seq_len ? (tokens - 1) / seq_len : 0;
}

// The evaluation sets a run reports: `wanted` in its order, or all of `available` when empty.
// InvalidArgument naming data.eval_sets and listing the dataset's sets for an unknown name.
absl::StatusOr<std::vector<std::string>> ChooseEvalSets(const std::vector<std::string>& wanted,
                                                        const std::vector<std::string>& available) {
  if (wanted.empty()) return available;
  for (size_t i = 0; i < wanted.size(); ++i) {
    if (std::find(available.begin(), available.end(), wanted[i]) == available.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("data.eval_sets[", i, "]: the dataset has no evaluation set '", wanted[i],
                       "'; its sets are: ", absl::StrJoin(available, ", ")));
    }
    if (std::find(wanted.begin(), wanted.begin() + i, wanted[i]) != wanted.begin() + i) {
      return absl::InvalidArgumentError(
          absl::StrCat("data.eval_sets[", i, "]: '", wanted[i], "' is named twice"));
    }
  }
  return wanted;
}

absl::Status CheckVocab(int64_t dataset_vocab, int64_t model_vocab) {
  if (dataset_vocab == model_vocab) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("model.vocab_size: the model has ", model_vocab,
                                                 " but the dataset's tokenizer.vocab_size is ",
                                                 dataset_vocab, "; set model.vocab_size to ",
                                                 dataset_vocab, " or name another dataset"));
}

// The stream of one prepared split: its shards mapped in order, each checked to hold exactly the
// manifest's tokens (a truncated copy must not train on short data or fault on a page past EOF).
absl::StatusOr<TokenStream> OpenSplit(const std::string& dir, const datasets::Split& split,
                                      int width) {
  TokenStream stream(width);
  for (size_t i = 0; i < split.shards.size(); ++i) {
    const datasets::Shard& shard = split.shards[i];
    PARITY_ASSIGN_OR_RETURN(
        std::unique_ptr<MappedFile> file,
        MappedFile::Open(absl::StrCat(dir, "/", shard.file), kField, /*follow_links=*/false, -1));
    if (file->size() != shard.tokens * width) {
      return absl::InvalidArgumentError(absl::StrCat(
          kField, ": shard ", i, " of split '", split.name,
          "' does not hold the tokens manifest.json says; the dataset is incomplete or "
          "corrupt: prepare or copy it again"));
    }
    stream.Append(std::shared_ptr<const MappedFile>(std::move(file)), 0, shard.tokens);
  }
  return stream;
}

}  // namespace

double BitsPerByte(double mean_nats_per_token, int64_t tokens, int64_t bytes) {
  return mean_nats_per_token / kLn2 * (static_cast<double>(tokens) / static_cast<double>(bytes));
}

absl::StatusOr<TokenCorpus> TokenCorpus::Open(const DataConfig& config, int64_t seq_len,
                                              int64_t vocab_size, uint64_t seed) {
  TokenCorpus c;
  c.seq_len_ = seq_len;
  c.vocab_size_ = vocab_size;
  c.seed_ = seed;
  struct stat st {};
  const bool is_dir = ::stat(config.corpus_path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
  if (is_dir) {
    const std::string& dir = config.corpus_path;
    absl::StatusOr<datasets::Manifest> m = datasets::ReadManifest(dir, &c.digest_);
    if (!m.ok()) {
      return absl::Status(m.status().code(), absl::StrCat(kField, ": ", m.status().message()));
    }
    PARITY_RETURN_IF_ERROR(CheckVocab(m->tokenizer.vocab_size, vocab_size));
    PARITY_ASSIGN_OR_RETURN(c.train_, OpenSplit(dir, m->train, m->token_width));
    c.token_bytes_ = m->tokenizer.token_bytes;
    std::vector<std::string> available;
    for (const datasets::Split& s : m->eval_sets) available.push_back(s.name);
    PARITY_ASSIGN_OR_RETURN(const std::vector<std::string> names,
                            ChooseEvalSets(config.eval_sets, available));
    for (const std::string& name : names) {
      PARITY_ASSIGN_OR_RETURN(TokenStream s,
                              OpenSplit(dir, *datasets::FindEvalSet(*m, name), m->token_width));
      c.eval_.push_back({.name = name, .stream = std::move(s)});
    }
  } else {
    PARITY_RETURN_IF_ERROR(CheckVocab(256, vocab_size));
    PARITY_RETURN_IF_ERROR(ChooseEvalSets(config.eval_sets, {kValidationSetName}).status());
    PARITY_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> file,
                            MappedFile::Open(config.corpus_path, kField, /*follow_links=*/true,
                                             config.max_corpus_bytes));
    // Streamed with read(2), not through the mapping: hashing must not fault the whole file in.
    // Sha256OfFile refuses links; a raw file given by hand may be one (the mapping followed it).
    std::error_code ec;
    const std::filesystem::path real = std::filesystem::canonical(config.corpus_path, ec);
    absl::StatusOr<std::string> digest =
        datasets::Sha256OfFile(ec ? config.corpus_path : real.string());
    if (!digest.ok()) return absl::NotFoundError("data.corpus: the dataset file cannot be read");
    c.digest_ = *std::move(digest);
    const int64_t size = file->size();
    const int64_t split =
        static_cast<int64_t>(static_cast<double>(size) * (1.0 - config.validation_fraction));
    std::shared_ptr<const MappedFile> shared(std::move(file));
    c.train_.Append(shared, 0, split);
    TokenStream validation(1);
    validation.Append(shared, split, size - split);
    c.eval_.push_back({.name = kValidationSetName, .stream = std::move(validation)});
  }
  PARITY_RETURN_IF_ERROR(c.SetUpWindows(config));
  return c;
}

absl::Status TokenCorpus::SetUpWindows(const DataConfig& config) {
  train_windows_ = WindowsOf(train_.tokens(), seq_len_);
  if (train_windows_ == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "data.corpus: the dataset's training split holds no window of sequence_length ", seq_len_));
  }
  for (EvalSet& set : eval_) {
    set.windows = WindowsOf(set.stream.tokens(), seq_len_);
    if (set.windows > 0) continue;
    return absl::InvalidArgumentError(
        absl::StrCat(set.name == kValidationSetName ? "data.validation_fraction" : "data.eval_sets",
                     ": the dataset's evaluation set '", set.name,
                     "' holds no window of sequence_length ", seq_len_));
  }
  subset_size_ = train_windows_;
  if (config.unique_tokens > 0) {
    subset_size_ = config.unique_tokens / seq_len_;
    if (subset_size_ > train_windows_) {
      // The split's size is not told: it is the dataset's size, a worker's business.
      return absl::InvalidArgumentError(absl::StrCat(
          "data.unique_tokens: ", config.unique_tokens,
          " exceeds the dataset's training split; name a larger dataset or ask for fewer"));
    }
    if (subset_size_ == 0) {
      return absl::InvalidArgumentError(absl::StrCat("data.unique_tokens: ", config.unique_tokens,
                                                     " is less than one window of sequence_length ",
                                                     seq_len_));
    }
  }
  prefix_ = config.subset == SubsetMode::kPrefix;
  // The unique windows: those of the smallest ranks under a seeded bijection of all windows, so
  // they spread over the whole split and, for one seed, a smaller D̂ is a subset of a larger one.
  // A different stream from the epoch orders.
  subset_ = KeyedPermutation(train_windows_, Rng::Mix(seed_ ^ 0x5eed5eedULL));
  return absl::OkStatus();
}

int64_t TokenCorpus::TrainingWindow(int64_t g) const {
  const int64_t n = subset_size_, epoch = g / n;
  const KeyedPermutation order(n, Rng::Mix(seed_ + 0x9e37ULL * static_cast<uint64_t>(epoch + 1)));
  const int64_t j = order(g % n);
  return prefix_ ? j : subset_(j);
}

absl::StatusOr<int64_t> TokenCorpus::FillWindow(const TokenStream& stream, int64_t start,
                                                int32_t* inputs, int32_t* targets) const {
  const int64_t S = seq_len_;
  stream.Read(start, S, inputs);
  std::copy(inputs + 1, inputs + S, targets);
  stream.Read(start + S, 1, targets + S - 1);
  bool in_range = targets[S - 1] >= 0 && targets[S - 1] < vocab_size_;
  for (int64_t j = 0; j < S; ++j) in_range &= inputs[j] >= 0 && inputs[j] < vocab_size_;
  if (!in_range) {
    // The manifest was checked; the shards' sha256s are the worker's to check. An id out of
    // range would index past the embedding.
    return absl::InvalidArgumentError(absl::StrCat(
        kField, ": the dataset holds a token id outside the tokenizer's vocabulary of ",
        vocab_size_, "; it is corrupt: prepare or copy it again"));
  }
  if (token_bytes_.empty()) return S;
  int64_t bytes = 0;
  for (int64_t j = 0; j < S; ++j) bytes += token_bytes_[targets[j]];
  return bytes;
}

absl::StatusOr<int64_t> TokenCorpus::FillTraining(int64_t cursor, int64_t count, int32_t* inputs,
                                                  int32_t* targets) const {
  int64_t bytes = 0;
  for (int64_t i = 0; i < count; ++i) {
    PARITY_ASSIGN_OR_RETURN(const int64_t b,
                            FillWindow(train_, TrainingWindow(cursor + i) * seq_len_,
                                       inputs + i * seq_len_, targets + i * seq_len_));
    bytes += b;
  }
  return bytes;
}

void TokenCorpus::WillNeedTraining(int64_t cursor, int64_t count) const {
  for (int64_t i = 0; i < count; ++i) {
    train_.WillNeed(TrainingWindow(cursor + i) * seq_len_, seq_len_ + 1);
  }
}

absl::StatusOr<int64_t> TokenCorpus::FillEval(size_t set, int64_t index, int32_t* inputs,
                                              int32_t* targets) const {
  return FillWindow(eval_[set].stream, index * seq_len_, inputs, targets);
}

}  // namespace parity::kernels
