// A spec's dataset name (data.corpus) → what this worker trains it from, inside its --corpus-dir
// and nowhere else. The rule every dataset follows on a worker (issue #23), with prepared token
// datasets (issue #24, datasets/format/manifest.h) first:
//
//   NAME → <data_dir>/NAME/ when it is a directory holding manifest.json (prepared),
//          else <data_dir>/NAME.txt, else <data_dir>/NAME (a raw byte file)
//
// NAME must be a plain name (core/dataset_name.h); neither the directory, its manifest nor the
// raw file may be a symbolic link (not even one to a file inside: an alias is a hard link or a
// copy). Found with worker/confined_path.h, so no "..", absolute path, link, device or FIFO
// reaches the engine; the shards inside a prepared directory are opened the same way by the
// verification (datasets/verify/verify.h). limits.max_bytes applies to raw files only: the engine
// holds a raw file in memory, but memory-maps a prepared dataset's shards, which may be far larger
// than RAM. Nothing is hashed here (dataset_inventory.h verifies). Pure apart from reading the
// directory; any thread.
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

enum class DatasetKind {
  kRaw,       // one byte file: NAME.txt or NAME
  kPrepared,  // a directory of token shards with manifest.json
};

struct ResolvedDataset {
  std::string name;  // as the spec named it
  DatasetKind kind = DatasetKind::kRaw;
  std::string path;    // absolute, inside the data directory's real path: the file or directory
  int64_t bytes = 0;   // a raw file's size when resolved; 0 for a prepared dataset
  std::string digest;  // SHA-256 (manifest.json's, or the raw file's); set once verified
};

// INVALID_ARGUMENT: `name` is not a plain dataset name. NOT_FOUND: no prepared directory and no
// regular file by that name (absent, a link, a device, a FIFO, a directory without a manifest, or
// no data directory configured). RESOURCE_EXHAUSTED: a raw file over limits.max_bytes. Messages
// name paths and sizes: they are for the worker's log; a run's failure gets
// DatasetFailureForViewers instead.
absl::StatusOr<ResolvedDataset> ResolveDataset(const std::string& data_dir, absl::string_view name,
                                               const DatasetLimits& limits);

// What every viewer of the run may read about a failed resolution: the name, the worker and
// what went wrong in a word ("dataset 'x' not found on worker w"), never a path, a size or
// whether some other file exists.
std::string DatasetFailureForViewers(absl::string_view name, absl::string_view worker_id,
                                     const absl::Status& status);

}  // namespace parity::worker
