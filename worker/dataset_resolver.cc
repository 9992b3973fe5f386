#include "worker/dataset_resolver.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "core/dataset_name.h"
#include "datasets/format/manifest.h"
#include "worker/confined_path.h"

namespace parity::worker {
namespace {

// The name as a viewer may see it back: printable ASCII, at most 128 characters.
std::string Shown(absl::string_view name) {
  std::string out;
  for (const char c : name.substr(0, core::kMaxDatasetNameBytes)) {
    out += (c >= 0x20 && c < 0x7f) ? c : '?';
  }
  if (name.size() > core::kMaxDatasetNameBytes) out += "…";
  return out;
}

}  // namespace

absl::StatusOr<ResolvedDataset> ResolveDataset(const std::string& data_dir, absl::string_view name,
                                               const DatasetLimits& limits) {
  if (absl::Status plain = core::CheckDatasetName(name); !plain.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("data.corpus: '", Shown(name), "' is not a dataset name: ", plain.message()));
  }
  if (data_dir.empty()) {
    return absl::NotFoundError(
        absl::StrCat("dataset '", name, "': this worker has no --corpus-dir"));
  }
  // A prepared dataset: the directory and its manifest, neither a link (the directory's real path
  // is the manifest's parent's).
  absl::StatusOr<ConfinedFile> manifest =
      FindRegularFileBelow(data_dir, std::vector<absl::string_view>{name, datasets::kManifestFile});
  if (manifest.ok()) {
    ResolvedDataset prepared;
    prepared.name = std::string(name);
    prepared.kind = DatasetKind::kPrepared;
    prepared.path = manifest->path.substr(0, manifest->path.rfind('/'));
    return prepared;
  }
  // A link or a special file where a prepared dataset would be is no dataset; the raw spellings
  // are still tried (NAME.txt comes before NAME), and the refusal is what the log reads if they
  // fail too.
  const bool refused_prepared = absl::IsPermissionDenied(manifest.status());
  absl::Status missing;
  for (const std::string& file : {absl::StrCat(name, ".txt"), std::string(name)}) {
    absl::StatusOr<ConfinedFile> found =
        FindRegularFileBelow(data_dir, std::vector<absl::string_view>{file});
    if (absl::IsNotFound(found.status())) {
      missing = found.status();
      continue;  // the next spelling
    }
    if (!found.ok()) {
      // A link, a device, a FIFO, a directory, an unreadable root: nothing this worker trains on.
      return absl::NotFoundError(
          absl::StrCat("dataset '", name,
                       "': ", (refused_prepared ? manifest.status() : found.status()).message()));
    }
    if (found->bytes > limits.max_bytes) {
      return absl::ResourceExhaustedError(
          absl::StrCat("dataset '", name, "': ", found->path, " is ", found->bytes,
                       " bytes, over the limit of ", limits.max_bytes, " (--max-dataset-bytes)"));
    }
    ResolvedDataset raw;
    raw.name = std::string(name);
    raw.path = found->path;
    raw.bytes = found->bytes;
    return raw;
  }
  return absl::NotFoundError(
      absl::StrCat("dataset '", name, "' not in ", data_dir, " (", missing.message(), ")"));
}

std::string DatasetFailureForViewers(absl::string_view name, absl::string_view worker_id,
                                     const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
      return absl::StrCat("data.corpus: '", Shown(name), "' is not a dataset name; ",
                          core::kDatasetNameRemedy);
    case absl::StatusCode::kResourceExhausted:
      return absl::StrCat("dataset '", Shown(name), "' is over worker ", worker_id,
                          "'s size limit for datasets");
    default:
      return absl::StrCat("dataset '", Shown(name), "' not found on worker ", worker_id);
  }
}

}  // namespace parity::worker
