// `parity data prepare|tokenizer train|digest|inspect`: prepared token datasets (docs/data.md).
// The work is datasets/prepare/ (a library); this file turns flags into its options, prints
// progress and summaries, and maps errors to exit codes: a bad input, flag or destination is 2
// ("error: FLAG: REASON"), a missing manifest 3, anything else 1.
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "cli/commands.h"
#include "cli/data_inspect.h"
#include "datasets/prepare/prepare.h"
#include "datasets/prepare/tokenizer_train.h"

namespace parity::cli {
namespace {

using datasets::DocumentUnit;
using datasets::InputFormat;

// The tests' hook: with this set, `prepare` stops for good after its first shard is written so a
// test can kill it mid-way (datasets/tests/cli_data_test.sh).
constexpr char kPauseEnv[] = "PARITY_DATA_TEST_PAUSE_AFTER_SHARD";

struct InputFlags {
  std::string format = "auto";
  std::string documents = "file";
  std::string text_field = "text";
};

struct PrepareFlags {
  std::vector<std::string> inputs;
  std::vector<std::string> evals;  // NAME=INPUT[,INPUT...]
  std::string out;
  std::string name;
  std::string tokenizer = "bytes";
  InputFlags input;
  double validation_fraction = 0.01;
  uint64_t seed = 1;
  int64_t shard_tokens = datasets::kDefaultShardTokens;
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  bool force = false;
  bool progress = false;
};

struct TrainFlags {
  datasets::TokenizerTrainOptions options;
  InputFlags input;
};

int ExitCodeFor(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kFailedPrecondition:
      return kExitInvalidSpec;
    default:
      return kExitFailure;
  }
}

int Fail(const absl::Status& status) {
  std::cerr << "error: " << status.message() << "\n";
  return ExitCodeFor(status);
}

datasets::InputOptions InputOptionsOf(const InputFlags& flags) {
  datasets::InputOptions options;
  options.format = flags.format == "jsonl"  ? InputFormat::kJsonl
                   : flags.format == "text" ? InputFormat::kText
                                            : InputFormat::kAuto;
  options.documents = flags.documents == "paragraph" ? DocumentUnit::kParagraph
                      : flags.documents == "line"    ? DocumentUnit::kLine
                                                     : DocumentUnit::kFile;
  options.text_field = flags.text_field;
  return options;
}

void AddInputFlags(CLI::App& command, InputFlags& flags) {
  command
      .add_option("--format", flags.format,
                  "auto (default: .jsonl/.ndjson are JSON Lines, the rest plain text), text or "
                  "jsonl")
      ->check(CLI::IsMember({"auto", "text", "jsonl"}));
  command
      .add_option("--documents", flags.documents,
                  "What a document of plain text is: file (default), paragraph (ended by "
                  "blank lines) or line")
      ->check(CLI::IsMember({"file", "paragraph", "line"}));
  command.add_option("--text-field", flags.text_field,
                     "The JSON Lines field holding a document's text (default text)");
}

absl::StatusOr<std::vector<datasets::EvalSource>> ParseEvals(
    const std::vector<std::string>& evals) {
  std::vector<datasets::EvalSource> sets;
  for (const std::string& eval : evals) {
    const size_t eq = eval.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == eval.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--eval: '", eval, "' is not NAME=INPUT[,INPUT...]"));
    }
    datasets::EvalSource set;
    set.name = eval.substr(0, eq);
    set.inputs = absl::StrSplit(eval.substr(eq + 1), ',', absl::SkipEmpty());
    sets.push_back(std::move(set));
  }
  return sets;
}

// One line at most a second on stderr: rewritten in place on a terminal, appended otherwise. The
// last state is always shown (at destruction), so the final counts are on screen.
class ProgressLine {
 public:
  explicit ProgressLine(bool tty) : tty_(tty) {}
  ~ProgressLine() {
    if (pending_) Print();
    if (tty_ && printed_) std::cerr << "\n";
  }
  void Show(const datasets::PrepareProgress& p) {
    latest_ = p;
    pending_ = true;
    if (p.elapsed_seconds - last_ >= 1.0 || !printed_) Print();
  }

 private:
  void Print() {
    const datasets::PrepareProgress& p = latest_;
    last_ = p.elapsed_seconds;
    printed_ = true;
    pending_ = false;
    const double mb = p.bytes_read / 1e6;
    const double rate = p.elapsed_seconds > 0 ? mb / p.elapsed_seconds : 0;
    std::string line =
        absl::StrFormat("%s: %.1f of %.1f MB read, %.1f MB/s, %d tokens, %d documents", p.phase, mb,
                        p.total_bytes / 1e6, rate, p.tokens, p.documents);
    if (p.bytes_read > 0 && p.total_bytes > p.bytes_read) {
      const double eta = p.elapsed_seconds * static_cast<double>(p.total_bytes - p.bytes_read) /
                         static_cast<double>(p.bytes_read);
      absl::StrAppendFormat(&line, ", ETA %d:%02d", static_cast<int64_t>(eta) / 60,
                            static_cast<int64_t>(eta) % 60);
    }
    std::cerr << (tty_ ? "\r\033[K" : "") << line << (tty_ ? "" : "\n") << std::flush;
  }

  const bool tty_;
  datasets::PrepareProgress latest_;
  double last_ = 0;
  bool printed_ = false;
  bool pending_ = false;
};

int RunPrepare(const PrepareFlags& flags) {
  absl::StatusOr<std::vector<datasets::EvalSource>> evals = ParseEvals(flags.evals);
  if (!evals.ok()) return Fail(evals.status());
  datasets::PrepareOptions options;
  options.out_dir = flags.out;
  options.name = flags.name;
  options.inputs = flags.inputs;
  options.eval_sets = *std::move(evals);
  options.input = InputOptionsOf(flags.input);
  options.tokenizer = flags.tokenizer;
  options.split_rule = {.seed = flags.seed, .validation_fraction = flags.validation_fraction};
  options.shard_tokens = flags.shard_tokens;
  options.threads = flags.threads;
  options.force = flags.force;
  const bool show = flags.progress || ::isatty(STDERR_FILENO) == 1;
  std::unique_ptr<ProgressLine> progress;
  if (show) {
    progress = std::make_unique<ProgressLine>(::isatty(STDERR_FILENO) == 1);
    options.on_progress = [&](const datasets::PrepareProgress& p) { progress->Show(p); };
  }
  if (const char* pause = std::getenv(kPauseEnv); pause != nullptr && *pause != '\0') {
    options.on_shard_closed = [](const std::string& staging, const datasets::Shard& shard) {
      std::cerr << "paused after " << staging << "/" << shard.file << "\n" << std::flush;
      for (;;) ::pause();
    };
  }
  absl::StatusOr<datasets::PrepareResult> result = datasets::PrepareDataset(options);
  progress.reset();
  if (!result.ok()) return Fail(result.status());
  std::cout << DescribeManifest(result->manifest, result->digest, result->path);
  if (result->empty_documents > 0) {
    std::cerr << "note: skipped " << result->empty_documents
              << " JSON Lines records whose text was empty\n";
  }
  return kExitOk;
}

int RunTrain(TrainFlags& flags) {
  flags.options.input = InputOptionsOf(flags.input);
  absl::StatusOr<datasets::TrainedTokenizer> trained = datasets::TrainTokenizer(flags.options);
  if (!trained.ok()) return Fail(trained.status());
  std::cout << absl::StrFormat("%s: %s, %d pieces, trained on %d lines (%.1f MB)\n",
                               trained->model_path, flags.options.model_type, trained->vocab_size,
                               trained->sample_lines, trained->sample_bytes / 1e6);
  return kExitOk;
}

void RegisterPrepare(CLI::App& data, int& exit_code) {
  auto flags = std::make_shared<PrepareFlags>();
  CLI::App* c = data.add_subcommand(
      "prepare", "Tokenize text into a prepared dataset: token shards, document index, manifest");
  c->add_option("inputs,-i,--input", flags->inputs,
                "Training sources: files, directories (recursive, sorted) or globs")
      ->required();
  c->add_option("-o,--out", flags->out, "Directory that receives the dataset's directory")
      ->required();
  c->add_option("-n,--name", flags->name, "The dataset's name (its directory; what specs name)")
      ->required();
  c->add_option("--eval", flags->evals,
                "NAME=INPUT[,INPUT...]: an evaluation set from other sources (repeatable)");
  c->add_option("--tokenizer", flags->tokenizer,
                "bytes (default) or a SentencePiece .model (copied in as tokenizer.model)");
  AddInputFlags(*c, flags->input);
  c->add_option("--validation-fraction", flags->validation_fraction,
                "Share of training documents held out as \"validation\" (default 0.01; 0: none)");
  c->add_option("--seed", flags->seed, "Seed of the train/validation split (default 1)");
  c->add_option("--shard-tokens", flags->shard_tokens,
                "Token ids a shard holds at most (default 268435456 = 2^28)");
  c->add_option("-j,--threads", flags->threads, "Tokenizing threads (default: every core)");
  c->add_flag("--force", flags->force, "Replace an existing dataset of this name");
  c->add_flag("--progress", flags->progress,
              "Progress lines on stderr even when it is not a terminal");
  c->callback([flags, &exit_code] { exit_code = RunPrepare(*flags); });
}

void RegisterTokenizerTrain(CLI::App& data, int& exit_code) {
  auto flags = std::make_shared<TrainFlags>();
  datasets::TokenizerTrainOptions& o = flags->options;
  o.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  CLI::App* tokenizer = data.add_subcommand("tokenizer", "SentencePiece tokenizers");
  tokenizer->require_subcommand(1);
  CLI::App* c = tokenizer->add_subcommand(
      "train", "Train a SentencePiece BPE or unigram model on a deterministic sample of a corpus");
  c->add_option("inputs,-i,--input", o.inputs, "Files, directories or globs to sample")->required();
  c->add_option("-o,--out", o.out, "The model to write, DIR/NAME.model (NAME.vocab beside it)")
      ->required();
  c->add_option("--vocab-size", o.vocab_size, "Pieces, with 256 byte pieces (default 32000)");
  c->add_option("--model-type", o.model_type, "bpe (default) or unigram")
      ->check(CLI::IsMember({"bpe", "unigram"}));
  c->add_option("--sample-bytes", o.sample_bytes, "Text to train on (default 268435456)");
  c->add_option("--character-coverage", o.character_coverage,
                "Share of characters given pieces of their own (default 0.9995)");
  c->add_option("--seed", o.seed, "Seed of the sample (default 1)");
  c->add_option("-j,--threads", o.threads, "Training threads (default: every core)");
  c->add_flag("--force", o.force, "Replace an existing model");
  AddInputFlags(*c, flags->input);
  c->callback([flags, &exit_code] { exit_code = RunTrain(*flags); });
}

}  // namespace

void RegisterDataCommands(CLI::App& app, int& exit_code) {
  CLI::App* data = app.add_subcommand("data", "Prepared token datasets (docs/data.md)");
  data->require_subcommand(1);
  RegisterPrepare(*data, exit_code);
  RegisterTokenizerTrain(*data, exit_code);
  RegisterDataInspectCommands(*data, exit_code);
}

}  // namespace parity::cli
