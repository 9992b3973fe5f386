#include "server/scheduling/sweeps_service.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/planner_warnings.h"
#include "core/status_macros.h"
#include "server/scheduling/request_validation.h"

namespace parity::server {

SweepsService::SweepsService(SweepCatalog& catalog, ReadModels& reads, WorkSignal& work_signal,
                             const Clock& clock, Planner planner, SchedulerOptions options,
                             SchedulerObserver* observer)
    : catalog_(catalog),
      reads_(reads),
      work_signal_(work_signal),
      clock_(clock),
      planner_(std::move(planner)),
      options_(std::move(options)),
      observer_(observer),
      analyses_(std::make_unique<AnalysisCache>(options_.analysis_cache_entries)),
      feeds_(std::make_unique<SweepFeeds>(
          catalog, reads, clock,
          SweepFeedOptions{
              .poll_interval = options_.watch_poll_interval,
              .min_poll_gap = options_.watch_poll_interval / 4,
              .buffer_messages = options_.watch_buffer_messages,
              .linger = options_.watch_feed_linger,
              .give_up_after = std::max(options_.watch_poll_interval * 50, absl::Seconds(10))})) {}

SweepsService::~SweepsService() = default;

void SweepsService::WakeWatchers(const std::string& sweep_id) { feeds_->Wake(sweep_id); }

absl::StatusOr<v1::PlanSweepResponse> SweepsService::PlanSweep(
    const v1::PlanSweepRequest& request) {
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

absl::StatusOr<v1::SubmitSweepResponse> SweepsService::SubmitSweep(
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
  PARITY_ASSIGN_OR_RETURN(const OwnerLoad load, catalog_.CountOwnerLoad(sweep.owner));
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
  PARITY_ASSIGN_OR_RETURN(CreatedSweep created, catalog_.CreateSweep(sweep));
  if (!created.deduplicated) work_signal_.Notify();
  if (observer_ != nullptr) observer_->OnSweepSubmitted(created.sweep, created.deduplicated);
  v1::SubmitSweepResponse response;
  *response.mutable_sweep() = std::move(created.sweep);
  for (std::string& id : created.run_ids) response.add_run_ids(std::move(id));
  response.set_deduplicated(created.deduplicated);
  *response.mutable_warnings() = plan.warnings();
  return response;
}

absl::StatusOr<v1::GetSweepResponse> SweepsService::GetSweep(const v1::GetSweepRequest& request) {
  Violations violations;
  violations.RequireUuid("sweep_id", request.sweep_id());
  if (absl::Status status = violations.ToStatus("invalid GetSweep request"); !status.ok()) {
    return status;
  }
  PARITY_ASSIGN_OR_RETURN(v1::Sweep sweep, catalog_.GetSweep(request.sweep_id()));
  v1::GetSweepResponse response;
  *response.mutable_sweep() = std::move(sweep);
  return response;
}

absl::StatusOr<v1::ListSweepsResponse> SweepsService::ListSweeps(
    const v1::ListSweepsRequest& request) {
  Violations violations;
  PageRequest page{violations.PageSize("page_size", request.page_size(), 100, 1000),
                   request.page_token()};
  if (absl::Status status = violations.ToStatus("invalid ListSweeps request"); !status.ok()) {
    return status;
  }
  PARITY_ASSIGN_OR_RETURN(Page<v1::Sweep> sweeps, catalog_.ListSweeps(request.state(), page));
  v1::ListSweepsResponse response;
  for (v1::Sweep& sweep : sweeps.items) *response.add_sweeps() = std::move(sweep);
  response.set_next_page_token(sweeps.next_page_token);
  return response;
}

absl::Status SweepsService::CheckSweepOwner(const std::string& sweep_id, const Caller& caller,
                                            absl::string_view action) {
  if (caller.admin) return absl::OkStatus();
  PARITY_ASSIGN_OR_RETURN(const v1::Sweep sweep, catalog_.GetSweep(sweep_id));
  if (sweep.owner() == caller.name) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat("sweep ", sweep_id, " is '", sweep.owner(),
                                                  "''s: only its owner or an admin may ", action,
                                                  " it"));
}

absl::StatusOr<v1::CancelSweepResponse> SweepsService::CancelSweep(
    const v1::CancelSweepRequest& request, const Caller& caller) {
  Violations violations;
  violations.RequireUuid("sweep_id", request.sweep_id());
  if (request.reason().size() > 1024) violations.Add("reason", "longer than 1024 characters");
  if (absl::Status status = violations.ToStatus("invalid CancelSweep request"); !status.ok()) {
    return status;
  }
  PARITY_RETURN_IF_ERROR(CheckSweepOwner(request.sweep_id(), caller, "cancel"));
  PARITY_ASSIGN_OR_RETURN(CancelResult cancelled,
                          catalog_.CancelSweep(request.sweep_id(), request.reason()));
  v1::CancelSweepResponse response;
  *response.mutable_sweep() = std::move(cancelled.sweep);
  response.set_cancelled_runs(cancelled.cancelled_runs);
  return response;
}

absl::StatusOr<v1::DeleteSweepResponse> SweepsService::DeleteSweep(
    const v1::DeleteSweepRequest& request, const Caller& caller) {
  Violations violations;
  violations.RequireUuid("sweep_id", request.sweep_id());
  if (absl::Status status = violations.ToStatus("invalid DeleteSweep request"); !status.ok()) {
    return status;
  }
  PARITY_RETURN_IF_ERROR(CheckSweepOwner(request.sweep_id(), caller, "delete"));
  PARITY_ASSIGN_OR_RETURN(const uint32_t deleted, catalog_.DeleteSweep(request.sweep_id()));
  v1::DeleteSweepResponse response;
  response.set_deleted_runs(deleted);
  return response;
}

absl::StatusOr<v1::ListRunsResponse> SweepsService::ListRuns(const v1::ListRunsRequest& request) {
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
  PARITY_ASSIGN_OR_RETURN(Page<v1::Run> runs, catalog_.ListRuns(request.sweep_id(), states, page));
  v1::ListRunsResponse response;
  for (v1::Run& run : runs.items) *response.add_runs() = std::move(run);
  response.set_next_page_token(runs.next_page_token);
  return response;
}

absl::StatusOr<v1::GetRunResponse> SweepsService::GetRun(const v1::GetRunRequest& request) {
  Violations violations;
  violations.RequireUuid("run_id", request.run_id());
  if (absl::Status status = violations.ToStatus("invalid GetRun request"); !status.ok()) {
    return status;
  }
  PARITY_ASSIGN_OR_RETURN(v1::Run run, catalog_.GetRun(request.run_id()));
  v1::GetRunResponse response;
  // Only a gang has a placement to read: a run of one rank costs no second query.
  if (run.spec().resources().ranks() > 1) {
    PARITY_ASSIGN_OR_RETURN(std::optional<v1::RunGang> gang, reads_.GetRunGang(run.run_id()));
    if (gang) *response.mutable_gang() = std::move(*gang);
  }
  *response.mutable_run() = std::move(run);
  return response;
}

absl::StatusOr<v1::QueryResultsResponse> SweepsService::QueryResults(
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
  PARITY_ASSIGN_OR_RETURN(Page<v1::ResultRow> rows, reads_.QueryResults(query));
  if (!query.sweep_id.empty() && query.page.page_token.empty() && rows.items.empty()) {
    // No row for a named sweep: an empty answer only when the sweep exists (its runs filtered
    // out); one that does not, or no longer, is NOT_FOUND like every other call naming it.
    PARITY_RETURN_IF_ERROR(catalog_.GetSweep(query.sweep_id).status());
  }
  v1::QueryResultsResponse response;
  for (v1::ResultRow& row : rows.items) *response.add_rows() = std::move(row);
  response.set_next_page_token(rows.next_page_token);
  return response;
}

absl::StatusOr<v1::ListWorkersResponse> SweepsService::ListWorkers(
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
  PARITY_ASSIGN_OR_RETURN(Page<v1::Worker> workers, catalog_.ListWorkers(query));
  v1::ListWorkersResponse response;
  for (v1::Worker& worker : workers.items) *response.add_workers() = std::move(worker);
  response.set_next_page_token(workers.next_page_token);
  return response;
}

}  // namespace parity::server
