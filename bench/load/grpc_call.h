// One async unary call's state (context, request, response, start time), kept alive by the
// shared_ptr its callback holds until gRPC answers; and the bookkeeping every call does at its
// end (latency sample when it succeeded, the in-flight count that shutdown waits on).
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace parity::load {

template <typename Request, typename Response>
struct Call {
  grpc::ClientContext context;
  Request request;
  Response response;
  absl::Time start;
};

// Every NewCall is matched by exactly one Finish (in the callback, or at once when the call is
// not started after all).
template <typename Request, typename Response, typename Env>
std::shared_ptr<Call<Request, Response>> NewCall(Env& env, absl::Duration deadline) {
  auto call = std::make_shared<Call<Request, Response>>();
  call->start = absl::Now();
  call->context.set_deadline(absl::ToChronoTime(call->start + deadline));
  ++env.in_flight;
  return call;
}

template <typename Env, typename C>
void Finish(Env& env, const C& call, const std::string& name, const grpc::Status& status) {
  if (!name.empty() && status.ok()) {
    env.recorder->Sample(name, absl::ToDoubleMilliseconds(absl::Now() - call.start));
  }
  --env.in_flight;
}

inline std::string CodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK:
      return "OK";
    case grpc::StatusCode::CANCELLED:
      return "CANCELLED";
    case grpc::StatusCode::UNKNOWN:
      return "UNKNOWN";
    case grpc::StatusCode::INVALID_ARGUMENT:
      return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND:
      return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS:
      return "ALREADY_EXISTS";
    case grpc::StatusCode::PERMISSION_DENIED:
      return "PERMISSION_DENIED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION:
      return "FAILED_PRECONDITION";
    case grpc::StatusCode::ABORTED:
      return "ABORTED";
    case grpc::StatusCode::OUT_OF_RANGE:
      return "OUT_OF_RANGE";
    case grpc::StatusCode::UNIMPLEMENTED:
      return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL:
      return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE:
      return "UNAVAILABLE";
    case grpc::StatusCode::DATA_LOSS:
      return "DATA_LOSS";
    case grpc::StatusCode::UNAUTHENTICATED:
      return "UNAUTHENTICATED";
    default:
      return "CODE_" + std::to_string(static_cast<int>(code));
  }
}

}  // namespace parity::load
