#include "datasets/prepare/tokenizer_train.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "core/status_macros.h"
#include "datasets/prepare/prepare.h"
#include "datasets/prepare/sentencepiece_bridge.h"
#include "datasets/prepare/tokenizer.h"

namespace parity::datasets {
namespace {

namespace fs = std::filesystem;

absl::Status CheckOptions(const TokenizerTrainOptions& options) {
  if (options.model_type != "bpe" && options.model_type != "unigram") {
    return absl::InvalidArgumentError(absl::StrCat("--model-type: '", options.model_type,
                                                   "' is neither \"bpe\" nor \"unigram\""));
  }
  if (options.vocab_size < kMinSentencePieceVocab || options.vocab_size > (int64_t{1} << 22)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--vocab-size: ", options.vocab_size, " is outside [", kMinSentencePieceVocab,
        ", 4194304]: byte fallback alone takes 256 ids and <unk>, </s> two more (a few thousand "
        "is the least that compresses text well)"));
  }
  if (options.sample_bytes < 1024) {
    return absl::InvalidArgumentError("--sample-bytes: under 1024 bytes is no sample");
  }
  if (!absl::EndsWith(options.out, ".model") || fs::path(options.out).filename() == ".model") {
    return absl::InvalidArgumentError(
        absl::StrCat("--out: '", options.out, "' does not name a file ending in .model"));
  }
  struct stat st {};
  if (!options.force && ::lstat(options.out.c_str(), &st) == 0) {
    return absl::AlreadyExistsError(
        absl::StrCat("--out: '", options.out, "' exists; give --force to replace it"));
  }
  return absl::OkStatus();
}

// Writes the sample's lines to `path`; its bytes and lines.
absl::Status WriteSample(const TokenizerTrainOptions& options, std::vector<InputFile> files,
                         const std::string& path, TrainedTokenizer& result) {
  int64_t total = 0;
  for (const InputFile& f : files) total += f.bytes;
  const double keep = std::min(1.0, static_cast<double>(options.sample_bytes) /
                                        static_cast<double>(std::max<int64_t>(total, 1)));
  const SplitRule rule{.seed = options.seed, .validation_fraction = keep};
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  DocumentReader reader(std::move(files), options.input);
  int64_t line_index = 0;
  TextPiece piece;
  for (;;) {
    PARITY_ASSIGN_OR_RETURN(const bool more, reader.Next(piece));
    if (!more || result.sample_bytes >= options.sample_bytes) break;
    std::string parsed;
    if (piece.jsonl) {
      PARITY_ASSIGN_OR_RETURN(parsed, ExtractJsonlText(piece, reader.files()[piece.file].path,
                                                       options.input.text_field));
    }
    const std::string& text = piece.jsonl ? parsed : piece.text;
    for (absl::string_view line : absl::StrSplit(text, '\n')) {
      if (absl::StripAsciiWhitespace(line).empty()) continue;
      // The same hash as the train/validation rule, over line indices: "held out" = sampled.
      if (!IsValidationDocument(rule, line_index++)) continue;
      out << line << '\n';
      result.sample_bytes += static_cast<int64_t>(line.size()) + 1;
      ++result.sample_lines;
      if (result.sample_bytes >= options.sample_bytes) break;
    }
  }
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write the sample to '", path, "'"));
  if (result.sample_lines == 0) {
    return absl::InvalidArgumentError("--input: the inputs hold no text to train on");
  }
  return absl::OkStatus();
}

// SentencePiece's messages for a vocabulary the sample cannot fill, said in our flags' terms.
absl::Status TrainError(const TokenizerTrainOptions& options, const std::string& error) {
  if (absl::StrContains(error, "smaller than required_chars")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--vocab-size: ", options.vocab_size,
        " is too small for the sample's characters plus 256 byte pieces; raise --vocab-size or "
        "lower --character-coverage (sentencepiece: ",
        error, ")"));
  }
  if (absl::StrContains(error, "too high")) {
    return absl::InvalidArgumentError(
        absl::StrCat("--vocab-size: ", options.vocab_size,
                     " is more pieces than the sample holds; lower --vocab-size or give more text "
                     "(sentencepiece: ",
                     error, ")"));
  }
  return absl::InternalError(absl::StrCat("sentencepiece: training failed: ", error));
}

}  // namespace

absl::StatusOr<TrainedTokenizer> TrainTokenizer(const TokenizerTrainOptions& options) {
  PARITY_RETURN_IF_ERROR(CheckOptions(options));
  PARITY_ASSIGN_OR_RETURN(std::vector<InputFile> files,
                          ExpandInputs(options.inputs, options.input, "--input"));
  const fs::path out(options.out);
  std::error_code error;
  if (out.has_parent_path()) fs::create_directories(out.parent_path(), error);
  const std::string stem = (out.parent_path() / out.stem()).string();
  const std::string partial = absl::StrCat(stem, ".partial-", ::getpid());
  const std::string sample = absl::StrCat(partial, ".sample.txt");
  struct Cleanup {
    std::string partial, sample;
    ~Cleanup() {
      std::remove(sample.c_str());
      std::remove((partial + ".model").c_str());
      std::remove((partial + ".vocab").c_str());
    }
  } cleanup{partial, sample};

  TrainedTokenizer result;
  PARITY_RETURN_IF_ERROR(WriteSample(options, std::move(files), sample, result));
  const std::vector<std::pair<std::string, std::string>> flags = {
      {"input", sample},
      {"model_prefix", partial},
      {"model_type", options.model_type},
      {"vocab_size", absl::StrCat(options.vocab_size)},
      {"character_coverage", absl::StrCat(options.character_coverage)},
      {"byte_fallback", "true"},
      {"split_digits", "true"},
      {"allow_whitespace_only_pieces", "true"},
      {"normalization_rule_name", "identity"},
      {"remove_extra_whitespaces", "false"},
      {"add_dummy_prefix", "false"},
      {"input_sentence_size", "0"},
      {"shuffle_input_sentence", "false"},
      {"max_sentence_length", "16384"},
      {"num_threads", absl::StrCat(options.threads)},
      {"unk_id", "0"},
      {"eos_id", "1"},
      {"bos_id", "-1"},
      {"pad_id", "-1"},
      {"minloglevel", "2"},
  };
  std::string train_error;
  if (!spm::Train(flags, &train_error)) return TrainError(options, train_error);
  if (std::rename((partial + ".model").c_str(), options.out.c_str()) != 0 ||
      std::rename((partial + ".vocab").c_str(), (stem + ".vocab").c_str()) != 0) {
    return absl::InternalError(absl::StrCat("--out: cannot write '", options.out, "'"));
  }
  PARITY_ASSIGN_OR_RETURN(std::unique_ptr<TextTokenizer> loaded,
                          LoadSentencePieceTokenizer(options.out));
  result.model_path = options.out;
  result.vocab_size = loaded->description().vocab_size;
  return result;
}

}  // namespace parity::datasets
