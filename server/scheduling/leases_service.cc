#include "server/scheduling/leases_service.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/eval_sets.h"
#include "core/proto_time.h"
#include "core/status_macros.h"
#include "server/scheduling/await_callback.h"
#include "server/scheduling/request_validation.h"
#include "server/scheduling/worker_requests.h"
#include "spdlog/spdlog.h"

namespace parity::server {

LeasesService::LeasesService(RunQueue& queue, RunReader read_run, LeaseSecrets& secrets,
                             WorkSignal& work_signal, const Clock& clock, SchedulerOptions options,
                             SchedulerObserver* observer, GangQueue* gangs)
    : queue_(queue),
      read_run_(std::move(read_run)),
      secrets_(secrets),
      work_signal_(work_signal),
      clock_(clock),
      options_(std::move(options)),
      observer_(observer),
      gangs_(gangs),
      long_polls_(work_signal, clock,
                  [this](std::unique_ptr<PendingLease> lease) { TryLease(std::move(lease)); }),
      leases_(
          [this](const std::vector<const LeaseRequest*>& batch) {
            return queue_.LeaseNextRuns(batch);
          },
          options_.max_store_batch, options_.store_batches_in_flight),
      completions_(
          [this](const std::vector<const Completion*>& batch) { return CompleteBatch(batch); },
          options_.max_store_batch, options_.store_batches_in_flight) {}

// The combiners then drain what is queued; a lease that finds nothing is answered at once.
LeasesService::~LeasesService() { long_polls_.Stop(); }

absl::StatusOr<v1::RegisterWorkerResponse> LeasesService::RegisterWorker(
    const v1::RegisterWorkerRequest& request, const Caller& caller) {
  Violations violations;
  CheckDevices(violations, "devices", request.devices());
  if (!request.worker_id().empty()) violations.RequireUuid("worker_id", request.worker_id());
  if (request.hostname().size() > 255) violations.Add("hostname", "longer than 255 characters");
  if (request.version().size() > kMaxWorkerVersionBytes) {
    violations.Add("version", absl::StrCat("longer than ", kMaxWorkerVersionBytes, " characters"));
  }
  if (request.devices_size() > kMaxWorkerDevices) {
    violations.Add("devices", absl::StrCat(request.devices_size(), " devices, over the limit of ",
                                           kMaxWorkerDevices));
  }
  CheckWorkerLabels(violations, request.labels());
  CheckDatasetHoldings(violations, request.datasets());
  if (absl::Status status = violations.ToStatus("invalid RegisterWorker request"); !status.ok()) {
    return status;
  }
  WorkerRegistration registration;
  registration.worker_id = request.worker_id();
  registration.owner = caller.name;  // the store refuses an id another name registered
  registration.hostname = request.hostname();
  registration.devices.assign(request.devices().begin(), request.devices().end());
  for (const auto& [key, value] : request.labels()) registration.labels.emplace_back(key, value);
  registration.version = request.version();
  registration.datasets.assign(request.datasets().begin(), request.datasets().end());
  PARITY_ASSIGN_OR_RETURN(v1::Worker worker, queue_.RegisterWorker(registration));
  v1::RegisterWorkerResponse response;
  response.set_worker_id(worker.worker_id());
  *response.mutable_lease_ttl() = ToProtoDuration(options_.lease_ttl);
  *response.mutable_heartbeat_interval() = ToProtoDuration(options_.heartbeat_interval);
  return response;
}

void LeasesService::LeaseRun(const v1::LeaseRunRequest& request, absl::Time call_deadline,
                             WatchControl control,
                             absl::AnyInvocable<void(absl::StatusOr<v1::LeaseRunResponse>)> done,
                             const Caller& caller) {
  Violations violations;
  violations.RequireUuid("worker_id", request.worker_id());
  CheckDevices(violations, "free_devices", request.free_devices());
  const absl::Duration wait = FromProtoDuration(request.wait_time());
  if (wait < absl::ZeroDuration()) violations.Add("wait_time", "must not be negative");
  CheckLeaseRequestId(violations, request.request_id(), request.retry());
  if (absl::Status status = violations.ToStatus("invalid LeaseRun request"); !status.ok()) {
    return done(status);
  }
  if (absl::Status owner = CheckWorkerOwner(request.worker_id(), caller, "lease"); !owner.ok()) {
    return done(owner);
  }
  // Loaded before the lease is taken, so that a lease is never granted without its secret.
  if (absl::StatusOr<std::string> key = secrets_.LeaseKey(); !key.ok()) return done(key.status());
  auto lease = std::make_unique<PendingLease>();
  lease->holder = caller.name;
  lease->request = LeaseRequest{.worker_id = request.worker_id(),
                                .offer = OfferOf(request.free_devices()),
                                .ttl = options_.lease_ttl,
                                .request_id = request.request_id(),
                                .retry = request.retry()};
  lease->start = clock_.Now();
  // Answer a little before the caller's deadline so the empty reply still reaches it.
  lease->deadline = std::min(lease->start + std::min(wait, options_.max_lease_wait),
                             call_deadline - absl::Milliseconds(100));
  lease->cancelled = control.cancelled ? std::move(control.cancelled) : [] { return false; };
  lease->done = std::move(done);
  // While a gang waits, a worker that frees up asks the gang pool first (a starving gang keeps
  // it); otherwise a cached "no" (GangsActive reads the store at most once an interval).
  // A retry first looks for its lost ordinary lease (then joins the pool if it parks).
  lease->accepts_gangs = request.accepts_gangs();
  // A retry whose lost answer was a gang's slots gets them again (same epoch), before anything.
  if (AnswerGangAgain(lease)) return;
  lease->in_gang_pool = lease->accepts_gangs && !request.retry() && GangsActive();
  TryLease(std::move(lease));
}

void LeasesService::TryLease(std::unique_ptr<PendingLease> lease) {
  if (lease->in_gang_pool && TryGang(lease)) return;  // parked calls only, while gangs wait
  // Read before the try: a wake-up during it sends the call straight back (LeaseLongPolls).
  const uint64_t generation = work_signal_.generation();
  const LeaseRequest& request = lease->request;
  leases_.SubmitAsync(request, [this, generation, lease = std::move(lease)](
                                   absl::StatusOr<std::optional<LeasedRun>> leased) mutable {
    if (!leased.ok()) return lease->done(leased.status());
    if (leased->has_value()) {
      // A lease answered again to a retry was counted when it was granted.
      if (observer_ != nullptr && !(*leased)->answered_again) {
        observer_->OnRunLeased((*leased)->run, clock_.Now() - lease->start);
      }
      if (lease->in_gang_pool) LeaveGangPool(lease->request);
      v1::LeaseRunResponse response;
      absl::StatusOr<std::string> key = secrets_.LeaseKey();  // loaded by LeaseRun: no store call
      if (key.ok()) {
        response.set_lease_secret(secrets_.LeaseSecret(
            *key, (*leased)->lease.run_id(), (*leased)->lease.lease_epoch(), lease->holder));
      }
      *response.mutable_lease() = std::move((*leased)->lease);
      *response.mutable_run() = std::move((*leased)->run);
      return lease->done(std::move(response));
    }
    const absl::Time now = clock_.Now();
    if (now >= lease->deadline || lease->cancelled()) {
      return lease->done(v1::LeaseRunResponse());
    }
    // The retry found no lease of its own: it was looked up once, and the long poll's tries are
    // ordinary leases (under the same request id).
    lease->request.retry = false;
    // While a gang waits (or has slots to collect), the next tries ask the gang pool first — the
    // first of them at once, not after an idle interval.
    absl::Time retry_at = std::min(lease->deadline, now + options_.idle_poll_interval);
    if (lease->accepts_gangs && !lease->in_gang_pool && GangsActive()) {
      lease->in_gang_pool = true;
      retry_at = now;
    }
    long_polls_.Park(std::move(lease), generation, retry_at);
  });
}

absl::StatusOr<v1::LeaseRunResponse> LeasesService::LeaseRun(const v1::LeaseRunRequest& request,
                                                             absl::Time call_deadline,
                                                             const WatchControl& control,
                                                             const Caller& caller) {
  return AwaitCallback<absl::StatusOr<v1::LeaseRunResponse>>(
      [&](auto done) { LeaseRun(request, call_deadline, control, std::move(done), caller); });
}

absl::StatusOr<v1::HeartbeatResponse> LeasesService::Heartbeat(const v1::HeartbeatRequest& request,
                                                               const Caller& caller) {
  Violations violations;
  violations.RequireUuid("worker_id", request.worker_id());
  violations.RequireUuid("run_id", request.run_id());
  if (request.lease_epoch() <= 0) violations.Add("lease_epoch", "must be positive");
  CheckCheckpoint(violations, request.run_id(), request.checkpoint());
  if (absl::Status status = violations.ToStatus("invalid Heartbeat request"); !status.ok()) {
    return status;
  }
  PARITY_RETURN_IF_ERROR(CheckWorkerOwner(request.worker_id(), caller, "heartbeat"));
  // A gang's follower (not rank 0's worker) renews its slots; it records no checkpoint.
  PARITY_ASSIGN_OR_RETURN(const bool follower,
                          secrets_.CheckGangSecret(request.run_id(), request.lease_epoch(),
                                                   request.lease_secret(), caller));
  HeartbeatUpdate update{request.worker_id(), request.run_id(), request.lease_epoch(),
                         request.step(),      std::nullopt,     options_.lease_ttl};
  if (request.has_checkpoint() && !follower) update.checkpoint = request.checkpoint();
  if (follower && gangs_ == nullptr) return absl::UnimplementedError("no gang store");
  PARITY_ASSIGN_OR_RETURN(HeartbeatResult result,
                          follower ? gangs_->HeartbeatFollower(update) : queue_.Heartbeat(update));
  v1::HeartbeatResponse response;
  *response.mutable_expire_time() = ToProtoTime(result.expire_time);
  *response.mutable_ttl() = ToProtoDuration(options_.lease_ttl);
  response.set_cancel_requested(result.cancel_requested);
  return response;
}

absl::StatusOr<v1::ReportMetricsResponse> LeasesService::ReportMetrics(
    const v1::ReportMetricsRequest& request, const Caller& caller) {
  if (static_cast<uint32_t>(request.points_size()) > options_.max_metrics_batch) {
    return absl::ResourceExhaustedError(absl::StrCat("a metrics batch holds at most ",
                                                     options_.max_metrics_batch, " points; got ",
                                                     request.points_size()));
  }
  Violations violations;
  violations.RequireUuid("run_id", request.run_id());
  if (request.lease_epoch() <= 0) violations.Add("lease_epoch", "must be positive");
  std::vector<v1::MetricPoint> points;
  points.reserve(request.points_size());
  for (int i = 0; i < request.points_size(); ++i) {
    const v1::MetricPoint& p = request.points(i);
    // Field paths are built only for a violation: this loop runs for every point ingested.
    auto at = [i](absl::string_view field) { return absl::StrCat("points[", i, "].", field); };
    if (!p.run_id().empty() && p.run_id() != request.run_id()) {
      violations.Add(at("run_id"), "belongs to another run than the request");
    }
    for (const auto& [name, value] : {std::pair{"epoch", p.epoch()},
                                      {"train_bpc", p.train_bpc()},
                                      {"learning_rate", p.learning_rate()},
                                      {"grad_norm", p.grad_norm()},
                                      {"aux_loss", p.aux_loss()},
                                      {"z_loss", p.z_loss()},
                                      {"tokens_per_second", p.tokens_per_second()},
                                      {"flops_per_second", p.flops_per_second()},
                                      {"flops", p.flops()},
                                      {"val_bpc", p.has_val_bpc() ? p.val_bpc() : 0.0}}) {
      if (!std::isfinite(value)) violations.RequireFinite(at(name), value);
    }
    if (p.step() > static_cast<uint64_t>(INT64_MAX)) violations.Add(at("step"), "too large");
    if (!p.eval_bpc().empty()) {
      if (absl::Status bad = core::CheckEvalBpc(p.eval_bpc()); !bad.ok()) {
        violations.Add(at("eval_bpc"), std::string(bad.message()));
      }
    }
    points.push_back(p);
  }
  if (absl::Status status = violations.ToStatus("invalid ReportMetrics request"); !status.ok()) {
    return status;
  }
  if (absl::Status holder = secrets_.CheckLeaseSecret(request.run_id(), request.lease_epoch(),
                                                      request.lease_secret(), caller);
      !holder.ok()) {
    absl::StatusOr<bool> follower = secrets_.CheckGangSecret(
        request.run_id(), request.lease_epoch(), request.lease_secret(), caller);
    if (follower.ok() && *follower) {
      return absl::PermissionDeniedError(
          "only rank 0 of a gang reports its metrics (the curve is stored once): this worker "
          "holds other ranks");
    }
    return holder;
  }
  if (points.empty()) return v1::ReportMetricsResponse();
  PARITY_RETURN_IF_ERROR(CheckExpertLoads(request));
  PARITY_ASSIGN_OR_RETURN(MetricsAppendResult result,
                          queue_.AppendMetrics(request.run_id(), request.lease_epoch(), points));
  if (observer_ != nullptr) observer_->OnMetricsStored(result);
  v1::ReportMetricsResponse response;
  response.set_accepted(result.accepted);
  response.set_duplicates(result.duplicates);
  return response;
}

void LeasesService::CompleteRun(
    const v1::CompleteRunRequest& request,
    absl::AnyInvocable<void(absl::StatusOr<v1::CompleteRunResponse>)> done, const Caller& caller) {
  Violations violations;
  violations.RequireUuid("run_id", request.run_id());
  if (request.lease_epoch() <= 0) violations.Add("lease_epoch", "must be positive");
  if (request.outcome_case() == v1::CompleteRunRequest::OUTCOME_NOT_SET) {
    violations.Add("outcome", "success or failure is required");
  }
  if (request.has_failure() && request.failure().failure_class() == v1::FAILURE_CLASS_UNSPECIFIED) {
    violations.Add("failure.failure_class", "required");
  } else if (request.has_failure() &&
             !v1::FailureClass_IsValid(request.failure().failure_class())) {
    // Proto3 enums keep unknown numbers: a newer or broken worker's class is refused here, before
    // any store renders its name or a retry policy looks it up.
    violations.Add("failure.failure_class",
                   absl::StrCat("unknown value ", request.failure().failure_class(),
                                "; send one of the FailureClass values in parity/v1/run.proto"));
  }
  if (request.failure().status().message().size() > kMaxFailureMessageBytes) {
    violations.Add("failure.status.message",
                   absl::StrCat("longer than ", kMaxFailureMessageBytes, " bytes"));
  }
  if (request.failure().status().details_size() > kMaxFailureDetails) {
    violations.Add("failure.status.details",
                   absl::StrCat("more than ", kMaxFailureDetails, " details"));
  }
  CheckCheckpoint(violations, request.run_id(), request.checkpoint());
  CheckSummaryEvalSets(violations, request.success());
  if (absl::Status status = violations.ToStatus("invalid CompleteRun request"); !status.ok()) {
    return done(status);
  }
  // Any rank's worker may report a failure (the whole gang restarts); only rank 0's a success.
  absl::StatusOr<bool> follower = false;
  if (!request.has_success()) {
    follower = secrets_.CheckGangSecret(request.run_id(), request.lease_epoch(),
                                        request.lease_secret(), caller);
  } else if (absl::Status holder = secrets_.CheckLeaseSecret(
                 request.run_id(), request.lease_epoch(), request.lease_secret(), caller);
             !holder.ok()) {
    follower = holder;
  }
  if (!follower.ok()) return done(follower.status());
  auto completion = std::make_unique<Completion>();
  completion->run_id = request.run_id();
  completion->lease_epoch = request.lease_epoch();
  if (request.has_success()) {
    completion->success = request.success();
  } else {
    completion->failure_class = request.failure().failure_class();
    completion->failure_status = request.failure().status();
  }
  // Rank 0 alone writes a gang's checkpoints.
  if (request.has_checkpoint() && !*follower) completion->checkpoint = request.checkpoint();
  const Completion& queued = *completion;
  completions_.SubmitAsync(
      queued, [this, completion = std::move(completion),
               done = std::move(done)](absl::StatusOr<CompletionResult> result) mutable {
        if (!result.ok()) return done(result.status());
        if (result->run.state() == v1::RUN_STATE_PENDING) work_signal_.Notify();
        if (observer_ != nullptr) observer_->OnRunCompleted(result->run);
        v1::CompleteRunResponse response;
        *response.mutable_run() = std::move(result->run);
        if (result->retry_delay > absl::ZeroDuration()) {
          *response.mutable_retry_delay() = ToProtoDuration(result->retry_delay);
        }
        done(std::move(response));
      });
}

// Successes need no decision and go to the store as they came (one statement per batch there).
// A failure's decision needs the run's attempt and max_attempts: one read per failure, which is
// rare; the store checks under the row lock that the run is still at that attempt.
std::vector<absl::StatusOr<CompletionResult>> LeasesService::CompleteBatch(
    const std::vector<const Completion*>& batch) {
  std::vector<absl::StatusOr<CompletionResult>> results(batch.size(),
                                                        absl::InternalError("not completed"));
  std::vector<Completion> decided;
  decided.reserve(batch.size());  // stable addresses for `to_store`
  std::vector<const Completion*> to_store;
  std::vector<size_t> slots;
  for (size_t i = 0; i < batch.size(); ++i) {
    const Completion* completion = batch[i];
    if (!completion->success) {
      absl::StatusOr<v1::Run> run = read_run_(completion->run_id);
      if (!run.ok()) {
        results[i] = run.status();
        continue;
      }
      Completion& with_decision = decided.emplace_back(*completion);
      with_decision.retry = DecideRetry(options_.retry_policy, completion->failure_class,
                                        {run->attempt(), run->max_attempts(), run->preemptions()});
      with_decision.decided_at_attempt = run->attempt();
      if (run->spec().resources().ranks() > 1 && gangs_ != nullptr) {
        results[i] = FailGang(with_decision);  // rare: one transaction of its own
        continue;
      }
      completion = &with_decision;
    }
    to_store.push_back(completion);
    slots.push_back(i);
  }
  if (to_store.empty()) return results;
  std::vector<absl::StatusOr<CompletionResult>> stored = queue_.CompleteRuns(to_store);
  for (size_t j = 0; j < slots.size(); ++j) {
    if (stored[j].ok() && !stored[j]->invalid_summary.empty()) {
      stored[j] = FailInvalidSuccess(*to_store[j], stored[j]->invalid_summary);
    }
    results[slots[j]] = std::move(stored[j]);
  }
  return results;
}

// The store refused a success whose summary disagrees with the plan and left the run leased: the
// attempt fails as INVALID_RESULT, decided as any failure is. Rare (a worker of another version,
// a broken engine, a forged call), so one completion at a time.
absl::StatusOr<CompletionResult> LeasesService::FailInvalidSuccess(const Completion& success,
                                                                   const std::string& why) {
  spdlog::warn("run {}: refused the success of lease {}: the summary disagrees with the plan: {}",
               success.run_id, success.lease_epoch, why);
  PARITY_ASSIGN_OR_RETURN(const v1::Run run, read_run_(success.run_id));
  Completion failure;
  failure.run_id = success.run_id;
  failure.lease_epoch = success.lease_epoch;
  failure.failure_class = v1::FAILURE_CLASS_INVALID_RESULT;
  failure.failure_status.set_code(static_cast<int>(absl::StatusCode::kFailedPrecondition));
  failure.failure_status.set_message(absl::StrCat(
      "the scheduler refused the success: the summary disagrees with the plan: ", why));
  failure.checkpoint = success.checkpoint;
  failure.retry = DecideRetry(options_.retry_policy, failure.failure_class,
                              {run.attempt(), run.max_attempts(), run.preemptions()});
  failure.decided_at_attempt = run.attempt();
  return queue_.CompleteRun(failure);
}

absl::StatusOr<v1::CompleteRunResponse> LeasesService::CompleteRun(
    const v1::CompleteRunRequest& request, const Caller& caller) {
  return AwaitCallback<absl::StatusOr<v1::CompleteRunResponse>>(
      [&](auto done) { CompleteRun(request, std::move(done), caller); });
}

}  // namespace parity::server
