// Rendering what the scheduler returns: states, progress bars, the sweep list, a sweep's runs and
// failures (the results table and its formats are cli/results_export.h).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "parity/v1/run.pb.h"
#include "parity/v1/sweep_service.pb.h"
#include "parity/v1/worker.pb.h"

namespace parity::cli {

// "PENDING", "RUNNING", ... (the enum name without its prefix).
std::string RunStateName(parity::v1::RunState state);
std::string SweepStateName(parity::v1::SweepState state);

// "[#####.....]  50%" of `done` out of `total`, `width` characters of bar.
std::string ProgressBar(double done, double total, int width = 24);

// One line per sweep: id, name, state, counts by state, created.
std::string FormatSweepList(const std::vector<parity::v1::Sweep>& sweeps);

// A sweep's header (counts, progress) and its runs (state, attempt, progress, BPC).
std::string FormatSweepRuns(const parity::v1::Sweep& sweep,
                            const std::vector<parity::v1::Run>& runs);

// A run's last failure as "class: message" ("user_error: dataset 'x' not found on worker w"),
// "" when it has none. The class is in lowercase YAML spelling.
std::string FailureText(const parity::v1::Run& run);

// Each distinct failure of the sweep's FAILED runs: how many runs, class, message and remedy —
// what a researcher needs to fix it. "" when no run failed.
//   2 runs failed: user_error: dataset 'x' not found on worker w
//     remedy: fix the spec or give the workers the dataset; see the message
std::string FormatFailureSummary(const std::vector<parity::v1::Run>& runs);

// Workers with their devices and active runs.
std::string FormatWorkers(const std::vector<parity::v1::Worker>& workers);

}  // namespace parity::cli
