#include "worker/dataset_inventory.h"

#include <filesystem>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/dataset_name.h"
#include "spdlog/spdlog.h"

namespace parity::worker {

namespace fs = std::filesystem;

absl::StatusOr<ResolvedDataset> ResolveAndVerifyDataset(const std::string& data_dir,
                                                        absl::string_view name,
                                                        absl::string_view expected_digest,
                                                        const DatasetLimits& limits,
                                                        const DatasetCheck& check) {
  absl::StatusOr<ResolvedDataset> resolved = ResolveDataset(data_dir, name, limits);
  if (!resolved.ok()) return resolved.status();
  absl::StatusOr<datasets::VerifiedDataset> verified =
      resolved->kind == DatasetKind::kPrepared
          ? datasets::VerifyPreparedDataset(resolved->path, expected_digest, *check.cache,
                                            check.verify)
          : datasets::VerifyRawFile(resolved->path, expected_digest, *check.cache, check.verify);
  if (!verified.ok()) return verified.status();
  if (verified->hashed_files > 0) {
    spdlog::info("dataset '{}': hashed {} files ({} bytes) to verify {}", std::string(name),
                 verified->hashed_files, verified->hashed_bytes, resolved->path);
    if (absl::Status saved = check.cache->Save(); !saved.ok()) {
      spdlog::warn("dataset verification cache not saved: {}", saved.ToString());
    }
  }
  resolved->digest = verified->digest;
  return resolved;
}

namespace {

// The names a spec could give for what `data_dir` holds.
std::set<std::string> CandidateNames(const std::string& data_dir) {
  std::set<std::string> names;
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(data_dir, ec)) {
    std::string name = entry.path().filename().string();
    std::error_code kind_ec;
    if (entry.is_symlink(kind_ec)) continue;  // never resolved
    if (entry.is_regular_file(kind_ec) && absl::EndsWith(name, ".txt")) {
      name.resize(name.size() - 4);
    }
    if (core::CheckDatasetName(name).ok()) names.insert(name);
  }
  if (ec) spdlog::error("cannot list --corpus-dir {}: {}", data_dir, ec.message());
  return names;
}

}  // namespace

std::vector<v1::DatasetHolding> ScanDatasets(const std::string& data_dir,
                                             const DatasetLimits& limits,
                                             const DatasetCheck& check) {
  std::vector<v1::DatasetHolding> held;
  if (data_dir.empty()) return held;
  for (const std::string& name : CandidateNames(data_dir)) {
    if (static_cast<int>(held.size()) >= kMaxReportedDatasets) {
      spdlog::warn("--corpus-dir {}: more than {} datasets; the rest are not reported", data_dir,
                   kMaxReportedDatasets);
      break;
    }
    absl::StatusOr<ResolvedDataset> found = ResolveDataset(data_dir, name, limits);
    if (!found.ok()) continue;  // not a dataset (a directory without a manifest, a link)
    absl::StatusOr<datasets::VerifiedDataset> verified =
        found->kind == DatasetKind::kPrepared
            ? datasets::VerifyPreparedDataset(found->path, "", *check.cache, check.verify)
            : datasets::VerifyRawFile(found->path, "", *check.cache, check.verify);
    if (!verified.ok()) {
      spdlog::error(
          "DATASET NOT USABLE: '{}' in {} failed verification and is not reported to the "
          "scheduler; runs on it will fail until it is re-copied: {}",
          name, data_dir, verified.status().ToString());
      continue;
    }
    v1::DatasetHolding holding;
    holding.set_name(name);
    holding.set_digest(verified->digest);
    if (found->kind == DatasetKind::kPrepared) {
      holding.set_train_tokens(static_cast<uint64_t>(verified->manifest.train.tokens));
      holding.set_vocab_size(static_cast<uint32_t>(verified->manifest.tokenizer.vocab_size));
      for (const datasets::Split& set : verified->manifest.eval_sets) {
        holding.add_eval_sets(set.name);
      }
    } else {
      holding.set_train_tokens(static_cast<uint64_t>(found->bytes));  // one token per byte
      holding.set_vocab_size(256);
    }
    spdlog::info("dataset '{}': {} ({} train tokens, {} hashed bytes)", name, verified->digest,
                 holding.train_tokens(), verified->hashed_bytes);
    held.push_back(std::move(holding));
  }
  if (absl::Status saved = check.cache->Save(); !saved.ok()) {
    spdlog::warn("dataset verification cache not saved: {}", saved.ToString());
  }
  return held;
}

std::string DatasetMismatchForViewers(absl::string_view name, absl::string_view worker_id,
                                      const absl::Status& status) {
  std::string what = datasets::ViewerDetail(status);
  if (what.empty()) what = "it cannot be verified";
  // The name was resolved, so it is a plain dataset name (core/dataset_name.h): fit to show.
  return absl::StrCat("dataset '", name, "' on worker ", worker_id,
                      " is not the copy the sweep pinned: ", what,
                      "; re-copy the dataset to that worker or pin the digest the sweep should "
                      "use (data.dataset_digest)");
}

}  // namespace parity::worker
