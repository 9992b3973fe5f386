// Times every gRPC call the scheduler serves and reports (method, code, duration) to
// SchedulerMetrics, so the adapters in grpc_services.cc stay one line per call. A server
// interceptor (gRPC's experimental API, present since 1.20 and unchanged through 1.51) sees the
// status each handler returns, including the codes ToGrpcStatus() mapped, and every service —
// a new RPC is measured without code here.
#pragma once

#include <grpcpp/support/server_interceptor.h>

#include "server/scheduling/scheduler_metrics.h"

namespace parity::server {

// Registered with ServerBuilder::experimental().SetInterceptorCreators(); gRPC creates one
// interceptor per call. `metrics` must outlive the gRPC server.
class RpcMetricsInterceptorFactory final
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit RpcMetricsInterceptorFactory(SchedulerMetrics& metrics) : metrics_(metrics) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override;

 private:
  SchedulerMetrics& metrics_;
};

}  // namespace parity::server
