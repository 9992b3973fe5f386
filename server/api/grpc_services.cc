#include "server/api/grpc_services.h"

#include <chrono>

#include "absl/time/clock.h"
#include "server/api/status_mapping.h"

namespace parity::server {
namespace {

// Copies a StatusOr's value into the gRPC reply and maps its status.
template <typename T>
grpc::Status Reply(absl::StatusOr<T> result, T* response) {
  if (!result.ok()) return ToGrpcStatus(result.status());
  *response = std::move(*result);
  return grpc::Status::OK;
}

WatchControl ControlOf(grpc::ServerContextBase* context, const std::atomic<bool>& stopping) {
  return {[context, &stopping] { return stopping.load() || context->IsCancelled(); }};
}

// Finishes a callback call with the Scheduler's answer; `response` is the call's own.
template <typename T>
auto FinishWith(grpc::ServerUnaryReactor* reactor, T* response) {
  return [reactor, response](absl::StatusOr<T> result) {
    reactor->Finish(Reply(std::move(result), response));
  };
}

}  // namespace

grpc::Status SweepServiceImpl::PlanSweep(grpc::ServerContext*, const v1::PlanSweepRequest* r,
                                         v1::PlanSweepResponse* out) {
  return Reply(scheduler_.PlanSweep(*r), out);
}
grpc::Status SweepServiceImpl::SubmitSweep(grpc::ServerContext*, const v1::SubmitSweepRequest* r,
                                           v1::SubmitSweepResponse* out) {
  return Reply(scheduler_.SubmitSweep(*r), out);
}
grpc::Status SweepServiceImpl::GetSweep(grpc::ServerContext*, const v1::GetSweepRequest* r,
                                        v1::GetSweepResponse* out) {
  return Reply(scheduler_.GetSweep(*r), out);
}
grpc::Status SweepServiceImpl::ListSweeps(grpc::ServerContext*, const v1::ListSweepsRequest* r,
                                          v1::ListSweepsResponse* out) {
  return Reply(scheduler_.ListSweeps(*r), out);
}
grpc::Status SweepServiceImpl::CancelSweep(grpc::ServerContext*, const v1::CancelSweepRequest* r,
                                           v1::CancelSweepResponse* out) {
  return Reply(scheduler_.CancelSweep(*r), out);
}
grpc::Status SweepServiceImpl::DeleteSweep(grpc::ServerContext*, const v1::DeleteSweepRequest* r,
                                           v1::DeleteSweepResponse* out) {
  return Reply(scheduler_.DeleteSweep(*r), out);
}
grpc::Status SweepServiceImpl::ListRuns(grpc::ServerContext*, const v1::ListRunsRequest* r,
                                        v1::ListRunsResponse* out) {
  return Reply(scheduler_.ListRuns(*r), out);
}
grpc::Status SweepServiceImpl::GetRun(grpc::ServerContext*, const v1::GetRunRequest* r,
                                      v1::GetRunResponse* out) {
  return Reply(scheduler_.GetRun(*r), out);
}
grpc::Status SweepServiceImpl::QueryResults(grpc::ServerContext*, const v1::QueryResultsRequest* r,
                                            v1::QueryResultsResponse* out) {
  return Reply(scheduler_.QueryResults(*r), out);
}
grpc::Status SweepServiceImpl::AnalyzeSweep(grpc::ServerContext*, const v1::AnalyzeSweepRequest* r,
                                            v1::AnalyzeSweepResponse* out) {
  return Reply(scheduler_.AnalyzeSweep(*r), out);
}
grpc::Status SweepServiceImpl::ListWorkers(grpc::ServerContext*, const v1::ListWorkersRequest* r,
                                           v1::ListWorkersResponse* out) {
  return Reply(scheduler_.ListWorkers(*r), out);
}
grpc::Status SweepServiceImpl::WatchSweep(grpc::ServerContext* context,
                                          const v1::WatchSweepRequest* r,
                                          grpc::ServerWriter<v1::WatchSweepResponse>* writer) {
  return ToGrpcStatus(scheduler_.WatchSweep(
      *r, ControlOf(context, stopping_),
      [writer](const v1::WatchSweepResponse& message) { return writer->Write(message); }));
}
grpc::Status SweepServiceImpl::WatchRun(grpc::ServerContext* context, const v1::WatchRunRequest* r,
                                        grpc::ServerWriter<v1::WatchRunResponse>* writer) {
  return ToGrpcStatus(scheduler_.WatchRun(
      *r, ControlOf(context, stopping_),
      [writer](const v1::WatchRunResponse& message) { return writer->Write(message); }));
}

grpc::Status WorkerServiceImpl::RegisterWorker(grpc::ServerContext*,
                                               const v1::RegisterWorkerRequest* r,
                                               v1::RegisterWorkerResponse* out) {
  return Reply(scheduler_.RegisterWorker(*r), out);
}
grpc::ServerUnaryReactor* WorkerServiceImpl::LeaseRun(grpc::CallbackServerContext* context,
                                                      const v1::LeaseRunRequest* r,
                                                      v1::LeaseRunResponse* out) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  scheduler_.LeaseRun(*r, absl::FromChrono(context->deadline()), ControlOf(context, stopping_),
                      FinishWith(reactor, out));
  return reactor;
}
grpc::Status WorkerServiceImpl::Heartbeat(grpc::ServerContext*, const v1::HeartbeatRequest* r,
                                          v1::HeartbeatResponse* out) {
  return Reply(scheduler_.Heartbeat(*r), out);
}
grpc::Status WorkerServiceImpl::CheckpointRetention(grpc::ServerContext*,
                                                    const v1::CheckpointRetentionRequest* r,
                                                    v1::CheckpointRetentionResponse* out) {
  return Reply(scheduler_.CheckpointRetention(*r), out);
}
grpc::Status WorkerServiceImpl::ReportMetrics(grpc::ServerContext*,
                                              const v1::ReportMetricsRequest* r,
                                              v1::ReportMetricsResponse* out) {
  return Reply(scheduler_.ReportMetrics(*r), out);
}
grpc::ServerUnaryReactor* WorkerServiceImpl::CompleteRun(grpc::CallbackServerContext* context,
                                                         const v1::CompleteRunRequest* r,
                                                         v1::CompleteRunResponse* out) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  scheduler_.CompleteRun(*r, FinishWith(reactor, out));
  return reactor;
}

}  // namespace parity::server
