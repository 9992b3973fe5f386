// The field paths of a gRPC error's google.rpc.BadRequest violations: what a test of request
// validation checks ("grid.moe[3].top_k", "filter.states[1]"), in the order the server gave them.
#pragma once

#include <grpcpp/grpcpp.h>

#include <string>
#include <vector>

#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"

namespace parity::testing {

inline std::vector<std::string> ViolatedFields(const grpc::Status& status) {
  google::rpc::Status details;
  details.ParseFromString(status.error_details());
  std::vector<std::string> fields;
  for (const google::protobuf::Any& any : details.details()) {
    google::rpc::BadRequest bad_request;
    if (any.UnpackTo(&bad_request)) {
      for (const auto& v : bad_request.field_violations()) fields.push_back(v.field());
    }
  }
  return fields;
}

}  // namespace parity::testing
