// GrpcSchedulerClient: the WorkerService stub, call deadlines, and gRPC → absl status mapping.
#include "worker/scheduler_client.h"

#include <set>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "core/proto_time.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "parity/v1/worker_service.grpc.pb.h"

namespace parity::worker {
namespace {

absl::Status ToAbsl(const grpc::Status& s) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

std::chrono::system_clock::time_point DeadlineIn(absl::Duration d) {
  return absl::ToChronoTime(absl::Now() + d);
}

// Thread-safe: the stub is; long_polls_ is guarded.
class GrpcSchedulerClient final : public SchedulerClient {
 public:
  GrpcSchedulerClient(std::shared_ptr<grpc::Channel> channel, GrpcClientOptions options)
      : options_(options),
        channel_(std::move(channel)),
        stub_(parity::v1::WorkerService::NewStub(channel_)) {}

  absl::StatusOr<parity::v1::RegisterWorkerResponse> RegisterWorker(
      const parity::v1::RegisterWorkerRequest& r) override {
    return Unary(r, &parity::v1::WorkerService::Stub::RegisterWorker,
                 parity::v1::RegisterWorkerResponse{});
  }
  absl::StatusOr<parity::v1::HeartbeatResponse> Heartbeat(
      const parity::v1::HeartbeatRequest& r) override {
    return Unary(r, &parity::v1::WorkerService::Stub::Heartbeat, parity::v1::HeartbeatResponse{});
  }
  absl::StatusOr<parity::v1::ReportMetricsResponse> ReportMetrics(
      const parity::v1::ReportMetricsRequest& r) override {
    return Unary(r, &parity::v1::WorkerService::Stub::ReportMetrics,
                 parity::v1::ReportMetricsResponse{});
  }
  absl::StatusOr<parity::v1::CompleteRunResponse> CompleteRun(
      const parity::v1::CompleteRunRequest& r) override {
    return Unary(r, &parity::v1::WorkerService::Stub::CompleteRun,
                 parity::v1::CompleteRunResponse{});
  }

  absl::StatusOr<parity::v1::CheckpointRetentionResponse> CheckpointRetention(
      const parity::v1::CheckpointRetentionRequest& r) override {
    return Unary(r, &parity::v1::WorkerService::Stub::CheckpointRetention,
                 parity::v1::CheckpointRetentionResponse{});
  }

  absl::StatusOr<parity::v1::RendezvousResponse> PostRendezvous(
      const parity::v1::PostRendezvousRequest& r) override {
    return Unary(r, &parity::v1::WorkerService::Stub::PostRendezvous,
                 parity::v1::RendezvousResponse{});
  }
  absl::StatusOr<parity::v1::RendezvousResponse> CheckInRendezvous(
      const parity::v1::CheckInRendezvousRequest& r) override {
    return Unary(r, &parity::v1::WorkerService::Stub::CheckInRendezvous,
                 parity::v1::RendezvousResponse{});
  }

  absl::StatusOr<parity::v1::LeaseRunResponse> LeaseRun(
      const parity::v1::LeaseRunRequest& r) override {
    grpc::ClientContext ctx;
    const absl::Duration wait = FromProtoDuration(r.wait_time());
    ctx.set_deadline(DeadlineIn(wait + options_.long_poll_slack));
    {
      absl::MutexLock lock(&mu_);
      if (cancelled_) return absl::CancelledError("client is shutting down");
      long_polls_.insert(&ctx);
    }
    parity::v1::LeaseRunResponse resp;
    grpc::Status s = stub_->LeaseRun(&ctx, r, &resp);
    {
      absl::MutexLock lock(&mu_);
      long_polls_.erase(&ctx);
    }
    if (!s.ok()) return ToAbsl(s);
    return resp;
  }

  void CancelLongPolls() override {
    absl::MutexLock lock(&mu_);
    cancelled_ = true;
    for (grpc::ClientContext* ctx : long_polls_) ctx->TryCancel();
  }

 private:
  template <typename Req, typename Resp, typename Method>
  absl::StatusOr<Resp> Unary(const Req& req, Method method, Resp resp) {
    grpc::ClientContext ctx;
    ctx.set_deadline(DeadlineIn(options_.call_timeout));
    grpc::Status s = ((*stub_).*method)(&ctx, req, &resp);
    if (!s.ok()) return ToAbsl(s);
    return resp;
  }

  const GrpcClientOptions options_;
  std::shared_ptr<grpc::Channel> channel_;  // shared: gRPC's API hands channels out as shared_ptr
  std::unique_ptr<parity::v1::WorkerService::Stub> stub_;
  absl::Mutex mu_;
  std::set<grpc::ClientContext*> long_polls_
      ABSL_GUARDED_BY(mu_);  // contexts of LeaseRun in flight
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace

absl::Status ProbeSchedulerHealth(const clients::SchedulerChannelOptions& options,
                                  absl::Duration timeout) {
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = clients::MakeSchedulerChannel(options);
  if (!channel.ok()) return channel.status();
  grpc::GenericStub stub(*channel);
  grpc::CompletionQueue cq;
  grpc::ClientContext ctx;
  ctx.set_deadline(DeadlineIn(timeout));
  ctx.set_wait_for_ready(true);               // wait for the port to open within the deadline
  grpc::Slice empty(static_cast<size_t>(0));  // HealthCheckRequest{service: ""} encodes to no bytes
  grpc::ByteBuffer request(&empty, 1);
  std::unique_ptr<grpc::GenericClientAsyncResponseReader> call =
      stub.PrepareUnaryCall(&ctx, "/grpc.health.v1.Health/Check", request, &cq);
  call->StartCall();
  grpc::ByteBuffer response;
  grpc::Status status;
  call->Finish(&response, &status, reinterpret_cast<void*>(1));
  void* tag = nullptr;
  bool ok = false;
  cq.Next(&tag, &ok);
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  if (!status.ok()) return ToAbsl(status);
  std::vector<grpc::Slice> slices;
  std::string bytes;
  if (response.Dump(&slices).ok()) {
    for (const grpc::Slice& s : slices)
      bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  // HealthCheckResponse{status: SERVING (1)} is field 1, varint 1: bytes 08 01.
  if (bytes == std::string("\x08\x01", 2)) return absl::OkStatus();
  return absl::UnavailableError("scheduler health: not SERVING");
}

absl::StatusOr<std::unique_ptr<SchedulerClient>> MakeGrpcSchedulerClient(
    clients::SchedulerChannelOptions channel, GrpcClientOptions options) {
  // Reconnect quickly after a scheduler restart (the default backoff grows to 120 s).
  channel.args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
  channel.args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
  // gRPC's "min reconnect backoff" is the least time one connection attempt may take (its
  // deadline is the later of the next attempt's time and now + this). At 200 ms, a scheduler
  // that had just started on a busy host could not finish the handshake in time: the chaos soak
  // saw `tcp handshaker shutdown` for ≈ 3.5 s after it served, longer than a 3 s lease TTL. A
  // refused connection still fails at once and is retried on the backoff above.
  channel.args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 2000);
  // A scheduler that vanished without closing the connection (a partition, a dead host) is
  // noticed within 40 s even by a long poll in flight; the server allows a ping every 10 s.
  channel.args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 30000);
  channel.args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 10000);
  absl::StatusOr<std::shared_ptr<grpc::Channel>> made = clients::MakeSchedulerChannel(channel);
  if (!made.ok()) return made.status();
  return std::unique_ptr<SchedulerClient>(
      std::make_unique<GrpcSchedulerClient>(*std::move(made), options));
}

}  // namespace parity::worker
