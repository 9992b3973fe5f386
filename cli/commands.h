// The subcommands of `parity`. Each lives in its own file and registers itself on the root app;
// its callback stores the process exit code in `exit_code`. Exit codes are shared by every
// subcommand (see kExitCodesHelp).
#pragma once

#include <string_view>

#include "CLI/CLI.hpp"

namespace parity::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;        // I/O, server or internal failure
inline constexpr int kExitInvalidSpec = 2;    // the spec or request is invalid; errors on stderr
inline constexpr int kExitNotFound = 3;       // the sweep, run or worker does not exist
inline constexpr int kExitRunsFailed = 4;     // a waited-for sweep or run ended not SUCCEEDED
inline constexpr int kExitUsage = 64;         // bad command line
inline constexpr int kExitNoPermission = 77;  // no valid token, or its role may not do this
inline constexpr int kExitUnavailable = 69;   // the scheduler cannot be reached

inline constexpr std::string_view kExitCodesHelp =
    "Exit codes: 0 success; 1 failure (unreadable file, server or internal error); 2 invalid "
    "spec or request (every error printed to stderr as 'error: FIELD: REASON'); 3 not found; 4 "
    "a waited-for sweep or run ended FAILED or CANCELLED; 64 bad command line; 69 scheduler "
    "unreachable; 77 no valid token, or its role may not do this.";

// `parity plan SPEC [--format table|csv|json]`.
void RegisterPlanCommand(CLI::App& app, int& exit_code);

// The scheduler's clients: `submit SPEC [--wait]`, `status [SWEEP|RUN]`, `watch SWEEP|RUN`,
// `results SWEEP [--format table|csv|json]`, `cancel SWEEP`, `workers`; each with --scheduler
// (env PARITY_SCHEDULER).
void RegisterClientCommands(CLI::App& app, int& exit_code);

// `compare SWEEP_A SWEEP_B`: matching cells of two sweeps with ΔBPC (cli/sweep_compare.h).
void RegisterCompareCommand(CLI::App& app, int& exit_code);

// `token create|list|revoke` (admin): the scheduler's access tokens.
void RegisterTokenCommands(CLI::App& app, int& exit_code);

// `spec reference|keys`: the sweep spec reference (docs/spec-reference.md) and its key list.
void RegisterSpecCommand(CLI::App& app, int& exit_code);

// `report SWEEP --out DIR`: a static HTML report (the dashboard offline) and runs.csv.
void RegisterReportCommand(CLI::App& app, int& exit_code);

// `data prepare|tokenizer train|digest|inspect`: prepared token datasets (docs/data.md).
void RegisterDataCommands(CLI::App& app, int& exit_code);

}  // namespace parity::cli
