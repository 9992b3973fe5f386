#include "worker/checkpoint_store.h"

#include <filesystem>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "core/checkpoint_uri.h"
#include "worker/confined_path.h"

namespace parity::worker {

namespace fs = std::filesystem;

absl::StatusOr<std::string> CheckpointUriOfFile(const std::string& root, const std::string& run_id,
                                                const std::string& path) {
  const fs::path base = fs::path(root).lexically_normal();
  const fs::path file = fs::path(path).lexically_normal();
  if (!base.is_absolute() || !file.is_absolute()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not an absolute path below ", root));
  }
  const std::string uri = file.lexically_relative(base).generic_string();
  if (absl::Status s = core::CheckCheckpointUri(run_id, uri); !s.ok() || uri.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " is not a checkpoint of run ", run_id, " below ", root, ": ",
                     s.ok() ? "it is the store itself" : s.message()));
  }
  return uri;
}

absl::StatusOr<std::string> CheckpointFileOfUri(const std::string& root, const std::string& run_id,
                                                const std::string& uri) {
  if (uri.empty()) return absl::NotFoundError("no checkpoint file recorded");
  if (absl::Status s = core::CheckCheckpointUri(run_id, uri); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint.uri of run ", run_id, ": ", s.message()));
  }
  const std::vector<absl::string_view> parts = absl::StrSplit(uri, '/');
  absl::StatusOr<ConfinedFile> found = FindRegularFileBelow(root, parts);
  if (found.ok()) return found->path;
  if (absl::IsPermissionDenied(found.status())) {  // a link, a device, a FIFO, a directory
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint.uri of run ", run_id, ": ", found.status().message()));
  }
  return absl::NotFoundError(found.status().message());
}

}  // namespace parity::worker
