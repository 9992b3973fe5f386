// What a researcher types for a sweep — its UUID, a unique prefix of it (at least 4 hex digits,
// as `parity status` shows the first 8), or its name — turned into the UUID every RPC takes.
// Issue #28: "sweeps cannot be named by name or a short id prefix".
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cli/scheduler_connection.h"
#include "parity/v1/sweep_service.grpc.pb.h"

namespace parity::cli {

// The sweeps a reference names among `sweeps`: a full UUID names itself (returned as given, even
// when not listed); otherwise every sweep whose name equals it, and every sweep whose id starts
// with it when it is at least 4 characters of hex and dashes. Pure.
std::vector<parity::v1::Sweep> SweepsNamedBy(const std::string& reference,
                                             const std::vector<parity::v1::Sweep>& sweeps);

// The UUID `reference` names, listing the caller's visible sweeps when it is not a UUID already.
// On failure prints `error: sweep 'x': …` to stderr and returns the exit code in *exit_code:
// kExitNotFound (nothing matches), kExitInvalidSpec (ambiguous: the candidates listed by short id,
// name and state), or the RPC's code.
bool ResolveSweepReference(parity::v1::SweepService::Stub& stub, const SchedulerOptions& options,
                           const std::string& reference, std::string* sweep_id, int* exit_code);

// A run as a reference may name it: its id, its name, and its sweep's name (for "SWEEP/RUN").
struct RunCandidate {
  std::string run_id;
  std::string name;
  std::string sweep_id;
  std::string sweep_name;
  parity::v1::RunState state = parity::v1::RUN_STATE_UNSPECIFIED;
};

// The runs a reference names among `runs`: "SWEEP/RUN" (SWEEP a sweep's name or id prefix, RUN a
// run's name or id prefix within it), a run's name, or a unique id prefix of at least 4 hex
// digits. Pure.
std::vector<RunCandidate> RunsNamedBy(const std::string& reference,
                                      const std::vector<RunCandidate>& runs);

// For commands that take a sweep or a run (`watch`): the UUID `reference` names, a sweep's first
// (SweepsNamedBy), else a run's among the runs of every sweep the caller may see (RunsNamedBy);
// *is_run says which. A full UUID is returned as given (the command asks which it is). On
// failure prints `error: 'x': …` and sets *exit_code: kExitNotFound (nothing matches),
// kExitInvalidSpec (ambiguous: the candidates listed) or the RPC's code.
bool ResolveSweepOrRunReference(parity::v1::SweepService::Stub& stub,
                                const SchedulerOptions& options, const std::string& reference,
                                std::string* id, bool* is_run, int* exit_code);

}  // namespace parity::cli
