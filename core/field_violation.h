// Field violations: how core/ reports every problem with a spec at once, each naming the field
// path and the reason. They travel inside an absl::Status as a google.rpc.BadRequest payload, so
// the gRPC layer can turn them into status details in one place and the CLI can print them.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace parity::core {

// One invalid field: `field` is a path such as "grid.moe[3].top_k"; `description` says why,
// e.g. "9 exceeds num_experts 8".
struct FieldViolation {
  std::string field;
  std::string description;
};

// Payload type URL under which the violations ride inside an absl::Status.
inline constexpr std::string_view kBadRequestTypeUrl = "type.googleapis.com/google.rpc.BadRequest";

// An INVALID_ARGUMENT status whose message lists every violation and whose payload is the
// serialized google.rpc.BadRequest.
absl::Status InvalidArgumentWithViolations(std::string_view summary,
                                           std::span<const FieldViolation> violations);

// The same with another code, for a field that is well-formed but not allowed
// (PERMISSION_DENIED: an admin-only value) or past a limit (RESOURCE_EXHAUSTED).
absl::Status StatusWithViolations(absl::StatusCode code, std::string_view summary,
                                  std::span<const FieldViolation> violations);
absl::Status PermissionDeniedWithViolation(std::string field, std::string description);
absl::Status ResourceExhaustedWithViolation(std::string field, std::string description);

// The violations carried by `status`; empty when it carries none.
std::vector<FieldViolation> FieldViolationsOf(const absl::Status& status);

}  // namespace parity::core
