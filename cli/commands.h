// The subcommands of `parity`. Each lives in its own file and registers itself on the root app;
// its callback stores the process exit code in `exit_code`. Exit codes are shared by every
// subcommand (see kExitCodesHelp).
#pragma once

#include <string_view>

#include "CLI/CLI.hpp"

namespace parity::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;      // I/O, server or internal failure
inline constexpr int kExitInvalidSpec = 2;  // the spec or request is invalid; errors on stderr
inline constexpr int kExitUsage = 64;       // bad command line

inline constexpr std::string_view kExitCodesHelp =
    "Exit codes: 0 success; 1 failure (unreadable file, server or internal error); 2 invalid "
    "spec (every error printed to stderr as 'error: FIELD: REASON'); 64 bad command line.";

// `parity plan SPEC [--format table|csv|json]`.
void RegisterPlanCommand(CLI::App& app, int& exit_code);

}  // namespace parity::cli
