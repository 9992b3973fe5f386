// LeasesService: the scheduling logic behind WorkerService, with no gRPC in sight — what workers
// drive: register, lease runs (a long poll), heartbeat, report metrics, complete, and ask which
// checkpoints they may delete. It validates requests (every problem at once, as field
// violations), binds worker ids to the identity that registered them, signs and checks lease
// secrets (LeaseSecrets), batches leases and completions (RequestCombiner), parks long polls
// (LeaseLongPolls) and decides what a failed attempt does (retry_policy.h), over the lease queue
// (RunQueue) and one read of a run by id. The reaper is Upkeep's (upkeep.h); what researchers
// ask is SweepsService's (sweeps_service.h).
//
// Thread-safe: all durable state is in the store (the two RequestCombiners and LeaseLongPolls
// only hold calls in flight, each with a thread; two bounded caches hold facts that never change
// while they are cached). LeaseRun and CompleteRun answer through callbacks so that gRPC's
// callback handlers hold no thread while a call waits for its batch or for work.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "parity/v1/worker_service.pb.h"
#include "server/scheduling/caller.h"
#include "server/scheduling/clock.h"
#include "server/scheduling/lease_long_polls.h"
#include "server/scheduling/lease_secrets.h"
#include "server/scheduling/request_combiner.h"
#include "server/scheduling/scheduler_observer.h"
#include "server/scheduling/scheduler_options.h"
#include "server/scheduling/watch_control.h"
#include "server/scheduling/work_signal.h"
#include "server/store/gang_queue.h"
#include "server/store/run_queue.h"

namespace parity::server {

// A run by id (SweepCatalog::GetRun in the server): what a failed attempt's retry decision, a
// metrics batch's expert-load bounds and a checkpoint-retention answer need of the run.
using RunReader = std::function<absl::StatusOr<v1::Run>(const std::string& run_id)>;

class LeasesService {
 public:
  // `queue`, `secrets`, `work_signal`, `clock` and `observer` (may be null) must outlive the
  // service; `read_run` is called on RPC and batch threads.
  // `gangs` (may be null: no gang is ever placed, the rendezvous RPCs are UNIMPLEMENTED) must
  // outlive the service too.
  LeasesService(RunQueue& queue, RunReader read_run, LeaseSecrets& secrets, WorkSignal& work_signal,
                const Clock& clock, SchedulerOptions options, SchedulerObserver* observer = nullptr,
                GangQueue* gangs = nullptr);
  // Answers every call in flight (parked long polls empty) before it returns.
  ~LeasesService();

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
  // Answers only about runs this worker held (leases_workers.cc): a run it never held is left
  // out of the response; one that no longer exists is answered `exists: false`.
  absl::StatusOr<v1::CheckpointRetentionResponse> CheckpointRetention(
      const v1::CheckpointRetentionRequest& request, const Caller& caller = Caller::InProcess());
  absl::StatusOr<v1::ReportMetricsResponse> ReportMetrics(
      const v1::ReportMetricsRequest& request, const Caller& caller = Caller::InProcess());
  // Records success or failure in the next completion batch; `done` as for LeaseRun.
  void CompleteRun(const v1::CompleteRunRequest& request,
                   absl::AnyInvocable<void(absl::StatusOr<v1::CompleteRunResponse>)> done,
                   const Caller& caller = Caller::InProcess());
  absl::StatusOr<v1::CompleteRunResponse> CompleteRun(const v1::CompleteRunRequest& request,
                                                      const Caller& caller = Caller::InProcess());

  // Gangs (leases_gangs.cc; docs/architecture.md "Gangs"). Rank 0's worker posts the rendezvous
  // address; each rank's worker checks in and gets it once every rank has.
  absl::StatusOr<v1::RendezvousResponse> PostRendezvous(const v1::PostRendezvousRequest& request,
                                                        const Caller& caller = Caller::InProcess());
  absl::StatusOr<v1::RendezvousResponse> CheckInRendezvous(
      const v1::CheckInRendezvousRequest& request, const Caller& caller = Caller::InProcess());
  // The upkeep's pass (the reaper thread, after the reap): gangs whose rendezvous timed out
  // (requeued as a preemption is, recorded INFRASTRUCTURE) or whose follower stopped
  // heartbeating (attempt + 1, recorded LEASE_EXPIRED) restart whole. Returns how many.
  absl::StatusOr<int> FailLapsedGangs();

 private:
  // PERMISSION_DENIED unless the worker id is the caller's (the in-process caller: any); NOT_FOUND
  // for an unknown worker. `action` names the call. Owners are cached (worker_owner_cache_ttl).
  absl::Status CheckWorkerOwner(const std::string& worker_id, const Caller& caller,
                                absl::string_view action);
  // INVALID_ARGUMENT naming the field when a point's expert loads exceed the run's shape (more
  // layers than L, a layer index ≥ L, more shares than E). The run's shape is read once per run.
  absl::Status CheckExpertLoads(const v1::ReportMetricsRequest& request);
  // One try of a LeaseRun in the next lease batch; parks it if it found nothing and may wait.
  void TryLease(std::unique_ptr<PendingLease> lease);
  // One completion batch to the store, each failure with its retry decision made here first.
  std::vector<absl::StatusOr<CompletionResult>> CompleteBatch(
      const std::vector<const Completion*>& batch);
  // leases_gangs.cc. Whether parked calls should try the gang pool: a gang pending or slots not
  // yet collected (counts read at most once per idle_poll_interval).
  bool GangsActive();
  // After a placement: the counts read afresh; whether more gangs wait (eligible now).
  bool GangsWaitingAfterPlacement();
  // A parked call's gang try: true when it consumed the call (answered it with its slots, or
  // parked it again because a starving gang reserves its worker).
  bool TryGang(std::unique_ptr<PendingLease>& lease);
  // `again`: a retry's lost answer given again (counted when it was first given).
  void AnswerGang(std::unique_ptr<PendingLease> lease, const GangGrant& grant, bool again = false);
  // A retry whose lost answer was a gang's slots: answered again (true), else false.
  bool AnswerGangAgain(std::unique_ptr<PendingLease>& lease);
  // A pool worker got an ordinary run: out of the pool, and a gang placed on it meanwhile is
  // given back (requeued, nothing charged).
  void LeaveGangPool(const LeaseRequest& request);
  GangOffer GangOfferOf(const LeaseRequest& request, bool leaving) const;
  // A failed attempt of a gang run, decided: the whole gang restarts (or ends).
  absl::StatusOr<CompletionResult> FailGang(const Completion& decided);
  absl::StatusOr<v1::RendezvousResponse> RendezvousAnswer(
      absl::StatusOr<RendezvousState> state) const;
  // Fails, as INVALID_RESULT, a success the store refused for disagreeing with the plan.
  absl::StatusOr<CompletionResult> FailInvalidSuccess(const Completion& success,
                                                      const std::string& why);

  RunQueue& queue_;
  const RunReader read_run_;
  LeaseSecrets& secrets_;
  WorkSignal& work_signal_;
  const Clock& clock_;
  const SchedulerOptions options_;
  SchedulerObserver* const observer_;  // may be null
  GangQueue* const gangs_;             // may be null
  absl::Mutex gang_counts_mu_;
  GangCounts gang_counts_ ABSL_GUARDED_BY(gang_counts_mu_);
  absl::Time gang_counts_read_ ABSL_GUARDED_BY(gang_counts_mu_) = absl::InfinitePast();
  uint64_t gang_counts_generation_ ABSL_GUARDED_BY(gang_counts_mu_) = 0;  // WorkSignal's then
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
  // Before the combiners, so it outlives them: a batch's callback may park a call.
  LeaseLongPolls long_polls_;
  RequestCombiner<LeaseRequest, absl::StatusOr<std::optional<LeasedRun>>> leases_;
  RequestCombiner<Completion, absl::StatusOr<CompletionResult>> completions_;
};

}  // namespace parity::server
