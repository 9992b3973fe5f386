#include "server/api/rpc_metrics_interceptor.h"

#include <string>

#include "absl/time/clock.h"

namespace parity::server {
namespace {

// Lives as long as its call, on whichever gRPC thread runs the hooks (one at a time per call).
class RpcMetricsInterceptor final : public grpc::experimental::Interceptor {
 public:
  RpcMetricsInterceptor(SchedulerMetrics& metrics, const char* method)
      : metrics_(metrics), method_(method == nullptr ? "" : method), start_(absl::Now()) {}

  // A call that ends without sending a status (the client went away first) still counts.
  ~RpcMetricsInterceptor() override {
    if (!observed_) Observe(absl::StatusCode::kCancelled);
  }

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_STATUS)) {
      Observe(static_cast<absl::StatusCode>(methods->GetSendStatus().error_code()));
    }
    methods->Proceed();
  }

 private:
  void Observe(absl::StatusCode code) {
    observed_ = true;
    metrics_.ObserveRpc(method_, code, absl::Now() - start_);
  }

  SchedulerMetrics& metrics_;
  const std::string method_;
  const absl::Time start_;
  bool observed_ = false;
};

}  // namespace

grpc::experimental::Interceptor* RpcMetricsInterceptorFactory::CreateServerInterceptor(
    grpc::experimental::ServerRpcInfo* info) {
  return new RpcMetricsInterceptor(metrics_, info->method());
}

}  // namespace parity::server
