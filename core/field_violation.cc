// Field violations ride in an absl::Status as a serialized google.rpc.BadRequest so that the
// gRPC adapter can copy them into status details verbatim and the CLI can list them.
#include "core/field_violation.h"

#include <string>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/types/optional.h"
#include "core/utf8.h"
#include "google/rpc/error_details.pb.h"

namespace parity::core {
namespace {

// Debian's Abseil keeps its own string_view type, distinct from std::string_view.
absl::string_view TypeUrl() {
  return absl::string_view(kBadRequestTypeUrl.data(), kBadRequestTypeUrl.size());
}

}  // namespace

// Fields and descriptions quote what was asked (ids, spec values, parameters), which may be any
// bytes or a UTF-8 text cut mid-character: BadRequest's strings must be UTF-8 or the payload does
// not parse again (FieldViolationsOf, the gRPC client), and the message ends up in JSON.
absl::Status InvalidArgumentWithViolations(std::string_view summary,
                                           std::span<const FieldViolation> violations) {
  return StatusWithViolations(absl::StatusCode::kInvalidArgument, summary, violations);
}

absl::Status PermissionDeniedWithViolation(std::string field, std::string description) {
  const FieldViolation violation{std::move(field), std::move(description)};
  return StatusWithViolations(absl::StatusCode::kPermissionDenied, "not allowed",
                              std::span(&violation, 1));
}

absl::Status ResourceExhaustedWithViolation(std::string field, std::string description) {
  const FieldViolation violation{std::move(field), std::move(description)};
  return StatusWithViolations(absl::StatusCode::kResourceExhausted, "over a limit",
                              std::span(&violation, 1));
}

absl::Status StatusWithViolations(absl::StatusCode code, std::string_view summary,
                                  std::span<const FieldViolation> violations) {
  std::string message = ToValidUtf8(summary);
  google::rpc::BadRequest bad_request;
  for (const FieldViolation& v : violations) {
    google::rpc::BadRequest::FieldViolation* out = bad_request.add_field_violations();
    out->set_field(ToValidUtf8(v.field));
    out->set_description(ToValidUtf8(v.description));
    absl::StrAppend(&message, "\n  ", out->field(), ": ", out->description());
  }
  absl::Status status(code, message);
  status.SetPayload(TypeUrl(), absl::Cord(bad_request.SerializeAsString()));
  return status;
}

std::vector<FieldViolation> FieldViolationsOf(const absl::Status& status) {
  std::vector<FieldViolation> violations;
  absl::optional<absl::Cord> payload = status.GetPayload(TypeUrl());
  if (!payload.has_value()) return violations;
  google::rpc::BadRequest bad_request;
  if (!bad_request.ParseFromString(std::string(*payload))) return violations;
  for (const auto& v : bad_request.field_violations()) {
    violations.push_back({v.field(), v.description()});
  }
  return violations;
}

}  // namespace parity::core
