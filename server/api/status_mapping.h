// The one place where absl::Status becomes grpc::Status. Codes map one to one; the status's
// payloads (google.rpc.BadRequest, PreconditionFailure, RetryInfo, ResourceInfo, keyed by their
// type URL) become the details of a google.rpc.Status sent in the grpc-status-details-bin
// trailer, which standard clients decode. UNAVAILABLE gets a RetryInfo when it has none.
#pragma once

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace parity::server {

grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace parity::server
