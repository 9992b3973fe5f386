#include "cli/data_inspect.h"

#include <sys/stat.h>

#include <iostream>
#include <memory>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/commands.h"
#include "cli/table.h"

namespace parity::cli {
namespace {

struct InspectFlags {
  std::string dir;
  bool verify = false;
};

int Fail(const absl::Status& status) {
  std::cerr << "error: " << status.message() << "\n";
  return status.code() == absl::StatusCode::kNotFound          ? kExitNotFound
         : status.code() == absl::StatusCode::kInvalidArgument ? kExitInvalidSpec
                                                               : kExitFailure;
}

absl::StatusOr<datasets::Manifest> Read(const std::string& dir, std::string* digest) {
  absl::StatusOr<datasets::Manifest> m = datasets::ReadManifest(dir, digest);
  if (!m.ok()) {
    return absl::Status(m.status().code(),
                        absl::StrCat(dir, ": ", m.status().message(),
                                     m.status().code() == absl::StatusCode::kNotFound
                                         ? " (not a prepared dataset: `parity data prepare` "
                                           "writes one)"
                                         : ""));
  }
  return m;
}

// Every shard's size = tokens × width (and documents × 8) and its SHA-256 the manifest's.
absl::Status Verify(const std::string& dir, const datasets::Manifest& m) {
  std::vector<const datasets::Split*> splits = {&m.train};
  for (const datasets::Split& s : m.eval_sets) splits.push_back(&s);
  for (const datasets::Split* split : splits) {
    for (const datasets::Shard& shard : split->shards) {
      for (const auto& [file, bytes, sha] :
           {std::tuple(shard.file, shard.tokens * m.token_width, shard.sha256),
            std::tuple(shard.doc_file, shard.documents * 8, shard.doc_sha256)}) {
        const std::string path = absl::StrCat(dir, "/", file);
        struct stat st {};
        if (::stat(path.c_str(), &st) != 0 || st.st_size != bytes) {
          return absl::DataLossError(
              absl::StrCat(path, ": missing or not ", bytes, " bytes; prepare the dataset again"));
        }
        absl::StatusOr<std::string> actual = datasets::Sha256OfFile(path);
        if (!actual.ok()) return actual.status();
        if (*actual != sha) {
          return absl::DataLossError(
              absl::StrCat(path, ": SHA-256 ", *actual, " is not the manifest's ", sha));
        }
      }
    }
  }
  if (m.tokenizer.kind == datasets::TokenizerKind::kSentencePiece) {
    const std::string path = absl::StrCat(dir, "/", datasets::kTokenizerModelFile);
    absl::StatusOr<std::string> actual = datasets::Sha256OfFile(path);
    if (!actual.ok()) return actual.status();
    if (*actual != m.tokenizer.model_sha256) {
      return absl::DataLossError(absl::StrCat(path, ": not the manifest's tokenizer"));
    }
  }
  return absl::OkStatus();
}

std::string Bytes(int64_t n) {
  if (n < 1000) return absl::StrCat(n, " B");
  if (n < 1000000) return absl::StrFormat("%.1f kB", n / 1e3);
  if (n < 1000000000) return absl::StrFormat("%.1f MB", n / 1e6);
  return absl::StrFormat("%.2f GB", n / 1e9);
}

}  // namespace

std::string DescribeManifest(const datasets::Manifest& m, const std::string& digest,
                             const std::string& path) {
  std::string out = absl::StrCat("dataset   ", m.name, "\npath      ", path, "\ndigest    ", digest,
                                 "\nformat    ", m.format, "\n");
  if (m.tokenizer.kind == datasets::TokenizerKind::kBytes) {
    absl::StrAppend(&out, "tokenizer bytes (vocabulary 256, no end-of-document id)");
  } else {
    absl::StrAppend(&out, "tokenizer sentencepiece ", m.tokenizer.model_type, " (vocabulary ",
                    m.tokenizer.vocab_size, ", end-of-document id ", m.tokenizer.eos_id,
                    ", model sha256 ", m.tokenizer.model_sha256.substr(0, 16), "…)");
  }
  absl::StrAppend(&out, "\ntoken ids ", m.token_width * 8, "-bit little-endian\nsplit     seed ",
                  m.split_rule.seed, ", validation fraction ", m.split_rule.validation_fraction,
                  " of documents\n\n");
  std::vector<const datasets::Split*> splits = {&m.train};
  for (const datasets::Split& s : m.eval_sets) splits.push_back(&s);
  std::vector<TableRow> rows;
  for (const datasets::Split* s : splits) {
    rows.push_back({s->name, absl::StrCat(s->tokens), absl::StrCat(s->documents),
                    Bytes(s->text_bytes), Bytes(s->token_bytes),
                    s->tokens > 0 ? absl::StrFormat("%.2f", static_cast<double>(s->token_bytes) /
                                                                static_cast<double>(s->tokens))
                                  : "-",
                    absl::StrCat(s->shards.size())});
  }
  absl::StrAppend(&out, RenderTable({"split", "tokens", "documents", "text", "token bytes",
                                     "bytes/token", "shards"},
                                    rows, {"split"}));
  return out;
}

void RegisterDataInspectCommands(CLI::App& data, int& exit_code) {
  auto digest_dir = std::make_shared<std::string>();
  CLI::App* d = data.add_subcommand(
      "digest", "Print a prepared dataset's digest (SHA-256 of its manifest.json)");
  d->add_option("dir", *digest_dir, "The dataset's directory")->required();
  d->callback([digest_dir, &exit_code] {
    std::string digest;
    absl::StatusOr<datasets::Manifest> m = Read(*digest_dir, &digest);
    if (!m.ok()) {
      exit_code = Fail(m.status());
      return;
    }
    std::cout << digest << "\n";
    exit_code = kExitOk;
  });

  auto flags = std::make_shared<InspectFlags>();
  CLI::App* i = data.add_subcommand("inspect", "Summarise a prepared dataset");
  i->add_option("dir", flags->dir, "The dataset's directory")->required();
  i->add_flag("--verify", flags->verify,
              "Also check every shard's size and SHA-256 against the manifest");
  i->callback([flags, &exit_code] {
    std::string digest;
    absl::StatusOr<datasets::Manifest> m = Read(flags->dir, &digest);
    if (!m.ok()) {
      exit_code = Fail(m.status());
      return;
    }
    std::cout << DescribeManifest(*m, digest, flags->dir);
    if (flags->verify) {
      if (absl::Status verified = Verify(flags->dir, *m); !verified.ok()) {
        exit_code = Fail(verified);
        return;
      }
      std::cout << "verified: every shard's size and SHA-256 match the manifest\n";
    }
    exit_code = kExitOk;
  });
}

}  // namespace parity::cli
