#include "server/api/grpc_services.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/api/status_mapping.h"

namespace parity::server {
namespace {

constexpr char kSweeps[] = "parity.v1.SweepService/";
constexpr char kWorkers[] = "parity.v1.WorkerService/";
constexpr char kTokens[] = "parity.v1.TokenService/";

// Copies a StatusOr's value into the gRPC reply and maps its status.
template <typename T>
grpc::Status Reply(absl::StatusOr<T> result, T* response) {
  if (!result.ok()) return ToGrpcStatus(result.status());
  *response = std::move(*result);
  return grpc::Status::OK;
}

WatchControl ControlOf(grpc::ServerContextBase* context, const std::atomic<bool>& stopping) {
  return {[context, &stopping] { return stopping.load() || context->IsCancelled(); }, nullptr};
}

// Finishes a callback call with LeasesService's answer; `response` is the call's own.
template <typename T>
auto FinishWith(grpc::ServerUnaryReactor* reactor, T* response) {
  return [reactor, response](absl::StatusOr<T> result) {
    reactor->Finish(Reply(std::move(result), response));
  };
}

absl::StatusOr<Identity> AuthorizeCall(AccessControl& access, grpc::ServerContextBase* context,
                                       absl::string_view service, absl::string_view method) {
  return access.Authorize(BearerTokenOf(*context), absl::StrCat(service, method));
}

// A watch stream's control: it also asks again, every few seconds, whether the caller's token
// still grants the method, so that a revoked token's stream ends UNAUTHENTICATED.
WatchControl WatchControlOf(AccessControl& access, grpc::ServerContextBase* context,
                            const std::atomic<bool>& stopping, absl::string_view method) {
  WatchControl control = ControlOf(context, stopping);
  control.authorized = [&access, context, method = std::string(method)] {
    return AuthorizeCall(access, context, kSweeps, method).status();
  };
  return control;
}

}  // namespace

absl::string_view BearerTokenOf(const grpc::ServerContextBase& context) {
  const auto& metadata = context.client_metadata();
  const auto it = metadata.find("authorization");
  if (it == metadata.end()) return {};
  return AccessControl::BearerToken(absl::string_view(it->second.data(), it->second.size()));
}

// Each SweepService handler: authorize by the method's rule, then SweepsService with the caller.
#define PARITY_SWEEP_CALL(Method, Request, Response, Call)                              \
  grpc::Status SweepServiceImpl::Method(grpc::ServerContext* context, const Request* r, \
                                        Response* out) {                                \
    absl::StatusOr<Identity> who = AuthorizeCall(access_, context, kSweeps, #Method);   \
    if (!who.ok()) return ToGrpcStatus(who.status());                                   \
    return Reply(Call, out);                                                            \
  }

PARITY_SWEEP_CALL(PlanSweep, v1::PlanSweepRequest, v1::PlanSweepResponse, sweeps_.PlanSweep(*r))
PARITY_SWEEP_CALL(SubmitSweep, v1::SubmitSweepRequest, v1::SubmitSweepResponse,
                  sweeps_.SubmitSweep(*r, who->AsCaller()))
PARITY_SWEEP_CALL(GetSweep, v1::GetSweepRequest, v1::GetSweepResponse, sweeps_.GetSweep(*r))
PARITY_SWEEP_CALL(ListSweeps, v1::ListSweepsRequest, v1::ListSweepsResponse, sweeps_.ListSweeps(*r))
PARITY_SWEEP_CALL(CancelSweep, v1::CancelSweepRequest, v1::CancelSweepResponse,
                  sweeps_.CancelSweep(*r, who->AsCaller()))
PARITY_SWEEP_CALL(DeleteSweep, v1::DeleteSweepRequest, v1::DeleteSweepResponse,
                  sweeps_.DeleteSweep(*r, who->AsCaller()))
PARITY_SWEEP_CALL(ListRuns, v1::ListRunsRequest, v1::ListRunsResponse, sweeps_.ListRuns(*r))
PARITY_SWEEP_CALL(GetRun, v1::GetRunRequest, v1::GetRunResponse, sweeps_.GetRun(*r))
PARITY_SWEEP_CALL(QueryResults, v1::QueryResultsRequest, v1::QueryResultsResponse,
                  sweeps_.QueryResults(*r))
PARITY_SWEEP_CALL(AnalyzeSweep, v1::AnalyzeSweepRequest, v1::AnalyzeSweepResponse,
                  sweeps_.AnalyzeSweep(*r))
PARITY_SWEEP_CALL(ListWorkers, v1::ListWorkersRequest, v1::ListWorkersResponse,
                  sweeps_.ListWorkers(*r))
#undef PARITY_SWEEP_CALL

grpc::Status SweepServiceImpl::WatchSweep(grpc::ServerContext* context,
                                          const v1::WatchSweepRequest* r,
                                          grpc::ServerWriter<v1::WatchSweepResponse>* writer) {
  absl::StatusOr<Identity> who = AuthorizeCall(access_, context, kSweeps, "WatchSweep");
  if (!who.ok()) return ToGrpcStatus(who.status());
  absl::StatusOr<AccessControl::WatchSlot> slot = access_.AcquireWatchSlot(*who);
  if (!slot.ok()) return ToGrpcStatus(slot.status());
  return ToGrpcStatus(
      sweeps_.WatchSweep(*r, WatchControlOf(access_, context, stopping_, "WatchSweep"),
                         [writer](const v1::WatchSweepResponse& message, bool more_follow) {
                           grpc::WriteOptions options;
                           if (more_follow) options.set_buffer_hint();
                           return writer->Write(message, options);
                         }));
}
grpc::Status SweepServiceImpl::WatchRun(grpc::ServerContext* context, const v1::WatchRunRequest* r,
                                        grpc::ServerWriter<v1::WatchRunResponse>* writer) {
  absl::StatusOr<Identity> who = AuthorizeCall(access_, context, kSweeps, "WatchRun");
  if (!who.ok()) return ToGrpcStatus(who.status());
  absl::StatusOr<AccessControl::WatchSlot> slot = access_.AcquireWatchSlot(*who);
  if (!slot.ok()) return ToGrpcStatus(slot.status());
  return ToGrpcStatus(sweeps_.WatchRun(
      *r, WatchControlOf(access_, context, stopping_, "WatchRun"),
      [writer](const v1::WatchRunResponse& message) { return writer->Write(message); }));
}

absl::StatusOr<Caller> WorkerServiceImpl::Authorize(grpc::ServerContextBase* context,
                                                    absl::string_view method) {
  if (require_client_certificate_ && !context->auth_context()->IsPeerAuthenticated()) {
    return absl::UnauthenticatedError(
        "this scheduler requires workers to present a client certificate (mutual TLS)");
  }
  absl::StatusOr<Identity> who = AuthorizeCall(access_, context, kWorkers, method);
  if (!who.ok()) return who.status();
  return who->AsCaller();
}

grpc::Status WorkerServiceImpl::RegisterWorker(grpc::ServerContext* context,
                                               const v1::RegisterWorkerRequest* r,
                                               v1::RegisterWorkerResponse* out) {
  absl::StatusOr<Caller> caller = Authorize(context, "RegisterWorker");
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  return Reply(leases_.RegisterWorker(*r, *caller), out);
}
grpc::ServerUnaryReactor* WorkerServiceImpl::LeaseRun(grpc::CallbackServerContext* context,
                                                      const v1::LeaseRunRequest* r,
                                                      v1::LeaseRunResponse* out) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::StatusOr<Caller> caller = Authorize(context, "LeaseRun");
  if (!caller.ok()) {
    reactor->Finish(ToGrpcStatus(caller.status()));
    return reactor;
  }
  leases_.LeaseRun(*r, absl::FromChrono(context->deadline()), ControlOf(context, stopping_),
                   FinishWith(reactor, out), *caller);
  return reactor;
}
grpc::Status WorkerServiceImpl::Heartbeat(grpc::ServerContext* context,
                                          const v1::HeartbeatRequest* r,
                                          v1::HeartbeatResponse* out) {
  absl::StatusOr<Caller> caller = Authorize(context, "Heartbeat");
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  return Reply(leases_.Heartbeat(*r, *caller), out);
}
grpc::Status WorkerServiceImpl::CheckpointRetention(grpc::ServerContext* context,
                                                    const v1::CheckpointRetentionRequest* r,
                                                    v1::CheckpointRetentionResponse* out) {
  absl::StatusOr<Caller> caller = Authorize(context, "CheckpointRetention");
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  return Reply(leases_.CheckpointRetention(*r, *caller), out);
}
grpc::Status WorkerServiceImpl::PostRendezvous(grpc::ServerContext* context,
                                               const v1::PostRendezvousRequest* r,
                                               v1::RendezvousResponse* out) {
  absl::StatusOr<Caller> caller = Authorize(context, "PostRendezvous");
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  return Reply(leases_.PostRendezvous(*r, *caller), out);
}
grpc::Status WorkerServiceImpl::CheckInRendezvous(grpc::ServerContext* context,
                                                  const v1::CheckInRendezvousRequest* r,
                                                  v1::RendezvousResponse* out) {
  absl::StatusOr<Caller> caller = Authorize(context, "CheckInRendezvous");
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  return Reply(leases_.CheckInRendezvous(*r, *caller), out);
}
grpc::Status WorkerServiceImpl::ReportMetrics(grpc::ServerContext* context,
                                              const v1::ReportMetricsRequest* r,
                                              v1::ReportMetricsResponse* out) {
  absl::StatusOr<Caller> caller = Authorize(context, "ReportMetrics");
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  return Reply(leases_.ReportMetrics(*r, *caller), out);
}
grpc::ServerUnaryReactor* WorkerServiceImpl::CompleteRun(grpc::CallbackServerContext* context,
                                                         const v1::CompleteRunRequest* r,
                                                         v1::CompleteRunResponse* out) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::StatusOr<Caller> caller = Authorize(context, "CompleteRun");
  if (!caller.ok()) {
    reactor->Finish(ToGrpcStatus(caller.status()));
    return reactor;
  }
  leases_.CompleteRun(*r, FinishWith(reactor, out), *caller);
  return reactor;
}

grpc::Status TokenServiceImpl::CreateToken(grpc::ServerContext* context,
                                           const v1::CreateTokenRequest* r,
                                           v1::CreateTokenResponse* out) {
  absl::StatusOr<Identity> who = AuthorizeCall(access_, context, kTokens, "CreateToken");
  if (!who.ok()) return ToGrpcStatus(who.status());
  return Reply(access_.CreateToken(*r, *who), out);
}
grpc::Status TokenServiceImpl::ListTokens(grpc::ServerContext* context,
                                          const v1::ListTokensRequest* r,
                                          v1::ListTokensResponse* out) {
  absl::StatusOr<Identity> who = AuthorizeCall(access_, context, kTokens, "ListTokens");
  if (!who.ok()) return ToGrpcStatus(who.status());
  return Reply(access_.ListTokens(*r), out);
}
grpc::Status TokenServiceImpl::RevokeToken(grpc::ServerContext* context,
                                           const v1::RevokeTokenRequest* r,
                                           v1::RevokeTokenResponse* out) {
  absl::StatusOr<Identity> who = AuthorizeCall(access_, context, kTokens, "RevokeToken");
  if (!who.ok()) return ToGrpcStatus(who.status());
  return Reply(access_.RevokeToken(*r), out);
}

}  // namespace parity::server
