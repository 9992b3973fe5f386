// A spec's dataset name (data.corpus) → the one file this worker trains it from, inside its
// --corpus-dir and nowhere else. The rule every dataset follows on a worker (issue #23); prepared
// token shards (issue #24) build on it.
//
//   NAME → <data_dir>/NAME.txt, else <data_dir>/NAME
//
// NAME must be a plain name (core/dataset_name.h); the file must be a regular file, not a
// symbolic link (not even one to a file inside: an alias is a hard link or a copy), of at most
// limits.max_bytes. Found with worker/confined_path.h, so no "..", absolute path, link, device or
// FIFO reaches the engine. Pure apart from reading the directory; any thread.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace parity::worker {

// The engine holds a whole byte corpus in memory: 4 GiB unless the operator says otherwise.
inline constexpr int64_t kDefaultMaxDatasetBytes = int64_t{4} << 30;

struct DatasetLimits {
  int64_t max_bytes = kDefaultMaxDatasetBytes;  // a larger file is refused (bytes)
};

struct ResolvedDataset {
  std::string name;   // as the spec named it
  std::string path;   // absolute, inside the data directory's real path
  int64_t bytes = 0;  // its size when resolved
};

// INVALID_ARGUMENT: `name` is not a plain dataset name. NOT_FOUND: no regular file by that name
// (absent, a link, a device, a FIFO, a directory, or no data directory configured).
// RESOURCE_EXHAUSTED: over limits.max_bytes. Messages name paths and sizes: they are for the
// worker's log; a run's failure gets DatasetFailureForViewers instead.
absl::StatusOr<ResolvedDataset> ResolveDataset(const std::string& data_dir, absl::string_view name,
                                               const DatasetLimits& limits);

// What every viewer of the run may read about a failed resolution: the name, the worker and
// what went wrong in a word ("dataset 'x' not found on worker w"), never a path, a size or
// whether some other file exists.
std::string DatasetFailureForViewers(absl::string_view name, absl::string_view worker_id,
                                     const absl::Status& status);

}  // namespace parity::worker
