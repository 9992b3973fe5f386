#include "datasets/prepare/prepare.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "core/dataset_name.h"
#include "core/status_macros.h"
#include "datasets/prepare/pipeline.h"
#include "datasets/prepare/staging.h"
#include "datasets/prepare/tokenizer.h"

namespace parity::datasets {
namespace {

absl::Status CheckOptions(const PrepareOptions& options) {
  if (absl::Status name = core::CheckDatasetName(options.name); !name.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--name: ", name.message()));
  }
  if (options.out_dir.empty()) return absl::InvalidArgumentError("--out: required");
  if (options.shard_tokens < 1024 || options.shard_tokens > (int64_t{1} << 40)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--shard-tokens: ", options.shard_tokens, " is outside [1024, 2^40]"));
  }
  if (options.threads < 1 || options.threads > 1024) {
    return absl::InvalidArgumentError(
        absl::StrCat("--threads: ", options.threads, " is outside [1, 1024]"));
  }
  const double fraction = options.split_rule.validation_fraction;
  if (!(fraction >= 0 && fraction < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--validation-fraction: ", fraction, " is outside [0, 1)"));
  }
  std::vector<std::string> seen;
  for (const EvalSource& set : options.eval_sets) {
    PARITY_RETURN_IF_ERROR(CheckEvalSetName(set.name));
    if (std::find(seen.begin(), seen.end(), set.name) != seen.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--eval: '", set.name, "' is given twice; give each set one name"));
    }
    seen.push_back(set.name);
  }
  return absl::OkStatus();
}

// A group of sources and the splits it fills.
struct Group {
  std::string phase;
  std::vector<InputFile> files;
  std::vector<std::string> sources;
};

absl::StatusOr<std::vector<Group>> ExpandGroups(const PrepareOptions& options) {
  std::vector<Group> groups;
  PARITY_ASSIGN_OR_RETURN(std::vector<InputFile> train,
                          ExpandInputs(options.inputs, options.input, "--input"));
  groups.push_back(Group{std::string(kTrainSplit), std::move(train), options.inputs});
  for (const EvalSource& set : options.eval_sets) {
    PARITY_ASSIGN_OR_RETURN(
        std::vector<InputFile> files,
        ExpandInputs(set.inputs, options.input, absl::StrCat("--eval ", set.name)));
    groups.push_back(Group{set.name, std::move(files), set.inputs});
  }
  return groups;
}

absl::Status CheckSplitsHaveText(const Manifest& m, int64_t documents_in_train_sources) {
  if (m.train.tokens == 0) {
    return absl::InvalidArgumentError(
        "--input: the training sources hold no text (every document was empty)");
  }
  for (const Split& set : m.eval_sets) {
    if (set.tokens > 0) continue;
    if (set.name == kValidationSet) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--validation-fraction: none of the ", documents_in_train_sources,
          " training documents was held out for \"validation\"; give more documents (--documents "
          "paragraph or line cuts a file into many), a larger fraction, or 0 for none"));
    }
    return absl::InvalidArgumentError(
        absl::StrCat("--eval ", set.name, ": its sources hold no text"));
  }
  return absl::OkStatus();
}

// Closes a split's last shard and fills its counts and shards (text and token bytes were summed
// while writing).
absl::Status FinishSplit(ShardWriter& writer, Split& counts) {
  PARITY_ASSIGN_OR_RETURN(Split written, writer.Finish());
  counts.tokens = written.tokens;
  counts.documents = written.documents;
  counts.shards = std::move(written.shards);
  return absl::OkStatus();
}

// Tokenizes every group into `staging`, filling the manifest's splits.
absl::Status WriteSplits(const PrepareOptions& options, const TextTokenizer& tokenizer,
                         std::vector<Group> groups, const std::string& staging, Manifest& m,
                         int64_t& empty_documents) {
  const auto start = std::chrono::steady_clock::now();
  int64_t total_bytes = 0, bytes_before = 0, tokens_before = 0, documents_before = 0;
  for (const Group& g : groups) {
    for (const InputFile& f : g.files) total_bytes += f.bytes;
  }
  auto shard_closed = [&](const Shard& shard) {
    if (options.on_shard_closed) options.on_shard_closed(staging, shard);
  };
  const bool hold_out = options.split_rule.validation_fraction > 0;
  int64_t train_documents = 0;
  for (size_t g = 0; g < groups.size(); ++g) {
    const bool training = g == 0;
    Split primary;
    primary.name = groups[g].phase;
    primary.sources = groups[g].sources;
    Split held_out;
    held_out.name = std::string(kValidationSet);
    held_out.sources = groups[g].sources;
    ShardWriter primary_writer(staging, primary.name, m.token_width, options.shard_tokens,
                               shard_closed);
    ShardWriter held_out_writer(staging, held_out.name, m.token_width, options.shard_tokens,
                                shard_closed);
    PipelineSinks sinks{.primary = &primary_writer, .primary_counts = &primary};
    if (training && hold_out) {
      sinks.rule = &options.split_rule;
      sinks.held_out = &held_out_writer;
      sinks.held_out_counts = &held_out;
    }
    DocumentReader reader(std::move(groups[g].files), options.input);
    PipelineStats stats;
    auto on_batch = [&](const PipelineStats& s) {
      if (!options.on_progress) return;
      options.on_progress(PrepareProgress{
          .phase = primary.name,
          .bytes_read = bytes_before + s.bytes_read,
          .total_bytes = total_bytes,
          .tokens = tokens_before + s.tokens,
          .documents = documents_before + s.documents,
          .elapsed_seconds =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()});
    };
    PARITY_RETURN_IF_ERROR(
        RunPipeline(reader, tokenizer, options.input, sinks, options.threads, on_batch, stats));
    bytes_before += stats.bytes_read;
    tokens_before += stats.tokens;
    documents_before += stats.documents;
    empty_documents += stats.empty_documents;
    PARITY_RETURN_IF_ERROR(FinishSplit(primary_writer, primary));
    if (training) {
      train_documents = stats.documents;
      m.train = std::move(primary);
      if (hold_out) {
        PARITY_RETURN_IF_ERROR(FinishSplit(held_out_writer, held_out));
        m.eval_sets.push_back(std::move(held_out));
      }
    } else {
      m.eval_sets.push_back(std::move(primary));
    }
  }
  return CheckSplitsHaveText(m, train_documents);
}

}  // namespace

uint64_t SplitHash(uint64_t seed, int64_t document) {
  // SplitMix64 of (seed, index): a fixed, documented function, the same on every machine.
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(document) + 1;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

bool IsValidationDocument(const SplitRule& rule, int64_t document) {
  // The top 53 bits as a double in [0, 1).
  const double u = static_cast<double>(SplitHash(rule.seed, document) >> 11) * 0x1.0p-53;
  return u < rule.validation_fraction;
}

absl::Status CheckEvalSetName(absl::string_view name) {
  if (absl::Status plain = core::CheckDatasetName(name); !plain.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--eval: '", name,
        "': ", absl::StripSuffix(plain.message(), absl::StrCat("; ", core::kDatasetNameRemedy)),
        "; name the set like a dataset (e.g. \"prose\")"));
  }
  if (name == kTrainSplit || name == kValidationSet) {
    return absl::InvalidArgumentError(
        absl::StrCat("--eval: '", name,
                     "' is taken by the training sources' own split; choose "
                     "another name"));
  }
  return absl::OkStatus();
}

absl::StatusOr<PrepareResult> PrepareDataset(const PrepareOptions& options) {
  PARITY_RETURN_IF_ERROR(CheckOptions(options));
  PARITY_ASSIGN_OR_RETURN(std::unique_ptr<TextTokenizer> tokenizer,
                          LoadTokenizer(options.tokenizer));
  PARITY_ASSIGN_OR_RETURN(std::vector<Group> groups, ExpandGroups(options));
  PARITY_ASSIGN_OR_RETURN(std::unique_ptr<StagingDirectory> staging,
                          StagingDirectory::Create(options.out_dir, options.name, options.force));

  Manifest m;
  m.name = options.name;
  m.tokenizer = tokenizer->description();
  m.token_width = TokenWidthFor(m.tokenizer.vocab_size);
  m.split_rule = options.split_rule;
  m.created_by = "parity data prepare 0.1.0";
  if (!tokenizer->model_path().empty()) {
    PARITY_RETURN_IF_ERROR(staging->CopyIn(
        tokenizer->model_path(), std::string(kTokenizerModelFile), m.tokenizer.model_sha256));
  }
  int64_t empty_documents = 0;
  PARITY_RETURN_IF_ERROR(
      WriteSplits(options, *tokenizer, std::move(groups), staging->path(), m, empty_documents));
  PARITY_ASSIGN_OR_RETURN(std::string digest, staging->Commit(SerializeManifest(m)));
  return PrepareResult{.manifest = std::move(m),
                       .digest = std::move(digest),
                       .path = staging->destination(),
                       .empty_documents = empty_documents};
}

}  // namespace parity::datasets
