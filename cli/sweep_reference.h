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

}  // namespace parity::cli
