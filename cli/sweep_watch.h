// Following a sweep or a run live from the scheduler's server streams. Shared by `parity watch`
// and `parity submit --wait`.
#pragma once

#include <string>

#include "cli/scheduler_connection.h"

namespace parity::cli {

// Follows a sweep until every run has ended: progress bars redrawn in place on a terminal, one
// line per state change otherwise. Reconnects with backoff when the stream breaks. Returns the
// exit code: 0 when the sweep SUCCEEDED, kExitRunsFailed when it ended otherwise, or the code of
// the call that failed.
int WatchSweepUntilDone(parity::v1::SweepService::Stub& stub, const std::string& sweep_id,
                        const SchedulerOptions& options);

// Follows one run: its progress and BPC as metric points arrive, until it ends.
int WatchRunUntilDone(parity::v1::SweepService::Stub& stub, const std::string& run_id,
                      const SchedulerOptions& options);

}  // namespace parity::cli
