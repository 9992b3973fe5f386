// The worker's view of the scheduler: the WorkerService calls, with gRPC statuses mapped to
// absl::Status (same codes). The interface keeps gRPC out of the lease loop and the run supervisor,
// which are tested against a fake; GrpcSchedulerClient (scheduler_client.cc) is the only file that
// includes gRPC. Each call is one attempt with a deadline; retrying (core/backoff.h) is the
// caller's, because only the caller knows whether to keep the engine training meanwhile.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "clients/cpp/scheduler_channel.h"
#include "parity/v1/worker_service.pb.h"

namespace parity::worker {

// Thread-safe: every call may come from any thread concurrently.
class SchedulerClient {
 public:
  virtual ~SchedulerClient() = default;
  virtual absl::StatusOr<parity::v1::RegisterWorkerResponse> RegisterWorker(
      const parity::v1::RegisterWorkerRequest&) = 0;
  // Long poll: blocks up to the request's wait_time (plus the call deadline).
  virtual absl::StatusOr<parity::v1::LeaseRunResponse> LeaseRun(
      const parity::v1::LeaseRunRequest&) = 0;
  virtual absl::StatusOr<parity::v1::HeartbeatResponse> Heartbeat(
      const parity::v1::HeartbeatRequest&) = 0;
  virtual absl::StatusOr<parity::v1::ReportMetricsResponse> ReportMetrics(
      const parity::v1::ReportMetricsRequest&) = 0;
  virtual absl::StatusOr<parity::v1::CompleteRunResponse> CompleteRun(
      const parity::v1::CompleteRunRequest&) = 0;
  virtual absl::StatusOr<parity::v1::CheckpointRetentionResponse> CheckpointRetention(
      const parity::v1::CheckpointRetentionRequest&) = 0;
  // Gangs: rank 0's worker posts the relayed rendezvous string; every other rank's worker checks
  // in until the answer is `released`. A scheduler client without them cannot host gang ranks.
  virtual absl::StatusOr<parity::v1::RendezvousResponse> PostRendezvous(
      const parity::v1::PostRendezvousRequest&) {
    return absl::UnimplementedError("PostRendezvous: this client cannot host gang ranks");
  }
  virtual absl::StatusOr<parity::v1::RendezvousResponse> CheckInRendezvous(
      const parity::v1::CheckInRendezvousRequest&) {
    return absl::UnimplementedError("CheckInRendezvous: this client cannot host gang ranks");
  }
  // Ends any LeaseRun long poll in flight now (it returns CANCELLED); used at shutdown.
  virtual void CancelLongPolls() {}
};

// Whether a failed call may have been carried out by the scheduler with its answer lost on the
// way (a replica killed after its commit, a cut connection, a deadline, a reset): every code but
// those the scheduler answers only when it refused the call. A LeaseRun that failed so is
// repeated with the same request_id and retry = true (WorkerDaemon), so that a lease granted to
// it is handed back instead of waiting out its TTL.
inline bool AnswerMayHaveBeenLost(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kOk:
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kUnauthenticated:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kUnimplemented:
      return false;
    default:  // UNAVAILABLE, DEADLINE_EXCEEDED, CANCELLED, UNKNOWN, INTERNAL, ABORTED, ...
      return true;
  }
}

struct GrpcClientOptions {
  // Deadline of every call except LeaseRun.
  absl::Duration call_timeout = absl::Seconds(10);
  // LeaseRun's deadline is its wait_time plus this.
  absl::Duration long_poll_slack = absl::Seconds(10);
};

// Asks the scheduler's standard gRPC health service (grpc.health.v1.Health/Check, service "");
// OK when it answers SERVING, UNAVAILABLE otherwise. Used by `parity-worker --probe` and the
// local stack scripts, since grpcurl is not packaged.
// The health service needs no token; TLS as the channel options say.
absl::Status ProbeSchedulerHealth(const clients::SchedulerChannelOptions& channel,
                                  absl::Duration timeout);

// A client over the channel the options describe (TLS and the worker's token). The channel
// reconnects by itself. INVALID_ARGUMENT when a TLS file cannot be read.
absl::StatusOr<std::unique_ptr<SchedulerClient>> MakeGrpcSchedulerClient(
    clients::SchedulerChannelOptions channel, GrpcClientOptions options = {});

}  // namespace parity::worker
