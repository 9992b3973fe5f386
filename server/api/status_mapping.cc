#include "server/api/status_mapping.h"

#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"

namespace parity::server {
namespace {

constexpr char kRetryInfoTypeUrl[] = "type.googleapis.com/google.rpc.RetryInfo";

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  google::rpc::Status rpc_status;
  rpc_status.set_code(static_cast<int>(status.code()));
  rpc_status.set_message(std::string(status.message()));
  bool has_retry_info = false;
  status.ForEachPayload([&](absl::string_view type_url, const absl::Cord& payload) {
    google::protobuf::Any* detail = rpc_status.add_details();
    detail->set_type_url(std::string(type_url));
    detail->set_value(std::string(payload));
    has_retry_info |= type_url == kRetryInfoTypeUrl;
  });
  if (status.code() == absl::StatusCode::kUnavailable && !has_retry_info) {
    google::rpc::RetryInfo retry;
    retry.mutable_retry_delay()->set_seconds(1);
    rpc_status.add_details()->PackFrom(retry);
  }
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), rpc_status.message(),
                      rpc_status.details_size() > 0 ? rpc_status.SerializeAsString() : "");
}

}  // namespace parity::server
