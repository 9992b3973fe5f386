// MemoryRunStore: the whole RunStore — all five interfaces (SweepCatalog, RunQueue, ReadModels,
// TelemetryRetention, AccessTokens), and GangQueue (memory_gang_queue.cc) — held in memory, for
// tests of the scheduling logic and the fuzz targets without PostgreSQL. It keeps what
// PostgresRunStore keeps and answers as it does: priorities and fair share across sweeps
// (lease_runs.sql's order), fencing epochs, idempotency keys, the request id a lease was granted to
// (a retry's lost answer is given again), retry states as the caller decides them, the events
// table's rows (every transition with its attempt, reason and worker) and a commit watermark over
// them, the results view's rows (results.view.sql), metric samples by the SQL's rule, paging
// tokens, and the same codes with the same payloads (store_errors.h). One mutex makes every call
// one transaction, so event ids are in commit order and serve as the watermark.
// tests/scheduler/store_contract_test.h and read_models_contract_test.h hold it to the same suites
// as PostgreSQL.
//
// Text columns order bytewise (PostgreSQL under the C collation); a database created with another
// collation may order names with punctuation or case differently.
//
// The clock is injected: leases expire, retries wait and workers age by `now()`, so tests move
// time instead of sleeping. Not for production: nothing is durable.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "server/store/gang_queue.h"
#include "server/store/memory/memory_leader_leases.h"
#include "server/store/run_store.h"

namespace parity::server {

// A failure class as the events table names it (no FAILURE_CLASS_ prefix); a number the enum does
// not know (the service refuses those; a direct caller may not) by its number, never a crash.
std::string FailureClassName(v1::FailureClass failure_class);

// The results view's row of one run (results.view.sql); `finished` says whether the columns a
// success writes are set (not NULL), `has_delta` whether delta_bpc_vs_dense is.
struct MemoryResultRow {
  v1::ResultRow row;
  bool finished = false;
  bool has_delta = false;
  uint32_t ordinal = 0;         // the run's place in its sweep's grid order
  std::string baseline_run_id;  // the run delta_bpc_vs_dense is against; empty = none
};

class MemoryRunStore final : public RunStore, public GangQueue {
 public:
  // `now` is read for every timestamp; absl::Now by default.
  explicit MemoryRunStore(std::function<absl::Time()> now = &absl::Now);

  // Forgets every row: the store is as new (the fuzz targets reuse one store, and the Scheduler
  // over it, for every input). No call may be in flight.
  void Reset();

  // SweepCatalog (memory_sweep_catalog.cc).
  absl::StatusOr<CreatedSweep> CreateSweep(const NewSweep& sweep) override;
  absl::StatusOr<v1::Sweep> GetSweep(const std::string& sweep_id) override;
  absl::StatusOr<Page<v1::Sweep>> ListSweeps(v1::SweepState state,
                                             const PageRequest& page) override;
  absl::StatusOr<CancelResult> CancelSweep(const std::string& sweep_id,
                                           const std::string& reason) override;
  absl::StatusOr<uint32_t> DeleteSweep(const std::string& sweep_id) override;
  absl::StatusOr<OwnerLoad> CountOwnerLoad(const std::string& owner) override;
  absl::StatusOr<v1::Run> GetRun(const std::string& run_id) override;
  absl::StatusOr<Page<v1::Run>> ListRuns(const std::string& sweep_id,
                                         const std::vector<v1::RunState>& states,
                                         const PageRequest& page) override;
  absl::StatusOr<Page<v1::Worker>> ListWorkers(const WorkersQuery& query) override;

  // RunQueue (memory_run_queue.cc).
  absl::StatusOr<v1::Worker> RegisterWorker(const WorkerRegistration& worker) override;
  absl::StatusOr<std::string> ClaimWorker(const std::string& worker_id,
                                          const std::string& owner) override;
  absl::StatusOr<std::vector<RunHolding>> RunHoldings(
      const std::string& worker_id, const std::vector<std::string>& run_ids) override;
  std::vector<absl::StatusOr<std::optional<LeasedRun>>> LeaseNextRuns(
      const std::vector<const LeaseRequest*>& requests) override;
  absl::StatusOr<HeartbeatResult> Heartbeat(const HeartbeatUpdate& update) override;
  absl::StatusOr<MetricsAppendResult> AppendMetrics(
      const std::string& run_id, int64_t lease_epoch,
      const std::vector<v1::MetricPoint>& points) override;
  std::vector<absl::StatusOr<CompletionResult>> CompleteRuns(
      const std::vector<const Completion*>& completions) override;
  absl::StatusOr<ReapResult> ReapExpiredLeases(int limit) override;
  absl::StatusOr<ServiceLiveness> RecordReaperPass(const ReaperPass& pass) override;

  // GangQueue (memory_gang_queue.cc).
  absl::StatusOr<GangWait> WaitForGang(const GangOffer& offer) override;
  absl::StatusOr<std::optional<GangGrant>> AnswerGangAgain(const std::string& worker_id,
                                                           const std::string& request_id,
                                                           absl::Duration lease_ttl) override;
  absl::Status LeaveGangPool(const std::string& worker_id) override;
  absl::StatusOr<RendezvousState> PostRendezvous(const RendezvousCall& call) override;
  absl::StatusOr<RendezvousState> CheckInRendezvous(const RendezvousCall& call) override;
  absl::StatusOr<HeartbeatResult> HeartbeatFollower(const HeartbeatUpdate& update) override;
  absl::StatusOr<std::vector<LapsedGang>> ListLapsedGangs(int limit) override;
  absl::StatusOr<v1::Run> FailGang(const GangFailure& failure) override;
  absl::StatusOr<GangCounts> CountGangs() override;

  // ReadModels (memory_read_models.cc).
  absl::StatusOr<Page<v1::ResultRow>> QueryResults(const ResultsQuery& query) override;
  absl::StatusOr<SweepEventPage> ListSweepEvents(const std::string& sweep_id,
                                                 uint64_t horizon) override;
  absl::StatusOr<Page<RunStateRow>> ListRunStates(const std::string& sweep_id,
                                                  const PageRequest& page) override;
  absl::StatusOr<std::vector<RunEvent>> ListRunEvents(const std::string& run_id,
                                                      int64_t after_event_id, int limit) override;
  absl::StatusOr<RunCounts> CountRunsByState(const RunCountsQuery& query) override;
  absl::StatusOr<std::vector<v1::MetricPoint>> ListMetrics(const std::string& run_id,
                                                           uint64_t from_step, int limit) override;
  absl::StatusOr<std::optional<v1::RunGang>> GetRunGang(const std::string& run_id) override;
  absl::StatusOr<std::vector<v1::MetricPoint>> SampleMetrics(
      const std::vector<std::string>& run_ids, const MetricSampling& sampling) override;

  // TelemetryRetention (memory_retention.cc).
  absl::StatusOr<RetentionResult> ApplyRetention(const RetentionPolicy& policy) override;
  // Upkeep under a leader's term, checked against the leases given to SetLeaderLeases (none:
  // every term is over) while they hold their lock (memory_fenced_upkeep.cc).
  absl::StatusOr<ReapResult> ReapExpiredLeasesFenced(int limit, const LeaderFence& fence) override;
  absl::StatusOr<ServiceLiveness> RecordReaperPassFenced(const ReaperPass& pass,
                                                         const LeaderFence& fence) override;
  absl::StatusOr<RetentionResult> ApplyRetentionFenced(const RetentionPolicy& policy,
                                                       const LeaderFence& fence) override;
  // The leases whose terms fence the upkeep calls above; must outlive this store.
  void SetLeaderLeases(MemoryLeaderLeases* leases) { leader_leases_ = leases; }
  // Called with the sweep id of every run event stored, as PostgreSQL's trigger
  // events_notify_sweep sends NOTIFY parity_sweep_events (a test wires it to
  // SweepsService::WakeWatchers or SweepFeeds::Wake). Called under the store's lock, so that it
  // follows the write like a notification its commit: it must be quick and must not call this
  // store. nullptr: none.
  void SetEventListener(std::function<void(const std::string& sweep_id)> listener);

  // AccessTokens (memory_access_tokens.cc).
  absl::StatusOr<StoredAccessToken> CreateToken(const NewAccessToken& token) override;
  absl::StatusOr<std::optional<StoredAccessToken>> FindToken(
      const std::string& secret_sha256) override;
  absl::StatusOr<Page<StoredAccessToken>> ListTokens(bool include_inactive,
                                                     const PageRequest& page) override;
  absl::StatusOr<uint32_t> RevokeTokens(const TokenRevocation& which) override;
  absl::StatusOr<bool> HasLiveAdmin() override;
  absl::StatusOr<std::string> GetOrCreateServerKey(const std::string& name,
                                                   const std::string& candidate) override;

 private:
  std::atomic<MemoryLeaderLeases*> leader_leases_{nullptr};
  struct TokenRow {
    StoredAccessToken token;
    std::string secret_sha256;
    uint64_t seq = 0;  // creation order, the paging key
  };
  struct SweepRow {
    std::string sweep_id;
    v1::SweepSpec spec;
    std::string spec_bytes;
    std::string owner;
    std::string idempotency_key;
    v1::SweepState state = v1::SWEEP_STATE_ACTIVE;
    uint64_t created_seq = 0;  // creation order: created_at, never equal
    absl::Time created;
    std::optional<absl::Time> ended;
    bool metrics_thinned = false;      // TelemetryRetention, once per sweep
    bool events_pruned = false;        // the same
    std::vector<std::string> run_ids;  // grid order
  };
  struct RunRow {
    v1::Run run;  // the answer, kept current; lease fields live below until rendered
    uint32_t ordinal = 0;
    int64_t lease_epoch = 0;
    std::string lease_owner;  // empty = none
    // The LeaseRequest::request_id the lease was granted to (empty = none); cleared with the
    // owner when the lease ends, as PostgreSQL's lease_request_id.
    std::string lease_request_id;
    absl::Time lease_expires;
    std::vector<uint32_t> devices;
    absl::Time not_before = absl::InfinitePast();
    uint32_t cpu_threads = 1;
    uint32_t gpus = 0;
    uint64_t memory_bytes = 0;
    uint64_t gpu_memory_bytes = 0;
    uint32_t ranks = 1;  // a gang's world size; 1 = not a gang
    // Each step's point as PostgreSQL stores it (no run id, time to the microsecond) with the
    // lease it was stored under (append_metric_arrays keeps both).
    std::map<uint64_t, std::pair<v1::MetricPoint, int64_t>> metrics;
  };
  // A row of the events table. `id` orders events by commit (one mutex) and is the watermark.
  struct EventRow {
    std::string sweep_id;
    std::string worker_id;  // the lease holder at the transition; empty = none
    RunEvent event;
  };
  struct WorkerRow {
    v1::Worker worker;  // last_seen_time rendered from `last_seen`
    absl::Time last_seen;
    std::string owner;  // the token name that registered it first; empty = none
  };

  // The gang tables (gang_waiting_workers, gang_slots, gang_rendezvous in PostgreSQL).
  struct GangWaiter {
    ResourceOffer offer;
    absl::Time until;
  };
  struct GangSlotRow {
    GangSlot slot;
    bool delivered = false;
    std::string delivered_request_id;  // the LeaseRun attempt it was delivered to
    bool checked_in = false;
    absl::Time checked_in_at{};  // the first check-in (checked_in_at in PostgreSQL)
    absl::Time expires;
  };
  struct GangRow {
    int64_t lease_epoch = 0;
    std::vector<GangSlotRow> slots;  // by rank
    std::string address;             // empty until posted
    absl::Time deadline;
    absl::Time placed;
    bool released = false;
    absl::Time released_at;  // when released (released_at in PostgreSQL)
  };

  std::string NewId() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // memory_gang_queue.cc: the asking worker's undelivered slots of a live gang, delivered now.
  std::optional<GangGrant> DeliverSlots(const std::string& worker_id, const std::string& request_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Places `run` over the pool as PlaceGang chooses; false when it does not fit.
  bool PlaceOver(RunRow& run, const GangOffer& offer) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The gang of a live run under `epoch`, or the refusal (CheckLeaseEpoch; a run not live).
  absl::StatusOr<GangRow*> LiveGang(const std::string& run_id, int64_t epoch)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  v1::Sweep RenderSweep(const SweepRow& sweep) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  v1::Run RenderRun(const RunRow& run) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Ends the sweep (SUCCEEDED, FAILED, or CANCELLED when cancelled) once no run is unfinished.
  void EndSweepIfDone(SweepRow& sweep) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<std::optional<LeasedRun>> LeaseOne(const LeaseRequest& request)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A retry's lease, answered again with its expiry renewed; nullopt when there is none to give.
  std::optional<LeasedRun> AnswerAgain(const LeaseRequest& request)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<CompletionResult> CompleteOne(const Completion& completion)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int LiveRuns(const SweepRow& sweep) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Records the run's move from `from` to its current state, at `attempt`, as the statements
  // of server/store/postgres/ insert it (the holder is the run's lease owner before the move).
  void AddEvent(const RunRow& run, v1::RunState from, uint32_t attempt, std::string reason,
                const std::string& worker_id = "") ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The results view's rows of a sweep, in grid order (memory_read_models.cc).
  std::vector<MemoryResultRow> ResultsOfSweep(const SweepRow& sweep) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);

  const std::function<absl::Time()> now_;
  mutable absl::Mutex mu_;
  std::mt19937_64 ids_ ABSL_GUARDED_BY(mu_);
  uint64_t next_seq_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, SweepRow> sweeps_ ABSL_GUARDED_BY(mu_);
  // (owner, idempotency key) → sweep id: keys are each owner's.
  std::map<std::pair<std::string, std::string>, std::string> sweep_by_key_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, RunRow> runs_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, WorkerRow> workers_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, GangWaiter> gang_pool_ ABSL_GUARDED_BY(mu_);  // by worker id
  std::map<std::string, GangRow> gangs_ ABSL_GUARDED_BY(mu_);         // by run id
  std::vector<TokenRow> tokens_ ABSL_GUARDED_BY(mu_);                 // creation order
  std::map<std::string, std::string> server_keys_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, EventRow> events_ ABSL_GUARDED_BY(mu_);  // by event id
  std::function<void(const std::string&)> event_listener_ ABSL_GUARDED_BY(mu_);
  int64_t next_event_id_ ABSL_GUARDED_BY(mu_) = 1;  // 0 is "no watermark"
  // The reaper's liveness record (reaper_liveness in PostgreSQL); nullopt before the first pass.
  std::optional<absl::Time> last_reaper_pass_ ABSL_GUARDED_BY(mu_);
  ServiceLiveness liveness_ ABSL_GUARDED_BY(mu_);
};

}  // namespace parity::server
