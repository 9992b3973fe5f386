// SweepsService: the scheduling logic behind SweepService, with no gRPC in sight — what
// researchers and dashboards ask: plan, submit, cancel and delete sweeps, get and list sweeps,
// runs and workers, query results, analyse a sweep, and watch a sweep or a run. It validates
// requests (every problem at once, as field violations), plans sweeps, pins their dataset and
// drives the watch streams, over the two store interfaces these need: SweepCatalog (sweeps, runs,
// workers) and ReadModels (results, event feeds, metric listings). The gRPC adapter
// (server/api/grpc_services.h) and the dashboard's JSON API (server/api/dashboard_api.h) only
// convert and call it. What workers drive is LeasesService's (leases_service.h).
//
// Takes the API's request/response messages (plain protobuf, no gRPC types) so adapters stay
// one line per call. Thread-safe; all durable state is in the store. Many RPC threads call at
// once, and a watch stream holds its caller's thread until it ends. The watch streams of a sweep
// share one poller per replica (SweepFeeds, sweep_feed.h), the only state kept here.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/field_violation.h"
#include "parity/v1/sweep_service.pb.h"
#include "server/scheduling/analysis_cache.h"
#include "server/scheduling/caller.h"
#include "server/scheduling/clock.h"
#include "server/scheduling/scheduler_observer.h"
#include "server/scheduling/scheduler_options.h"
#include "server/scheduling/sweep_feed.h"
#include "server/scheduling/watch_control.h"
#include "server/scheduling/work_signal.h"
#include "server/store/read_models.h"
#include "server/store/sweep_catalog.h"

namespace parity::server {

class SweepsService {
 public:
  // `catalog`, `reads`, `work_signal` (notified when a new sweep's runs wait), `clock` and
  // `observer` (may be null) must outlive the service.
  SweepsService(SweepCatalog& catalog, ReadModels& reads, WorkSignal& work_signal,
                const Clock& clock, Planner planner, SchedulerOptions options,
                SchedulerObserver* observer = nullptr);
  // Stops the watch feeds; no watch stream may still run.
  ~SweepsService();
  SweepsService(const SweepsService&) = delete;
  SweepsService& operator=(const SweepsService&) = delete;

  absl::StatusOr<v1::PlanSweepResponse> PlanSweep(const v1::PlanSweepRequest& request);
  // The sweep's owner is the caller's name (an admin may name another in request.owner);
  // PERMISSION_DENIED for a priority above options.max_priority unless the caller is admin;
  // RESOURCE_EXHAUSTED past the caller's open-sweep or queued-run limit.
  absl::StatusOr<v1::SubmitSweepResponse> SubmitSweep(const v1::SubmitSweepRequest& request,
                                                      const Caller& caller = Caller::InProcess());
  absl::StatusOr<v1::GetSweepResponse> GetSweep(const v1::GetSweepRequest& request);
  absl::StatusOr<v1::ListSweepsResponse> ListSweeps(const v1::ListSweepsRequest& request);
  // Only the sweep's owner or an admin (PERMISSION_DENIED otherwise).
  absl::StatusOr<v1::CancelSweepResponse> CancelSweep(const v1::CancelSweepRequest& request,
                                                      const Caller& caller = Caller::InProcess());
  absl::StatusOr<v1::DeleteSweepResponse> DeleteSweep(const v1::DeleteSweepRequest& request,
                                                      const Caller& caller = Caller::InProcess());
  absl::StatusOr<v1::ListRunsResponse> ListRuns(const v1::ListRunsRequest& request);
  absl::StatusOr<v1::GetRunResponse> GetRun(const v1::GetRunRequest& request);
  absl::StatusOr<v1::QueryResultsResponse> QueryResults(const v1::QueryResultsRequest& request);
  // The dense law, per-MoE-run efficiency leverage and optimal activation rates of a sweep's
  // SUCCEEDED runs (core::AnalyzeFinishedRuns; sweeps_analysis.cc), each with its interval or
  // the reason it is not given. NOT_FOUND for an unknown sweep; FAILED_PRECONDITION with a
  // PreconditionFailure (FINISHED_RUNS) when no run has finished.
  absl::StatusOr<v1::AnalyzeSweepResponse> AnalyzeSweep(const v1::AnalyzeSweepRequest& request);
  // Workers seen within seen_within_seconds (0 = 300), most recently seen first, paged.
  absl::StatusOr<v1::ListWorkersResponse> ListWorkers(const v1::ListWorkersRequest& request);
  // Streams until the sweep/run ends (OK), the control says stop (CANCELLED) or an error
  // (sweeps_watch.cc).
  // A sweep stream's writer; `more_follow`: another message is ready right behind this one, so
  // the transport may hold this one back and send both in one write (gRPC's buffer hint). The
  // snapshot of a 10,000-run sweep is 10,000 messages: one write each is most of its cost.
  using SweepStreamWriter =
      std::function<bool(const v1::WatchSweepResponse& message, bool more_follow)>;
  absl::Status WatchSweep(const v1::WatchSweepRequest& request, const WatchControl& control,
                          const SweepStreamWriter& write);
  // The same for a writer that takes one message at a time.
  absl::Status WatchSweep(const v1::WatchSweepRequest& request, const WatchControl& control,
                          const std::function<bool(const v1::WatchSweepResponse&)>& write) {
    return WatchSweep(request, control, [&write](const v1::WatchSweepResponse& message, bool) {
      return write(message);
    });
  }
  absl::Status WatchRun(const v1::WatchRunRequest& request, const WatchControl& control,
                        const std::function<bool(const v1::WatchRunResponse&)>& write);
  // A run event of `sweep_id` was stored (empty: of any sweep, e.g. after a listener
  // reconnected): its watch streams' feed polls now instead of at its next interval. Quick and
  // lock-light (sweep_feed.h): the server calls it from the LISTEN thread of
  // parity_sweep_events, the memory store from under its own lock.
  void WakeWatchers(const std::string& sweep_id);

 private:
  // PERMISSION_DENIED unless `caller` owns the sweep or is an admin; `action` names the call.
  absl::Status CheckSweepOwner(const std::string& sweep_id, const Caller& caller,
                               absl::string_view action);
  // The digest a sweep's runs are pinned to (sweeps_datasets.cc): data.dataset_digest when
  // given, else the one digest the live workers hold of data.corpus, else "" (none held; a
  // warning). INVALID_ARGUMENT on data.dataset_digest when live workers hold several.
  absl::StatusOr<std::string> PinDatasetDigest(const v1::SweepSpec& spec,
                                               std::vector<core::FieldViolation>& warnings);
  // Of the workers seen in the last 5 minutes: digest → how many hold dataset `name` so.
  absl::StatusOr<std::map<std::string, int>> LiveDatasetDigests(const std::string& name);
  // The analysis of the sweep's SUCCEEDED runs, computed (AnalyzeSweep's cache misses).
  absl::StatusOr<v1::AnalyzeSweepResponse> ComputeAnalysis(const v1::AnalyzeSweepRequest& request);

  SweepCatalog& catalog_;
  ReadModels& reads_;
  WorkSignal& work_signal_;
  const Clock& clock_;
  const Planner planner_;
  const SchedulerOptions options_;
  SchedulerObserver* const observer_;  // may be null
  // AnalyzeSweep's answers per version of the sweep's finished runs (sweeps_analysis.cc).
  const std::unique_ptr<AnalysisCache> analyses_;
  // The watch streams' shared pollers. Last: stopped before anything they read goes.
  const std::unique_ptr<SweepFeeds> feeds_;
};

}  // namespace parity::server
