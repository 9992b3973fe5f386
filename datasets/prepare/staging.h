// The directory a preparation writes into, and the one step that publishes it.
//
// Create makes <out>/.<name>.partial-<pid> (and <out> if missing), after refusing an existing
// <out>/<name> unless `force`, and after removing staging directories that earlier, killed
// preparations of the same name left (their process is gone). Commit writes manifest.json last
// (to a temporary name, fsync'd, renamed) and then renames the whole directory to <out>/<name>;
// with `force` an existing destination is swapped out in one renameat2(RENAME_EXCHANGE) and then
// deleted. A StagingDirectory destroyed uncommitted removes what it wrote, so a failed
// preparation leaves nothing; a killed one leaves only the hidden .partial directory, which no
// reader takes for a dataset (it has no manifest, and it is not at <out>/<name>). A leftover is
// judged abandoned when no process here has its pid: do not run preparations of the same name
// into one shared (network) directory from several machines.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace parity::datasets {

class StagingDirectory {
 public:
  static absl::StatusOr<std::unique_ptr<StagingDirectory>> Create(const std::string& out_dir,
                                                                  const std::string& name,
                                                                  bool force);
  ~StagingDirectory();
  StagingDirectory(const StagingDirectory&) = delete;
  StagingDirectory& operator=(const StagingDirectory&) = delete;

  const std::string& path() const { return path_; }
  const std::string& destination() const { return destination_; }

  // Copies `source` in as `file_name`; FailedPrecondition if its SHA-256 is not `sha256` (the file
  // changed since it was loaded).
  absl::Status CopyIn(const std::string& source, const std::string& file_name,
                      const std::string& sha256);
  // Writes manifest.json and publishes the directory; the manifest's SHA-256.
  absl::StatusOr<std::string> Commit(const std::string& manifest_json);

 private:
  StagingDirectory(std::string path, std::string destination, bool force)
      : path_(std::move(path)), destination_(std::move(destination)), force_(force) {}

  const std::string path_;
  const std::string destination_;
  const bool force_;
  bool committed_ = false;
};

}  // namespace parity::datasets
