// Checkpoint URIs: where a run's checkpoint lies in the checkpoint store, as a worker reports it
// (Heartbeat, CompleteRun) and the next worker gets it back (LeaseRun → --resume-from). A URI is
// relative to the store's root and inside the run's own prefix:
//   <run_id>/<directory>/<file>        e.g. 5f0c…/recorded-7/step-00000120.ckpt
// Every part after the run id is a plain name ([A-Za-z0-9._-], not "." or "..", no leading dot),
// at most kMaxCheckpointUriDepth of them; no absolute path, no empty part, no other run's id. So a
// lease holder cannot point the run's next worker at a file outside the run's checkpoints (a
// worker's key, another run's weights). The scheduler refuses a report that breaks the rule, and
// the worker checks a leased URI again before the engine reads it (worker/run_supervisor.cc), with
// this one function.
#pragma once

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace parity::core {

inline constexpr size_t kMaxCheckpointUriBytes = 4096;
// Parts below the run's prefix: <lease directory>/<file> today, room for one more level.
inline constexpr int kMaxCheckpointUriDepth = 3;

// OK when `uri` lies inside `run_id`'s prefix by the rule above (an empty `uri` is "no file" and
// OK too); otherwise INVALID_ARGUMENT whose message is the reason (the caller names the field).
absl::Status CheckCheckpointUri(absl::string_view run_id, absl::string_view uri);

// The URI of a file at `relative_path` below the run's prefix ("recorded-7/step-00000120.ckpt").
std::string CheckpointUri(absl::string_view run_id, absl::string_view relative_path);

}  // namespace parity::core
