// What a worker token may reach: its own worker ids (bound to the token name that registered
// them first), the runs those workers held, and metric points no larger than the run's model.
// LeasesService::CheckWorkerOwner, CheckExpertLoads and CheckpointRetention; docs/access.md says
// why.
#include <optional>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "server/scheduling/leases_service.h"
#include "server/scheduling/request_validation.h"
#include "server/store/store_errors.h"

namespace parity::server {
namespace {

constexpr size_t kMaxKnownWorkerOwners = 100000;
constexpr size_t kMaxKnownModelShapes = 100000;

}  // namespace

absl::Status LeasesService::CheckWorkerOwner(const std::string& worker_id, const Caller& caller,
                                             absl::string_view action) {
  if (caller.name.empty()) return absl::OkStatus();  // the scheduler's own process
  const absl::Time now = clock_.Now();
  {
    absl::MutexLock lock(&worker_owners_mu_);
    auto it = worker_owners_.find(worker_id);
    if (it != worker_owners_.end() && now < it->second.until) {
      if (it->second.owner == caller.name) return absl::OkStatus();
      return WorkerOfAnotherIdentityError(worker_id, action);
    }
  }
  // Binds a worker no name owns yet (registered before migration 0013) to this caller.
  PARITY_ASSIGN_OR_RETURN(const std::string owner, queue_.ClaimWorker(worker_id, caller.name));
  {
    absl::MutexLock lock(&worker_owners_mu_);
    if (worker_owners_.size() >= kMaxKnownWorkerOwners) worker_owners_.clear();
    worker_owners_[worker_id] = {owner, now + options_.worker_owner_cache_ttl};
  }
  if (owner == caller.name) return absl::OkStatus();
  return WorkerOfAnotherIdentityError(worker_id, action);
}

// A point's expert loads are one entry per MoE layer, each with one share per routed expert: a
// worker sending more (2,000,000 shares in one point was once accepted, and every dashboard read
// of the run paid for it) is refused before anything is stored.
absl::Status LeasesService::CheckExpertLoads(const v1::ReportMetricsRequest& request) {
  bool any = false;
  for (const v1::MetricPoint& point : request.points()) any = any || point.expert_load_size() > 0;
  if (!any) return absl::OkStatus();
  std::optional<ModelShape> shape;
  {
    absl::MutexLock lock(&model_shapes_mu_);
    if (auto it = model_shapes_.find(request.run_id()); it != model_shapes_.end()) {
      shape = it->second;
    }
  }
  if (!shape.has_value()) {
    PARITY_ASSIGN_OR_RETURN(const v1::Run run, read_run_(request.run_id()));
    shape = ModelShape{run.spec().model().num_layers(), run.spec().model().moe().num_experts()};
    absl::MutexLock lock(&model_shapes_mu_);
    if (model_shapes_.size() >= kMaxKnownModelShapes) model_shapes_.clear();
    model_shapes_[request.run_id()] = *shape;
  }
  const uint32_t layers = shape->layers;
  const uint32_t experts = shape->experts;
  Violations violations;
  for (int i = 0; i < request.points_size() && violations.empty(); ++i) {
    const v1::MetricPoint& point = request.points(i);
    const std::string field = absl::StrCat("points[", i, "].expert_load");
    if (static_cast<uint32_t>(point.expert_load_size()) > layers || experts == 0) {
      violations.Add(field,
                     absl::StrCat(point.expert_load_size(), " layers of expert load; the run has ",
                                  layers, " layers and ", experts,
                                  " routed experts: at most one entry per MoE layer"));
      continue;
    }
    for (int j = 0; j < point.expert_load_size(); ++j) {
      const v1::ExpertLoadStats& load = point.expert_load(j);
      if (load.layer() >= layers) {
        violations.Add(
            absl::StrCat(field, "[", j, "].layer"),
            absl::StrCat(load.layer(), " is not a layer of the run (0..", layers - 1, ")"));
      }
      if (static_cast<uint32_t>(load.shares_size()) > experts) {
        violations.Add(absl::StrCat(field, "[", j, "].shares"),
                       absl::StrCat(load.shares_size(), " shares; the run has ", experts,
                                    " routed experts: at most one share per expert"));
      }
    }
  }
  return violations.ToStatus("invalid ReportMetrics request: expert loads exceed the run's model");
}

// A read per held run: a worker asks at start and every few minutes, for the runs on its disk.
// Only the runs this worker held are answered (a shared checkpoint disk may hold other workers'
// runs, which are theirs to judge); a run that no longer exists is answered `exists: false`, which
// says nothing of anyone's run.
absl::StatusOr<v1::CheckpointRetentionResponse> LeasesService::CheckpointRetention(
    const v1::CheckpointRetentionRequest& request, const Caller& caller) {
  constexpr int kMaxRuns = 1000;
  Violations violations;
  violations.RequireUuid("worker_id", request.worker_id());
  if (request.run_ids_size() > kMaxRuns) {
    violations.Add("run_ids", absl::StrCat("more than ", kMaxRuns, " runs"));
  }
  for (int i = 0; i < request.run_ids_size() && i < kMaxRuns; ++i) {
    violations.RequireUuid(absl::StrCat("run_ids[", i, "]"), request.run_ids(i));
  }
  if (absl::Status status = violations.ToStatus("invalid CheckpointRetention request");
      !status.ok()) {
    return status;
  }
  PARITY_RETURN_IF_ERROR(CheckWorkerOwner(request.worker_id(), caller, "ask retention"));
  const std::vector<std::string> run_ids(request.run_ids().begin(), request.run_ids().end());
  PARITY_ASSIGN_OR_RETURN(const std::vector<RunHolding> holdings,
                          queue_.RunHoldings(request.worker_id(), run_ids));
  size_t next = 0;  // holdings are in request order, existing runs only
  v1::CheckpointRetentionResponse response;
  for (const std::string& run_id : run_ids) {
    const bool exists = next < holdings.size() && holdings[next].run_id == run_id;
    const bool held = exists && holdings[next].held;
    if (exists) ++next;
    if (exists && !held) continue;  // not this worker's: not answered
    v1::RunRetention* retention = response.add_runs();
    retention->set_run_id(run_id);
    if (!exists) continue;  // exists = false
    absl::StatusOr<v1::Run> run = read_run_(run_id);
    if (absl::IsNotFound(run.status())) continue;  // deleted since: exists = false
    if (!run.ok()) return run.status();
    retention->set_exists(true);
    retention->set_state(run->state());
    if (run->has_checkpoint()) *retention->mutable_checkpoint() = run->checkpoint();
    retention->set_lease_epoch(run->lease().lease_epoch());
  }
  return response;
}

}  // namespace parity::server
