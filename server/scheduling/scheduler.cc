#include "server/scheduling/scheduler.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/checkpoint_uri.h"
#include "core/eval_sets.h"
#include "core/planner_warnings.h"
#include "core/proto_time.h"
#include "core/status_macros.h"
#include "server/scheduling/await_callback.h"
#include "server/scheduling/request_validation.h"
#include "server/scheduling/secrets.h"
#include "spdlog/spdlog.h"

namespace parity::server {
namespace {

// The free devices a worker offers, reduced to what a run's ResourceRequest is matched against.
ResourceOffer OfferOf(const google::protobuf::RepeatedPtrField<v1::Device>& devices) {
  ResourceOffer offer;
  bool have_cpu = false;
  for (const v1::Device& device : devices) {
    if (device.kind() == v1::DEVICE_KIND_CUDA) {
      offer.gpus.push_back({device.index(), device.memory_bytes()});
    } else if (device.kind() == v1::DEVICE_KIND_CPU) {
      offer.cpu_threads += std::max<uint32_t>(device.threads(), 1);
      offer.host_memory_bytes += device.memory_bytes();
      if (!have_cpu) offer.cpu_device_index = device.index();
      have_cpu = true;
    }
  }
  return offer;
}

// What a worker may send about itself and its runs (the spec's own limits are core's).
constexpr size_t kMaxWorkerVersionBytes = 64;
constexpr int kMaxWorkerDevices = 256;
constexpr int kMaxWorkerLabels = 32;
constexpr size_t kMaxWorkerLabelBytes = 256;
constexpr size_t kMaxFailureMessageBytes = 16384;
constexpr int kMaxFailureDetails = 8;

void CheckWorkerLabels(Violations& violations,
                       const google::protobuf::Map<std::string, std::string>& labels) {
  if (labels.size() > static_cast<size_t>(kMaxWorkerLabels)) {
    violations.Add("labels",
                   absl::StrCat(labels.size(), " labels, over the limit of ", kMaxWorkerLabels));
  }
  for (const auto& [key, value] : labels) {
    if (key.empty() || key.size() > 63 || value.size() > kMaxWorkerLabelBytes) {
      violations.Add(absl::StrCat("labels[", key.substr(0, 64), "]"),
                     absl::StrCat("a key of 1 to 63 characters and a value of at most ",
                                  kMaxWorkerLabelBytes));
    }
  }
}

// A reported checkpoint lies inside the run's prefix of the store (core/checkpoint_uri.h): the
// next worker resumes the engine from it.
void CheckCheckpoint(Violations& violations, absl::string_view run_id,
                     const v1::Checkpoint& checkpoint) {
  if (absl::Status s = core::CheckCheckpointUri(run_id, checkpoint.uri()); !s.ok()) {
    violations.Add("checkpoint.uri", std::string(s.message()));
  }
}

// A success's per-set final BPC is held to the rule of core/eval_sets.h (it becomes JSON keys and
// CSV columns), its dataset digest to the manifest's form (64 lowercase hex): a worker is a
// boundary, and the store writes both as they come.
void CheckSummaryEvalSets(Violations& violations, const v1::RunSummary& summary) {
  if (absl::Status s = core::CheckEvalBpc(summary.final_eval_bpc()); !s.ok()) {
    violations.Add("success.final_eval_bpc", std::string(s.message()));
  }
  const std::string& digest = summary.dataset_digest();
  if (!digest.empty() &&
      (digest.size() != 64 || digest.find_first_not_of("0123456789abcdef") != std::string::npos)) {
    violations.Add("success.dataset_digest",
                   "must be a manifest digest: 64 lowercase hex characters, or empty");
  }
}

void CheckDevices(Violations& violations, absl::string_view field,
                  const google::protobuf::RepeatedPtrField<v1::Device>& devices) {
  if (devices.empty()) violations.Add(std::string(field), "at least one device is required");
  for (int i = 0; i < devices.size(); ++i) {
    if (devices[i].kind() == v1::DEVICE_KIND_UNSPECIFIED) {
      violations.Add(absl::StrCat(field, "[", i, "].kind"), "must be CPU or CUDA");
    }
  }
}

}  // namespace

Scheduler::Scheduler(RunStore& store, WorkSignal& work_signal, const Clock& clock, Planner planner,
                     SchedulerOptions options, SchedulerObserver* observer)
    : store_(store),
      work_signal_(work_signal),
      clock_(clock),
      planner_(std::move(planner)),
      options_(std::move(options)),
      observer_(observer),
      long_polls_(work_signal, clock,
                  [this](std::unique_ptr<PendingLease> lease) { TryLease(std::move(lease)); }),
      leases_(
          [this](const std::vector<const LeaseRequest*>& batch) {
            return store_.LeaseNextRuns(batch);
          },
          options_.max_store_batch, options_.store_batches_in_flight),
      completions_(
          [this](const std::vector<const Completion*>& batch) { return CompleteBatch(batch); },
          options_.max_store_batch, options_.store_batches_in_flight) {}

// The combiners then drain what is queued; a lease that finds nothing is answered at once.
Scheduler::~Scheduler() { long_polls_.Stop(); }

absl::StatusOr<v1::PlanSweepResponse> Scheduler::PlanSweep(const v1::PlanSweepRequest& request) {
  PARITY_ASSIGN_OR_RETURN(std::vector<v1::RunSpec> runs, planner_(request.spec()));
  if (runs.size() > options_.max_runs_per_sweep) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the spec plans ", runs.size(), " runs; the limit is ", options_.max_runs_per_sweep));
  }
  // Every run trains on the same copy of the dataset: the digest pinned now (or given).
  std::vector<core::FieldViolation> warnings = core::PlanWarnings(request.spec(), runs);
  PARITY_ASSIGN_OR_RETURN(const std::string digest, PinDatasetDigest(request.spec(), warnings));
  for (v1::RunSpec& run : runs) run.mutable_data()->set_dataset_digest(digest);
  v1::PlanSweepResponse response;
  for (const core::FieldViolation& w : warnings) {
    v1::PlanWarning* warning = response.add_warnings();
    warning->set_field(w.field);
    warning->set_description(w.description);
  }
  for (v1::RunSpec& run : runs) *response.add_runs() = std::move(run);
  return response;
}

absl::StatusOr<v1::SubmitSweepResponse> Scheduler::SubmitSweep(
    const v1::SubmitSweepRequest& request, const Caller& caller) {
  Violations violations;
  if (request.idempotency_key().size() > 128) {
    violations.Add("idempotency_key", "longer than 128 characters");
  }
  if (request.owner().size() > 64) violations.Add("owner", "longer than 64 characters");
  if (absl::Status status = violations.ToStatus("invalid SubmitSweep request"); !status.ok()) {
    return status;
  }
  if (!caller.admin && !request.owner().empty() && request.owner() != caller.name) {
    return core::PermissionDeniedWithViolation(
        "owner", absl::StrCat("only an admin may submit on behalf of another identity; leave "
                              "it empty (the sweep is then '",
                              caller.name, "''s)"));
  }
  if (!caller.admin && request.spec().priority() > options_.max_priority) {
    return core::PermissionDeniedWithViolation(
        "spec.priority", absl::StrCat(request.spec().priority(), " is above ",
                                      options_.max_priority, ", the highest a non-admin may use"));
  }
  v1::PlanSweepRequest plan_request;
  *plan_request.mutable_spec() = request.spec();
  PARITY_ASSIGN_OR_RETURN(v1::PlanSweepResponse plan, PlanSweep(plan_request));

  NewSweep sweep;
  sweep.spec = request.spec();
  if (plan.runs_size() > 0) {  // the digest PlanSweep pinned, stored with the sweep's spec too
    sweep.spec.mutable_data()->set_dataset_digest(plan.runs(0).data().dataset_digest());
  }
  sweep.runs.assign(plan.runs().begin(), plan.runs().end());
  sweep.owner = !request.owner().empty() ? request.owner()
                : caller.name.empty()    ? std::string("anonymous")
                                         : caller.name;
  sweep.idempotency_key = request.idempotency_key();
  // A soft limit: two submissions racing may both pass. It bounds what one identity can queue,
  // not the exact count.
  PARITY_ASSIGN_OR_RETURN(const OwnerLoad load, store_.CountOwnerLoad(sweep.owner));
  if (load.open_sweeps >= options_.max_open_sweeps_per_owner) {
    return core::ResourceExhaustedWithViolation(
        "spec", absl::StrCat("'", sweep.owner, "' has ", load.open_sweeps,
                             " open sweeps, the limit; wait for one to end or cancel one"));
  }
  if (load.queued_runs + sweep.runs.size() > options_.max_queued_runs_per_owner) {
    return core::ResourceExhaustedWithViolation(
        "spec", absl::StrCat("'", sweep.owner, "' has ", load.queued_runs, " runs not yet ended; ",
                             sweep.runs.size(), " more would pass the limit of ",
                             options_.max_queued_runs_per_owner));
  }
  PARITY_ASSIGN_OR_RETURN(CreatedSweep created, store_.CreateSweep(sweep));
  if (!created.deduplicated) work_signal_.Notify();
  if (observer_ != nullptr) observer_->OnSweepSubmitted(created.sweep, created.deduplicated);
  v1::SubmitSweepResponse response;
  *response.mutable_sweep() = std::move(created.sweep);
  for (std::string& id : created.run_ids) response.add_run_ids(std::move(id));
  response.set_deduplicated(created.deduplicated);
  *response.mutable_warnings() = plan.warnings();
  return response;
}

absl::StatusOr<v1::GetSweepResponse> Scheduler::GetSweep(const v1::GetSweepRequest& request) {
  Violations violations;
  violations.RequireUuid("sweep_id", request.sweep_id());
  if (absl::Status status = violations.ToStatus("invalid GetSweep request"); !status.ok()) {
    return status;
  }
  PARITY_ASSIGN_OR_RETURN(v1::Sweep sweep, store_.GetSweep(request.sweep_id()));
  v1::GetSweepResponse response;
  *response.mutable_sweep() = std::move(sweep);
  return response;
}

absl::StatusOr<v1::ListSweepsResponse> Scheduler::ListSweeps(const v1::ListSweepsRequest& request) {
  Violations violations;
  PageRequest page{violations.PageSize("page_size", request.page_size(), 100, 1000),
                   request.page_token()};
  if (absl::Status status = violations.ToStatus("invalid ListSweeps request"); !status.ok()) {
    return status;
  }
  PARITY_ASSIGN_OR_RETURN(Page<v1::Sweep> sweeps, store_.ListSweeps(request.state(), page));
  v1::ListSweepsResponse response;
  for (v1::Sweep& sweep : sweeps.items) *response.add_sweeps() = std::move(sweep);
  response.set_next_page_token(sweeps.next_page_token);
  return response;
}

absl::Status Scheduler::CheckSweepOwner(const std::string& sweep_id, const Caller& caller,
                                        absl::string_view action) {
  if (caller.admin) return absl::OkStatus();
  PARITY_ASSIGN_OR_RETURN(const v1::Sweep sweep, store_.GetSweep(sweep_id));
  if (sweep.owner() == caller.name) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat("sweep ", sweep_id, " is '", sweep.owner(),
                                                  "''s: only its owner or an admin may ", action,
                                                  " it"));
}

absl::StatusOr<v1::CancelSweepResponse> Scheduler::CancelSweep(
    const v1::CancelSweepRequest& request, const Caller& caller) {
  Violations violations;
  violations.RequireUuid("sweep_id", request.sweep_id());
  if (request.reason().size() > 1024) violations.Add("reason", "longer than 1024 characters");
  if (absl::Status status = violations.ToStatus("invalid CancelSweep request"); !status.ok()) {
    return status;
  }
  PARITY_RETURN_IF_ERROR(CheckSweepOwner(request.sweep_id(), caller, "cancel"));
  PARITY_ASSIGN_OR_RETURN(CancelResult cancelled,
                          store_.CancelSweep(request.sweep_id(), request.reason()));
  v1::CancelSweepResponse response;
  *response.mutable_sweep() = std::move(cancelled.sweep);
  response.set_cancelled_runs(cancelled.cancelled_runs);
  return response;
}

absl::StatusOr<v1::DeleteSweepResponse> Scheduler::DeleteSweep(
    const v1::DeleteSweepRequest& request, const Caller& caller) {
  Violations violations;
  violations.RequireUuid("sweep_id", request.sweep_id());
  if (absl::Status status = violations.ToStatus("invalid DeleteSweep request"); !status.ok()) {
    return status;
  }
  PARITY_RETURN_IF_ERROR(CheckSweepOwner(request.sweep_id(), caller, "delete"));
  PARITY_ASSIGN_OR_RETURN(const uint32_t deleted, store_.DeleteSweep(request.sweep_id()));
  v1::DeleteSweepResponse response;
  response.set_deleted_runs(deleted);
  return response;
}

absl::StatusOr<RetentionResult> Scheduler::ApplyRetention(const RetentionPolicy& policy,
                                                          const std::optional<LeaderFence>& fence) {
  PARITY_ASSIGN_OR_RETURN(
      const RetentionResult result,
      fence ? store_.ApplyRetentionFenced(policy, *fence) : store_.ApplyRetention(policy));
  if (observer_ != nullptr) observer_->OnRetentionApplied(result);
  return result;
}

absl::StatusOr<v1::ListRunsResponse> Scheduler::ListRuns(const v1::ListRunsRequest& request) {
  Violations violations;
  violations.RequireUuid("sweep_id", request.sweep_id());
  PageRequest page{violations.PageSize("page_size", request.page_size(), 100, 1000),
                   request.page_token()};
  std::vector<v1::RunState> states;
  for (int i = 0; i < request.states_size(); ++i) {
    const auto state = static_cast<v1::RunState>(request.states(i));
    if (state == v1::RUN_STATE_UNSPECIFIED || !v1::RunState_IsValid(state)) {
      violations.Add(absl::StrCat("states[", i, "]"), "not a run state");
    }
    states.push_back(state);
  }
  if (absl::Status status = violations.ToStatus("invalid ListRuns request"); !status.ok()) {
    return status;
  }
  PARITY_ASSIGN_OR_RETURN(Page<v1::Run> runs, store_.ListRuns(request.sweep_id(), states, page));
  v1::ListRunsResponse response;
  for (v1::Run& run : runs.items) *response.add_runs() = std::move(run);
  response.set_next_page_token(runs.next_page_token);
  return response;
}

absl::StatusOr<v1::GetRunResponse> Scheduler::GetRun(const v1::GetRunRequest& request) {
  Violations violations;
  violations.RequireUuid("run_id", request.run_id());
  if (absl::Status status = violations.ToStatus("invalid GetRun request"); !status.ok()) {
    return status;
  }
  PARITY_ASSIGN_OR_RETURN(v1::Run run, store_.GetRun(request.run_id()));
  v1::GetRunResponse response;
  *response.mutable_run() = std::move(run);
  return response;
}

absl::StatusOr<v1::QueryResultsResponse> Scheduler::QueryResults(
    const v1::QueryResultsRequest& request) {
  Violations violations;
  const v1::ResultsFilter& filter = request.filter();
  ResultsQuery query;
  if (!filter.sweep_id().empty()) violations.RequireUuid("filter.sweep_id", filter.sweep_id());
  query.sweep_id = filter.sweep_id();
  for (int i = 0; i < filter.states_size(); ++i) {
    const auto state = static_cast<v1::RunState>(filter.states(i));
    if (state == v1::RUN_STATE_UNSPECIFIED || !v1::RunState_IsValid(state)) {
      violations.Add(absl::StrCat("filter.states[", i, "]"),
                     absl::StrCat(filter.states(i),
                                  " is not a run state (RUN_STATE_PENDING .. "
                                  "RUN_STATE_CANCELLED)"));
    }
    query.states.push_back(state);
  }
  query.layout = filter.layout();
  violations.RequireFinite("filter.min_activation_rate", filter.min_activation_rate());
  violations.RequireFinite("filter.max_activation_rate", filter.max_activation_rate());
  if (filter.max_activation_rate() != 0 &&
      filter.min_activation_rate() > filter.max_activation_rate()) {
    violations.Add("filter.min_activation_rate", "greater than max_activation_rate");
  }
  query.min_activation_rate = filter.min_activation_rate();
  query.max_activation_rate = filter.max_activation_rate();
  query.order_by = request.order_by();
  query.page = {violations.PageSize("page_size", request.page_size(), 1000, 10000),
                request.page_token()};
  if (absl::Status status = violations.ToStatus("invalid QueryResults request"); !status.ok()) {
    return status;
  }
  PARITY_ASSIGN_OR_RETURN(Page<v1::ResultRow> rows, store_.QueryResults(query));
  v1::QueryResultsResponse response;
  for (v1::ResultRow& row : rows.items) *response.add_rows() = std::move(row);
  response.set_next_page_token(rows.next_page_token);
  return response;
}

absl::StatusOr<v1::ListWorkersResponse> Scheduler::ListWorkers(
    const v1::ListWorkersRequest& request) {
  Violations violations;
  WorkersQuery query;
  query.page = {violations.PageSize("page_size", request.page_size(), 100, 1000),
                request.page_token()};
  query.seen_within = absl::Seconds(request.seen_within_seconds() == 0
                                        ? 300
                                        : static_cast<int64_t>(request.seen_within_seconds()));
  if (absl::Status status = violations.ToStatus("invalid ListWorkers request"); !status.ok()) {
    return status;
  }
  PARITY_ASSIGN_OR_RETURN(Page<v1::Worker> workers, store_.ListWorkers(query));
  v1::ListWorkersResponse response;
  for (v1::Worker& worker : workers.items) *response.add_workers() = std::move(worker);
  response.set_next_page_token(workers.next_page_token);
  return response;
}

absl::StatusOr<v1::RegisterWorkerResponse> Scheduler::RegisterWorker(
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
  PARITY_ASSIGN_OR_RETURN(v1::Worker worker, store_.RegisterWorker(registration));
  v1::RegisterWorkerResponse response;
  response.set_worker_id(worker.worker_id());
  *response.mutable_lease_ttl() = ToProtoDuration(options_.lease_ttl);
  *response.mutable_heartbeat_interval() = ToProtoDuration(options_.heartbeat_interval);
  return response;
}

absl::StatusOr<std::string> Scheduler::LeaseKey() {
  absl::MutexLock lock(&lease_key_mu_);
  if (lease_key_.empty()) {
    PARITY_ASSIGN_OR_RETURN(lease_key_,
                            store_.GetOrCreateServerKey("lease-secret-v1", RandomBytes(32)));
  }
  return lease_key_;
}

std::string Scheduler::LeaseSecret(const std::string& key, const std::string& run_id, int64_t epoch,
                                   const std::string& holder) const {
  return Base64Url(
      HmacSha256(key, absl::StrCat("parity lease\n", run_id, "\n", epoch, "\n", holder)));
}

absl::Status Scheduler::CheckLeaseSecret(const std::string& run_id, int64_t epoch,
                                         const std::string& secret, const Caller& caller) {
  PARITY_ASSIGN_OR_RETURN(const std::string key, LeaseKey());
  if (ConstantTimeEquals(secret, LeaseSecret(key, run_id, epoch, caller.name))) {
    return absl::OkStatus();
  }
  return absl::PermissionDeniedError(
      absl::StrCat("lease_secret is not that of lease ", epoch, " of run ", run_id,
                   " held by this identity: only the lease's holder may write about the run"));
}

void Scheduler::LeaseRun(const v1::LeaseRunRequest& request, absl::Time call_deadline,
                         WatchControl control,
                         absl::AnyInvocable<void(absl::StatusOr<v1::LeaseRunResponse>)> done,
                         const Caller& caller) {
  Violations violations;
  violations.RequireUuid("worker_id", request.worker_id());
  CheckDevices(violations, "free_devices", request.free_devices());
  const absl::Duration wait = FromProtoDuration(request.wait_time());
  if (wait < absl::ZeroDuration()) violations.Add("wait_time", "must not be negative");
  if (absl::Status status = violations.ToStatus("invalid LeaseRun request"); !status.ok()) {
    return done(status);
  }
  if (absl::Status owner = CheckWorkerOwner(request.worker_id(), caller, "lease"); !owner.ok()) {
    return done(owner);
  }
  // Loaded before the lease is taken, so that a lease is never granted without its secret.
  if (absl::StatusOr<std::string> key = LeaseKey(); !key.ok()) return done(key.status());
  auto lease = std::make_unique<PendingLease>();
  lease->holder = caller.name;
  lease->request =
      LeaseRequest{request.worker_id(), OfferOf(request.free_devices()), options_.lease_ttl};
  lease->start = clock_.Now();
  // Answer a little before the caller's deadline so the empty reply still reaches it.
  lease->deadline = std::min(lease->start + std::min(wait, options_.max_lease_wait),
                             call_deadline - absl::Milliseconds(100));
  lease->cancelled = control.cancelled ? std::move(control.cancelled) : [] { return false; };
  lease->done = std::move(done);
  TryLease(std::move(lease));
}

void Scheduler::TryLease(std::unique_ptr<PendingLease> lease) {
  // Read before the try: a wake-up during it sends the call straight back (LeaseLongPolls).
  const uint64_t generation = work_signal_.generation();
  const LeaseRequest& request = lease->request;
  leases_.SubmitAsync(request, [this, generation, lease = std::move(lease)](
                                   absl::StatusOr<std::optional<LeasedRun>> leased) mutable {
    if (!leased.ok()) return lease->done(leased.status());
    if (leased->has_value()) {
      if (observer_ != nullptr) observer_->OnRunLeased((*leased)->run, clock_.Now() - lease->start);
      v1::LeaseRunResponse response;
      absl::StatusOr<std::string> key = LeaseKey();  // loaded by LeaseRun: no store call
      if (key.ok()) {
        response.set_lease_secret(LeaseSecret(*key, (*leased)->lease.run_id(),
                                              (*leased)->lease.lease_epoch(), lease->holder));
      }
      *response.mutable_lease() = std::move((*leased)->lease);
      *response.mutable_run() = std::move((*leased)->run);
      return lease->done(std::move(response));
    }
    const absl::Time now = clock_.Now();
    if (now >= lease->deadline || lease->cancelled()) {
      return lease->done(v1::LeaseRunResponse());
    }
    const absl::Time retry_at = std::min(lease->deadline, now + options_.idle_poll_interval);
    long_polls_.Park(std::move(lease), generation, retry_at);
  });
}

absl::StatusOr<v1::LeaseRunResponse> Scheduler::LeaseRun(const v1::LeaseRunRequest& request,
                                                         absl::Time call_deadline,
                                                         const WatchControl& control,
                                                         const Caller& caller) {
  return AwaitCallback<absl::StatusOr<v1::LeaseRunResponse>>(
      [&](auto done) { LeaseRun(request, call_deadline, control, std::move(done), caller); });
}

absl::StatusOr<v1::HeartbeatResponse> Scheduler::Heartbeat(const v1::HeartbeatRequest& request,
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
  PARITY_RETURN_IF_ERROR(
      CheckLeaseSecret(request.run_id(), request.lease_epoch(), request.lease_secret(), caller));
  HeartbeatUpdate update{request.worker_id(), request.run_id(), request.lease_epoch(),
                         request.step(),      std::nullopt,     options_.lease_ttl};
  if (request.has_checkpoint()) update.checkpoint = request.checkpoint();
  PARITY_ASSIGN_OR_RETURN(HeartbeatResult result, store_.Heartbeat(update));
  v1::HeartbeatResponse response;
  *response.mutable_expire_time() = ToProtoTime(result.expire_time);
  *response.mutable_ttl() = ToProtoDuration(options_.lease_ttl);
  response.set_cancel_requested(result.cancel_requested);
  return response;
}

absl::StatusOr<v1::ReportMetricsResponse> Scheduler::ReportMetrics(
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
  PARITY_RETURN_IF_ERROR(
      CheckLeaseSecret(request.run_id(), request.lease_epoch(), request.lease_secret(), caller));
  if (points.empty()) return v1::ReportMetricsResponse();
  PARITY_RETURN_IF_ERROR(CheckExpertLoads(request));
  PARITY_ASSIGN_OR_RETURN(MetricsAppendResult result,
                          store_.AppendMetrics(request.run_id(), request.lease_epoch(), points));
  if (observer_ != nullptr) observer_->OnMetricsStored(result);
  v1::ReportMetricsResponse response;
  response.set_accepted(result.accepted);
  response.set_duplicates(result.duplicates);
  return response;
}

void Scheduler::CompleteRun(const v1::CompleteRunRequest& request,
                            absl::AnyInvocable<void(absl::StatusOr<v1::CompleteRunResponse>)> done,
                            const Caller& caller) {
  Violations violations;
  violations.RequireUuid("run_id", request.run_id());
  if (request.lease_epoch() <= 0) violations.Add("lease_epoch", "must be positive");
  if (request.outcome_case() == v1::CompleteRunRequest::OUTCOME_NOT_SET) {
    violations.Add("outcome", "success or failure is required");
  }
  if (request.has_failure() && request.failure().failure_class() == v1::FAILURE_CLASS_UNSPECIFIED) {
    violations.Add("failure.failure_class", "required");
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
  if (absl::Status status =
          CheckLeaseSecret(request.run_id(), request.lease_epoch(), request.lease_secret(), caller);
      !status.ok()) {
    return done(status);
  }
  auto completion = std::make_unique<Completion>();
  completion->run_id = request.run_id();
  completion->lease_epoch = request.lease_epoch();
  if (request.has_success()) {
    completion->success = request.success();
  } else {
    completion->failure_class = request.failure().failure_class();
    completion->failure_status = request.failure().status();
  }
  if (request.has_checkpoint()) completion->checkpoint = request.checkpoint();
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
std::vector<absl::StatusOr<CompletionResult>> Scheduler::CompleteBatch(
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
      absl::StatusOr<v1::Run> run = store_.GetRun(completion->run_id);
      if (!run.ok()) {
        results[i] = run.status();
        continue;
      }
      Completion& with_decision = decided.emplace_back(*completion);
      with_decision.retry = DecideRetry(options_.retry_policy, completion->failure_class,
                                        {run->attempt(), run->max_attempts(), run->preemptions()});
      with_decision.decided_at_attempt = run->attempt();
      completion = &with_decision;
    }
    to_store.push_back(completion);
    slots.push_back(i);
  }
  if (to_store.empty()) return results;
  std::vector<absl::StatusOr<CompletionResult>> stored = store_.CompleteRuns(to_store);
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
absl::StatusOr<CompletionResult> Scheduler::FailInvalidSuccess(const Completion& success,
                                                               const std::string& why) {
  spdlog::warn("run {}: refused the success of lease {}: the summary disagrees with the plan: {}",
               success.run_id, success.lease_epoch, why);
  PARITY_ASSIGN_OR_RETURN(const v1::Run run, store_.GetRun(success.run_id));
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
  return store_.CompleteRun(failure);
}

absl::StatusOr<v1::CompleteRunResponse> Scheduler::CompleteRun(
    const v1::CompleteRunRequest& request, const Caller& caller) {
  return AwaitCallback<absl::StatusOr<v1::CompleteRunResponse>>(
      [&](auto done) { CompleteRun(request, std::move(done), caller); });
}

absl::StatusOr<ReapResult> Scheduler::ReapExpiredLeases(const std::optional<LeaderFence>& fence) {
  ReapResult total;
  const auto failed = [&](const absl::Status& status) {
    leases_need_grace_.store(true);
    if (observer_ != nullptr) observer_->OnReapFailed(status);
    return status;
  };
  if (leases_need_grace_.load()) {
    absl::StatusOr<int> extended = fence ? store_.ExtendLiveLeasesFenced(options_.lease_ttl, *fence)
                                         : store_.ExtendLiveLeases(options_.lease_ttl);
    if (!extended.ok()) return failed(extended.status());
    total.extended = *extended;
    leases_need_grace_.store(false);
  }
  while (true) {
    absl::StatusOr<ReapResult> batch =
        fence ? store_.ReapExpiredLeasesFenced(options_.reap_batch, *fence)
              : store_.ReapExpiredLeases(options_.reap_batch);
    if (!batch.ok()) return failed(batch.status());
    total.requeued += batch->requeued;
    total.failed += batch->failed;
    total.cancelled += batch->cancelled;
    if (batch->requeued + batch->failed + batch->cancelled < options_.reap_batch) break;
  }
  if (total.requeued > 0) work_signal_.Notify();
  if (observer_ != nullptr &&
      (total.requeued + total.failed + total.cancelled + total.extended) > 0) {
    observer_->OnLeasesReaped(total);
  }
  return total;
}

}  // namespace parity::server
