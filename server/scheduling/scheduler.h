// Scheduler: the scheduling logic behind SweepService and WorkerService, with no gRPC in sight.
// It validates requests (every problem at once, as field violations), plans sweeps, runs the
// LeaseRun long poll, reaps expired leases and drives the watch streams, all through a RunStore.
// The gRPC adapters (server/api/grpc_services.h) only convert and call it.
//
// Takes the API's request/response messages (plain protobuf, no gRPC types) so adapters stay
// one line per call. Thread-safe: all durable state is in the store (the two RequestCombiners
// and LeaseLongPolls only hold calls in flight, each with a thread); many RPC threads call at
// once. LeaseRun and CompleteRun answer through callbacks so that gRPC's callback handlers hold
// no thread while a call waits for its batch or for work.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/field_violation.h"
#include "parity/v1/sweep_service.pb.h"
#include "parity/v1/worker_service.pb.h"
#include "server/scheduling/caller.h"
#include "server/scheduling/clock.h"
#include "server/scheduling/lease_long_polls.h"
#include "server/scheduling/request_combiner.h"
#include "server/scheduling/retry_policy.h"
#include "server/scheduling/work_signal.h"
#include "server/store/run_store.h"

namespace parity::server {

class Violations;  // request_validation.h

struct SchedulerOptions {
  absl::Duration lease_ttl = absl::Seconds(60);
  absl::Duration heartbeat_interval = absl::Seconds(15);
  // LeaseRun waits at most this long for work, whatever the worker asks.
  absl::Duration max_lease_wait = absl::Seconds(60);
  // Idle long polls look for work this often even without a wake-up (a missed NOTIFY, a retry
  // delay running out).
  absl::Duration idle_poll_interval = absl::Seconds(1);
  // Watch streams poll the database this often, and end UNAVAILABLE ("reconnect") after this
  // long: a server-side deadline, so that no stream holds a thread and a watch slot for ever.
  absl::Duration watch_poll_interval = absl::Milliseconds(200);
  absl::Duration max_watch_duration = absl::Hours(1);
  // Watch streams ask WatchControl::authorized this often, so that a stream whose token was
  // revoked (or expired) ends UNAUTHENTICATED within about this long, not at its lifetime.
  absl::Duration watch_reauth_interval = absl::Seconds(2);
  // How long a worker id's owner (the token name that registered it) is remembered here: the
  // ownership never changes while the worker is known, so this only bounds how long a worker
  // that telemetry retention forgot stays bound to its old name in this replica.
  absl::Duration worker_owner_cache_ttl = absl::Seconds(60);
  uint32_t max_metrics_batch = 4096;
  // LeaseRun and successful CompleteRun calls that arrive together reach the store as one batch
  // (RequestCombiner) of at most this many, with at most `store_batches_in_flight` batches of
  // each kind running at once. One: two lease batches at once contend for the same first runs
  // of the same sweeps (measured slower, with a p99 half again as long, on 2 cores).
  size_t max_store_batch = 64;
  int store_batches_in_flight = 1;
  uint32_t max_runs_per_sweep = 10000;
  // Limits per identity (Caller::name), checked at each submission: sweeps it owns that are
  // still ACTIVE, and their runs not yet ended. Admins are held to them too.
  uint32_t max_open_sweeps_per_owner = 100;
  uint64_t max_queued_runs_per_owner = 50000;
  // The highest SweepSpec.priority a non-admin may submit.
  int32_t max_priority = 100;
  int reap_batch = 500;
  // What a failed attempt does to its run (retry_policy.h).
  RetryPolicy retry_policy;
};

// Plans a spec into runs; parity::core::PlanSweep in production, a stub in tests.
using Planner = std::function<absl::StatusOr<std::vector<v1::RunSpec>>(const v1::SweepSpec&)>;

// A seam for metrics and dashboards (SchedulerMetrics): told what happened, never asked anything.
// Called on RPC threads, concurrently; implementations must be thread-safe and quick.
class SchedulerObserver {
 public:
  virtual ~SchedulerObserver() = default;
  virtual void OnSweepSubmitted(const v1::Sweep& sweep, bool deduplicated) {}
  virtual void OnRunLeased(const v1::Run& run, absl::Duration waited) {}
  virtual void OnMetricsStored(const MetricsAppendResult& result) {}
  virtual void OnRunCompleted(const v1::Run& run) {}
  virtual void OnLeasesReaped(const ReapResult& result) {}
  // A reaper pass failed (the database was away); expired leases wait for the next pass.
  virtual void OnReapFailed(const absl::Status& status) {}
  virtual void OnRetentionApplied(const RetentionResult& result) {}
};

// How a streaming call is told to stop, and how it hands messages back.
struct WatchControl {
  WatchControl() = default;
  // Implicit, so that `{cancelled}` reads as before `authorized` was added.
  WatchControl(std::function<bool()> cancelled,  // NOLINT(google-explicit-constructor)
               std::function<absl::Status()> authorized = nullptr)
      : cancelled(std::move(cancelled)), authorized(std::move(authorized)) {}

  std::function<bool()> cancelled;  // the client went away or the server is stopping
  // Whether the caller may still watch (its token not revoked or expired): asked every
  // SchedulerOptions::watch_reauth_interval; an error ends the stream with it. Null: never asked.
  std::function<absl::Status()> authorized;
};

class Scheduler {
 public:
  // `store`, `work_signal`, `clock` and `observer` must outlive the scheduler.
  Scheduler(RunStore& store, WorkSignal& work_signal, const Clock& clock, Planner planner,
            SchedulerOptions options, SchedulerObserver* observer = nullptr);
  // Answers every call in flight (parked long polls empty) before it returns.
  ~Scheduler();

  const SchedulerOptions& options() const { return options_; }

  // --- SweepService ---
  absl::StatusOr<v1::PlanSweepResponse> PlanSweep(const v1::PlanSweepRequest& request);
  // The sweep's owner is the caller's name (an admin may name another in request.owner);
  // PERMISSION_DENIED for a priority above options().max_priority unless the caller is admin;
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
  // SUCCEEDED runs (core::AnalyzeFinishedRuns; scheduler_analysis.cc), each with its interval or
  // the reason it is not given. NOT_FOUND for an unknown sweep; FAILED_PRECONDITION with a
  // PreconditionFailure (FINISHED_RUNS) when no run has finished.
  absl::StatusOr<v1::AnalyzeSweepResponse> AnalyzeSweep(const v1::AnalyzeSweepRequest& request);
  // Workers seen within seen_within_seconds (0 = 300), most recently seen first, paged.
  absl::StatusOr<v1::ListWorkersResponse> ListWorkers(const v1::ListWorkersRequest& request);
  // Streams until the sweep/run ends (OK), the control says stop (CANCELLED) or an error.
  absl::Status WatchSweep(const v1::WatchSweepRequest& request, const WatchControl& control,
                          const std::function<bool(const v1::WatchSweepResponse&)>& write);
  absl::Status WatchRun(const v1::WatchRunRequest& request, const WatchControl& control,
                        const std::function<bool(const v1::WatchRunResponse&)>& write);

  // --- WorkerService ---
  // A lease comes with a lease secret bound to the run, the epoch and the caller's name; every
  // write about the run (Heartbeat, ReportMetrics, CompleteRun) must carry it and come from the
  // same name, or it is refused with PERMISSION_DENIED and changes nothing.
  //
  // A worker id belongs to the name that registered it first (RunQueue::ClaimWorker):
  // RegisterWorker, LeaseRun, Heartbeat and CheckpointRetention under an id of another name are
  // PERMISSION_DENIED and change nothing, admins included (an admin's leases would be bound to
  // its own name, which the real worker cannot write under). The in-process caller (no name) is
  // the scheduler's own process and is not checked.
  absl::StatusOr<v1::RegisterWorkerResponse> RegisterWorker(
      const v1::RegisterWorkerRequest& request, const Caller& caller = Caller::InProcess());
  // Long poll until work, wait_time, `call_deadline` (minus a margin to answer) or cancellation.
  // `done` is called exactly once: on a scheduler thread, or at once on this one for an invalid
  // request. No thread waits meanwhile: the call rides a lease batch, then, if it found nothing
  // and may wait, is parked in LeaseLongPolls until work may have appeared.
  void LeaseRun(const v1::LeaseRunRequest& request, absl::Time call_deadline, WatchControl control,
                absl::AnyInvocable<void(absl::StatusOr<v1::LeaseRunResponse>)> done,
                const Caller& caller = Caller::InProcess());
  // The same, blocking until the answer.
  absl::StatusOr<v1::LeaseRunResponse> LeaseRun(const v1::LeaseRunRequest& request,
                                                absl::Time call_deadline,
                                                const WatchControl& control,
                                                const Caller& caller = Caller::InProcess());
  absl::StatusOr<v1::HeartbeatResponse> Heartbeat(const v1::HeartbeatRequest& request,
                                                  const Caller& caller = Caller::InProcess());
  // Answers only about runs this worker held (scheduler_workers.cc): a run it never held is left
  // out of the response; one that no longer exists is answered `exists: false`.
  absl::StatusOr<v1::CheckpointRetentionResponse> CheckpointRetention(
      const v1::CheckpointRetentionRequest& request, const Caller& caller = Caller::InProcess());
  // One telemetry retention pass (store/telemetry_retention.h); the server runs it periodically.
  // With a fence (the elected leader's term, server/leadership/), refused once the term is over.
  absl::StatusOr<RetentionResult> ApplyRetention(
      const RetentionPolicy& policy, const std::optional<LeaderFence>& fence = std::nullopt);
  absl::StatusOr<v1::ReportMetricsResponse> ReportMetrics(
      const v1::ReportMetricsRequest& request, const Caller& caller = Caller::InProcess());
  // Records success or failure in the next completion batch; `done` as for LeaseRun.
  void CompleteRun(const v1::CompleteRunRequest& request,
                   absl::AnyInvocable<void(absl::StatusOr<v1::CompleteRunResponse>)> done,
                   const Caller& caller = Caller::InProcess());
  absl::StatusOr<v1::CompleteRunResponse> CompleteRun(const v1::CompleteRunRequest& request,
                                                      const Caller& caller = Caller::InProcess());

  // --- housekeeping ---
  // Returns expired leases to the queue until none is left (called by the reaper thread). The
  // first pass after the scheduler starts, and the first after a pass failed (the database was
  // away), first extends every live lease by one TTL: their holders could not heartbeat through
  // the outage, which is no sign that they died.
  // With a fence, every write is checked against the leader's term (LeaderEpochError when over).
  absl::StatusOr<ReapResult> ReapExpiredLeases(
      const std::optional<LeaderFence>& fence = std::nullopt);

 private:
  // The key lease secrets are signed with: loaded from (or first stored in) the store once.
  absl::StatusOr<std::string> LeaseKey();
  // Signs and checks the proof of holding a lease (epoch `epoch` of `run_id`, held by `holder`).
  std::string LeaseSecret(const std::string& key, const std::string& run_id, int64_t epoch,
                          const std::string& holder) const;
  absl::Status CheckLeaseSecret(const std::string& run_id, int64_t epoch, const std::string& secret,
                                const Caller& caller);
  // PERMISSION_DENIED unless the worker id is the caller's (the in-process caller: any); NOT_FOUND
  // for an unknown worker. `action` names the call. Owners are cached (worker_owner_cache_ttl).
  absl::Status CheckWorkerOwner(const std::string& worker_id, const Caller& caller,
                                absl::string_view action);
  // INVALID_ARGUMENT naming the field when a point's expert loads exceed the run's shape (more
  // layers than L, a layer index ≥ L, more shares than E). The run's shape is read once per run.
  absl::Status CheckExpertLoads(const v1::ReportMetricsRequest& request);
  // PERMISSION_DENIED unless `caller` owns the sweep or is an admin; `action` names the call.
  absl::Status CheckSweepOwner(const std::string& sweep_id, const Caller& caller,
                               absl::string_view action);
  // One try of a LeaseRun in the next lease batch; parks it if it found nothing and may wait.
  void TryLease(std::unique_ptr<PendingLease> lease);
  // One completion batch to the store, each failure with its retry decision made here first.
  std::vector<absl::StatusOr<CompletionResult>> CompleteBatch(
      const std::vector<const Completion*>& batch);
  // The digest a sweep's runs are pinned to (scheduler_datasets.cc): data.dataset_digest when
  // given, else the one digest the live workers hold of data.corpus, else "" (none held; a
  // warning). INVALID_ARGUMENT on data.dataset_digest when live workers hold several.
  absl::StatusOr<std::string> PinDatasetDigest(const v1::SweepSpec& spec,
                                               std::vector<core::FieldViolation>& warnings);
  // Of the workers seen in the last 5 minutes: digest → how many hold dataset `name` so.
  absl::StatusOr<std::map<std::string, int>> LiveDatasetDigests(const std::string& name);
  // RegisterWorkerRequest.datasets: at most 1000, plain names, 64-hex digests.
  static void CheckDatasetHoldings(
      Violations& violations,
      const google::protobuf::RepeatedPtrField<v1::DatasetHolding>& datasets);
  // Fails, as INVALID_RESULT, a success the store refused for disagreeing with the plan.
  absl::StatusOr<CompletionResult> FailInvalidSuccess(const Completion& success,
                                                      const std::string& why);

  RunStore& store_;
  WorkSignal& work_signal_;
  const Clock& clock_;
  const Planner planner_;
  const SchedulerOptions options_;
  // Set until a reaper pass has extended the live leases after a start or an outage.
  std::atomic<bool> leases_need_grace_{true};
  SchedulerObserver* const observer_;  // may be null
  struct KnownOwner {
    std::string owner;
    absl::Time until;
  };
  absl::Mutex worker_owners_mu_;
  // worker id → its owner, bounded (cleared past 100,000 entries).
  std::map<std::string, KnownOwner> worker_owners_ ABSL_GUARDED_BY(worker_owners_mu_);
  struct ModelShape {
    uint32_t layers = 0;
    uint32_t experts = 0;
  };
  absl::Mutex model_shapes_mu_;
  // run id → its model's L and E, for CheckExpertLoads: a run's spec never changes, so a batch
  // with expert loads costs a store read only the first time (bounded: cleared past 100,000).
  std::map<std::string, ModelShape> model_shapes_ ABSL_GUARDED_BY(model_shapes_mu_);
  absl::Mutex lease_key_mu_;
  std::string lease_key_ ABSL_GUARDED_BY(lease_key_mu_);  // empty until loaded
  // Before the combiners, so it outlives them: a batch's callback may park a call.
  LeaseLongPolls long_polls_;
  RequestCombiner<LeaseRequest, absl::StatusOr<std::optional<LeasedRun>>> leases_;
  RequestCombiner<Completion, absl::StatusOr<CompletionResult>> completions_;
};

}  // namespace parity::server
