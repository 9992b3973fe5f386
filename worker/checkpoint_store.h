// Between the checkpoint URIs the scheduler records (core/checkpoint_uri.h: <run_id>/<dir>/<file>,
// relative to the checkpoint store) and the files under this worker's --checkpoint-dir. A worker
// reports only URIs inside the run's prefix, and before the engine reads a leased URI
// (--resume-from) it checks it again here: the scheduler's word is not enough, since what a lease
// holder reported could have reached the store some other way (an older scheduler, a bug).
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace parity::worker {

// The URI of `path`, a file below <root>/<run_id>/ (both absolute, as the worker builds them);
// INVALID_ARGUMENT when it lies anywhere else.
absl::StatusOr<std::string> CheckpointUriOfFile(const std::string& root, const std::string& run_id,
                                                const std::string& path);

// The file a leased `uri` names below `root`. INVALID_ARGUMENT when the URI breaks the rule
// (outside the run's prefix, absolute, "..") or reaches through a symbolic link or to something
// that is not a regular file: the attempt fails rather than resume from it. NOT_FOUND when the file
// is simply not on this disk (pruned, or written on another machine): resume from an older one.
absl::StatusOr<std::string> CheckpointFileOfUri(const std::string& root, const std::string& run_id,
                                                const std::string& uri);

}  // namespace parity::worker
