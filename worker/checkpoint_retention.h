// What of a run's checkpoints a worker keeps on its disk, as a pure function of what the
// scheduler says the run still needs (WorkerService.CheckpointRetention, or the run a completion
// returns). Layout: <checkpoint root>/<run id>/epoch-<lease epoch>/step-NNNNNNNN.ckpt (one
// directory per lease, the engine's) and recorded-<lease epoch>/step-NNNNNNNN.ckpt (the hard link
// a heartbeat recorded as the resume point, run_supervisor.h); the recorded checkpoint's URI is
// relative to the checkpoint root (core/checkpoint_uri.h). The policy:
//   the run no longer exists (its sweep was deleted)  → everything of it;
//   the run ended (SUCCEEDED, FAILED, CANCELLED)      → all but the recorded checkpoint (the
//                                                        result's), and the run's directory
//                                                        when that is not on this disk;
//   the run is pending or live                        → the directories of older leases, but for
//                                                        the file a resume would read (the recorded
//                                                        checkpoint, else the newest at or before
//                                                        its step); the live lease's directory is
//                                                        its holder's, left alone.
// Within a live lease the engine keeps its newest `keep_checkpoints` files itself.
#pragma once

#include <string>
#include <vector>

#include "parity/v1/worker_service.pb.h"

namespace parity::worker {

// Paths under `run_dir` (files or whole directories) to delete for `retention`; none when the
// directory does not exist. Deleting them in order leaves what the policy keeps.
std::vector<std::string> CheckpointsToDelete(const std::string& run_dir,
                                             const parity::v1::RunRetention& retention);

// Deletes CheckpointsToDelete(run_dir, retention); returns how many paths went.
int ApplyCheckpointRetention(const std::string& run_dir, const parity::v1::RunRetention& retention);

// What a run as the scheduler returned it (after a completion, say) still needs.
parity::v1::RunRetention RetentionOf(const parity::v1::Run& run);

}  // namespace parity::worker
