// Thin gRPC adapters: each handler first authorizes the call (AccessControl, by the method's
// full name and the bearer token in its metadata), then hands the request with the caller to its
// scheduling unit — SweepService to SweepsService, WorkerService to LeasesService — and maps the
// status with ToGrpcStatus(). No logic lives here. gRPC calls the handlers on its own threads,
// concurrently.
// LeaseRun and CompleteRun are callback handlers (LeasesService answers them from its batch and
// long-poll threads). As sync handlers, each waiting call held a thread and each answer was
// handed from the batch's thread to the call's; with callbacks (and migration 0007) the lease
// benchmark's machine CPU per lease+complete cycle fell by about a fifth (bench/scheduler/).
#pragma once

#include <atomic>

#include "parity/v1/sweep_service.grpc.pb.h"
#include "parity/v1/token_service.grpc.pb.h"
#include "parity/v1/worker_service.grpc.pb.h"
#include "server/api/access_control.h"
#include "server/scheduling/leases_service.h"
#include "server/scheduling/sweeps_service.h"

namespace parity::server {

class SweepServiceImpl final : public v1::SweepService::Service {
 public:
  // `sweeps`, `access` and `stopping` must outlive the service; `stopping` ends watch streams.
  SweepServiceImpl(SweepsService& sweeps, AccessControl& access, const std::atomic<bool>& stopping)
      : sweeps_(sweeps), access_(access), stopping_(stopping) {}

  grpc::Status PlanSweep(grpc::ServerContext*, const v1::PlanSweepRequest*,
                         v1::PlanSweepResponse*) override;
  grpc::Status SubmitSweep(grpc::ServerContext*, const v1::SubmitSweepRequest*,
                           v1::SubmitSweepResponse*) override;
  grpc::Status GetSweep(grpc::ServerContext*, const v1::GetSweepRequest*,
                        v1::GetSweepResponse*) override;
  grpc::Status ListSweeps(grpc::ServerContext*, const v1::ListSweepsRequest*,
                          v1::ListSweepsResponse*) override;
  grpc::Status CancelSweep(grpc::ServerContext*, const v1::CancelSweepRequest*,
                           v1::CancelSweepResponse*) override;
  grpc::Status DeleteSweep(grpc::ServerContext*, const v1::DeleteSweepRequest*,
                           v1::DeleteSweepResponse*) override;
  grpc::Status ListRuns(grpc::ServerContext*, const v1::ListRunsRequest*,
                        v1::ListRunsResponse*) override;
  grpc::Status GetRun(grpc::ServerContext*, const v1::GetRunRequest*, v1::GetRunResponse*) override;
  grpc::Status WatchSweep(grpc::ServerContext*, const v1::WatchSweepRequest*,
                          grpc::ServerWriter<v1::WatchSweepResponse>*) override;
  grpc::Status WatchRun(grpc::ServerContext*, const v1::WatchRunRequest*,
                        grpc::ServerWriter<v1::WatchRunResponse>*) override;
  grpc::Status QueryResults(grpc::ServerContext*, const v1::QueryResultsRequest*,
                            v1::QueryResultsResponse*) override;
  grpc::Status AnalyzeSweep(grpc::ServerContext*, const v1::AnalyzeSweepRequest*,
                            v1::AnalyzeSweepResponse*) override;
  grpc::Status ListWorkers(grpc::ServerContext*, const v1::ListWorkersRequest*,
                           v1::ListWorkersResponse*) override;

 private:
  SweepsService& sweeps_;
  AccessControl& access_;
  const std::atomic<bool>& stopping_;
};

class WorkerServiceImpl final
    : public v1::WorkerService::WithCallbackMethod_LeaseRun<
          v1::WorkerService::WithCallbackMethod_CompleteRun<v1::WorkerService::Service>> {
 public:
  // With `require_client_certificate` (mutual TLS), a call must also come over TLS with a
  // client certificate the server verified.
  WorkerServiceImpl(LeasesService& leases, AccessControl& access, const std::atomic<bool>& stopping,
                    bool require_client_certificate)
      : leases_(leases),
        access_(access),
        stopping_(stopping),
        require_client_certificate_(require_client_certificate) {}

  grpc::Status RegisterWorker(grpc::ServerContext*, const v1::RegisterWorkerRequest*,
                              v1::RegisterWorkerResponse*) override;
  grpc::ServerUnaryReactor* LeaseRun(grpc::CallbackServerContext*, const v1::LeaseRunRequest*,
                                     v1::LeaseRunResponse*) override;
  grpc::Status Heartbeat(grpc::ServerContext*, const v1::HeartbeatRequest*,
                         v1::HeartbeatResponse*) override;
  grpc::Status ReportMetrics(grpc::ServerContext*, const v1::ReportMetricsRequest*,
                             v1::ReportMetricsResponse*) override;
  grpc::Status CheckpointRetention(grpc::ServerContext*, const v1::CheckpointRetentionRequest*,
                                   v1::CheckpointRetentionResponse*) override;
  grpc::Status PostRendezvous(grpc::ServerContext*, const v1::PostRendezvousRequest*,
                              v1::RendezvousResponse*) override;
  grpc::Status CheckInRendezvous(grpc::ServerContext*, const v1::CheckInRendezvousRequest*,
                                 v1::RendezvousResponse*) override;
  grpc::ServerUnaryReactor* CompleteRun(grpc::CallbackServerContext*, const v1::CompleteRunRequest*,
                                        v1::CompleteRunResponse*) override;

 private:
  absl::StatusOr<Caller> Authorize(grpc::ServerContextBase* context, absl::string_view method);

  LeasesService& leases_;
  AccessControl& access_;
  const std::atomic<bool>& stopping_;
  const bool require_client_certificate_;
};

// Token management (admin): the AccessControl's, not the scheduling units'.
class TokenServiceImpl final : public v1::TokenService::Service {
 public:
  explicit TokenServiceImpl(AccessControl& access) : access_(access) {}

  grpc::Status CreateToken(grpc::ServerContext*, const v1::CreateTokenRequest*,
                           v1::CreateTokenResponse*) override;
  grpc::Status ListTokens(grpc::ServerContext*, const v1::ListTokensRequest*,
                          v1::ListTokensResponse*) override;
  grpc::Status RevokeToken(grpc::ServerContext*, const v1::RevokeTokenRequest*,
                           v1::RevokeTokenResponse*) override;

 private:
  AccessControl& access_;
};

// The bearer token of a call ("authorization: Bearer X" metadata); empty when none.
absl::string_view BearerTokenOf(const grpc::ServerContextBase& context);

}  // namespace parity::server
