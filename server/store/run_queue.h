// RunQueue: the lease queue, what workers drive: register, lease, heartbeat, report metrics,
// complete, and the reaper's return of expired leases. Fencing: each lease bumps the run's
// lease_epoch, and every later call of that lease must carry it (stale: FAILED_PRECONDITION with a
// PreconditionFailure of type LEASE_EPOCH, nothing written). See run_store.h for the errors.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "google/rpc/status.pb.h"
#include "parity/v1/run.pb.h"
#include "parity/v1/worker.pb.h"
#include "server/store/leader_leases.h"

namespace parity::server {

struct WorkerRegistration {
  std::string worker_id;  // empty = assign a new id
  // The token name registering it. A worker id belongs to the name that registered it first: a
  // registration of an id owned by another name is PERMISSION_DENIED, nothing changed. Empty (the
  // scheduler's own process) claims nothing and may re-register any id.
  std::string owner;
  std::string hostname;
  std::vector<v1::Device> devices;
  std::vector<std::pair<std::string, std::string>> labels;
  std::string version;
  // The datasets it verified at start; ListWorkers returns them (SubmitSweep pins digests).
  std::vector<v1::DatasetHolding> datasets;
};

// What a worker can take now, reduced from its free devices.
struct ResourceOffer {
  uint32_t cpu_threads = 0;
  uint64_t host_memory_bytes = 0;  // 0 = unknown (no limit)
  struct Gpu {
    uint32_t index = 0;
    uint64_t memory_bytes = 0;  // 0 = unknown (no limit)
  };
  std::vector<Gpu> gpus;
  uint32_t cpu_device_index = 0;
};

// The offer's GPUs, largest free memory first (unknown memory counts as unlimited; ties by
// index): a run needing g GPUs fits when the g-th of them is big enough. Both stores group and
// match offers in this order (server/sql/lease_runs.sql receives it as an array).
inline std::vector<ResourceOffer::Gpu> GpusLargestFirst(const ResourceOffer& offer) {
  std::vector<ResourceOffer::Gpu> gpus = offer.gpus;
  auto memory = [](const ResourceOffer::Gpu& gpu) {
    return gpu.memory_bytes == 0 ? std::numeric_limits<uint64_t>::max() : gpu.memory_bytes;
  };
  std::stable_sort(gpus.begin(), gpus.end(), [&](const auto& a, const auto& b) {
    return memory(a) == memory(b) ? a.index < b.index : memory(a) > memory(b);
  });
  return gpus;
}

struct LeaseRequest {
  std::string worker_id;
  ResourceOffer offer;
  absl::Duration ttl;
  // The caller's id of this attempt, recorded with the lease it gets; empty = none.
  std::string request_id;
  // The attempt repeats one with the same request_id whose answer was lost: a run this worker
  // holds LEASED (never heartbeated) under that id, lease unexpired, is answered again (same
  // epoch, expiry renewed to now + ttl) and nothing new is leased. Otherwise a lease as usual.
  bool retry = false;
};

struct LeasedRun {
  v1::Lease lease;
  v1::Run run;
  // A retry's lease answered again (LeaseRequest::retry), not a new one: no event was written.
  bool answered_again = false;
};

struct HeartbeatUpdate {
  std::string worker_id;
  std::string run_id;
  int64_t lease_epoch = 0;
  uint64_t step = 0;
  std::optional<v1::Checkpoint> checkpoint;
  absl::Duration ttl;
};

struct HeartbeatResult {
  absl::Time expire_time;
  bool cancel_requested = false;
};

struct MetricsAppendResult {
  uint32_t accepted = 0;
  uint32_t duplicates = 0;
};

// What a failed attempt does to its run. The scheduling logic decides it
// (server/scheduling/retry_policy.h) from the run's attempt and max_attempts; the store applies it.
struct RetryDecision {
  v1::RunState next_state = v1::RUN_STATE_FAILED;  // PENDING (retry) or FAILED
  uint32_t next_attempt = 0;
  absl::Duration delay = absl::ZeroDuration();  // before the run may be leased again
  uint32_t next_preemptions = 0;                // the run's preemptions after this failure
};

struct Completion {
  std::string run_id;
  int64_t lease_epoch = 0;
  std::optional<v1::RunSummary> success;  // set: SUCCEEDED; else failure_* apply
  v1::FailureClass failure_class = v1::FAILURE_CLASS_UNSPECIFIED;
  google::rpc::Status failure_status;
  std::optional<v1::Checkpoint> checkpoint;
  // Failures only: what to do, decided for the run at attempt `decided_at_attempt`. A live run of
  // the same epoch cannot be at another attempt; if it is, the completion is ABORTED (decide
  // again). A cancellation requested meanwhile still wins: the run ends CANCELLED.
  RetryDecision retry;
  uint32_t decided_at_attempt = 0;
};

struct CompletionResult {
  v1::Run run;
  absl::Duration retry_delay = absl::ZeroDuration();  // > 0 when requeued with a delay
  // A success whose summary disagrees with the run's plan (core::SummaryMismatch): why. Nothing
  // was written; the run is as it was, still leased, for the scheduler to fail as INVALID_RESULT.
  std::string invalid_summary;
};

// An existing run, and whether the asking worker ever held it (RunQueue::RunHoldings).
struct RunHolding {
  std::string run_id;
  bool held = false;
};

// One reaper pass, as the scheduler tells the store (RunQueue::RecordReaperPass).
struct ReaperPass {
  // The caller knows of an outage the record cannot show: it has just started (a restart
  // shorter than max_silence), or its previous pass failed (the database was away).
  bool outage = false;
  // A longer silence since the last pass any replica recorded is an outage: the reaper, and so
  // the scheduler or the database, was away.
  absl::Duration max_silence = absl::Seconds(5);
  // A lease its holder renewed after the outage lapses no sooner than this after it.
  absl::Duration lease_ttl = absl::Seconds(60);
  // After an outage nothing is reaped for this long: the holders' time to reconnect and
  // heartbeat (at least a TTL, plus their reconnect backoff).
  absl::Duration grace = absl::Seconds(120);
};

// The service's liveness as the store has recorded it, after the pass.
struct ServiceLiveness {
  bool outage = false;                         // this pass found (or was told of) an outage
  absl::Time up_since = absl::InfinitePast();  // the current stretch of service began
  // Leases that lapse before charge_from are requeued without charge; none is reaped before
  // reap_from. InfinitePast: no outage recorded.
  absl::Time charge_from = absl::InfinitePast();
  absl::Time reap_from = absl::InfinitePast();
};

struct ReapResult {
  int requeued = 0;   // back to PENDING with attempt + 1
  int failed = 0;     // past max_attempts: FAILED, LEASE_EXPIRED
  int cancelled = 0;  // cancellation was pending: CANCELLED
  // Lapsed before the outage's charge_from (their holders never renewed them after an outage):
  // back to PENDING at the same attempt, event "lease expired during an outage".
  int outage_requeued = 0;
  // What the pass recorded (Scheduler::ReapExpiredLeases; the store leaves it default).
  ServiceLiveness liveness;
};

// The failure message a run keeps when its lease lapsed during an outage (both stores).
inline constexpr char kOutageLapseMessage[] =
    "lease lapsed during an outage of the scheduler or its database; the attempt was not charged";

class RunQueue {
 public:
  virtual ~RunQueue() = default;

  virtual absl::StatusOr<v1::Worker> RegisterWorker(const WorkerRegistration& worker) = 0;
  // The token name that owns the worker id. A worker no name owns yet (registered by the
  // scheduler's own process, or before migration 0013) becomes `owner`'s first, so that a fleet
  // upgraded while it runs is bound at its next call. NOT_FOUND for an unknown worker.
  virtual absl::StatusOr<std::string> ClaimWorker(const std::string& worker_id,
                                                  const std::string& owner) = 0;
  // Of each of `run_ids` that exists, in the order given, whether the worker ever held a lease
  // of it (its current lease, or an event recorded under its id); runs that do not exist (a
  // deleted sweep's, or never) are left out. After telemetry retention cut a run's events to its
  // last one, only the run's last holder is known.
  virtual absl::StatusOr<std::vector<RunHolding>> RunHoldings(
      const std::string& worker_id, const std::vector<std::string>& run_ids) = 0;

  // Leases the best PENDING run that fits the offer: highest priority, then the sweep with the
  // fewest live runs (fair share), then the oldest. Bumps the fencing token. nullopt = no work.
  // A run pinned to a dataset digest (data.dataset_digest) fits only a worker that registered a
  // copy with that digest; PostgreSQL's batch of several workers takes only the pinned runs that
  // every worker of the batch holds.
  // A retry (LeaseRequest::retry) first looks for the lease its lost answer granted.
  absl::StatusOr<std::optional<LeasedRun>> LeaseNextRun(const LeaseRequest& request) {
    return std::move(LeaseNextRuns({&request})[0]);
  }
  // LeaseNextRun for several requests at once, one result each, in order. Requests that offer
  // the same resources get the runs a LeaseNextRun per request, one after another, would give;
  // such groups go in the order of their first request. The batch is one unit of work for the
  // database per group, which is what makes a busy fleet cheap to serve. Retries are looked up
  // first, one by one (they are rare); those that find no lease join their groups.
  virtual std::vector<absl::StatusOr<std::optional<LeasedRun>>> LeaseNextRuns(
      const std::vector<const LeaseRequest*>& requests) = 0;
  virtual absl::StatusOr<HeartbeatResult> Heartbeat(const HeartbeatUpdate& update) = 0;
  // All or nothing: a stale token writes no point. Points already stored are skipped.
  virtual absl::StatusOr<MetricsAppendResult> AppendMetrics(
      const std::string& run_id, int64_t lease_epoch,
      const std::vector<v1::MetricPoint>& points) = 0;
  // Ends the lease: SUCCEEDED, or a failure as `retry` says. Repeating a
  // completion of the same epoch returns the run as it is.
  absl::StatusOr<CompletionResult> CompleteRun(const Completion& completion) {
    return std::move(CompleteRuns({&completion})[0]);
  }
  // CompleteRun for several completions at once, one result each, in order; each is checked and
  // applied on its own (a stale token fails that completion only).
  virtual std::vector<absl::StatusOr<CompletionResult>> CompleteRuns(
      const std::vector<const Completion*>& completions) = 0;
  // Returns up to `limit` expired leases to the queue (or fails them past max_attempts). After
  // an outage (RecordReaperPass) it reaps nothing before the recorded reap_from, and a lease that
  // lapsed before charge_from goes back to PENDING without spending an attempt: its holder could
  // not heartbeat, which is no fault of the run. Without a recorded outage every lapse is charged.
  virtual absl::StatusOr<ReapResult> ReapExpiredLeases(int limit) = 0;
  // Renews the reaper's liveness record, the same for every replica (PostgreSQL: the
  // reaper_liveness row), and begins an outage's windows when `pass.outage` says so or the last
  // recorded pass is more than `pass.max_silence` ago: up_since = now, charge_from ≥ now + TTL,
  // reap_from ≥ now + grace (a later outage never shortens an earlier one's). The first pass
  // ever records no outage unless told.
  virtual absl::StatusOr<ServiceLiveness> RecordReaperPass(const ReaperPass& pass) = 0;
  // The same two under a leader's term (leader_leases.h): checked in the same transaction, and
  // refused with LeaderEpochError, nothing written, once the term is over. What the elected
  // leader's reaper calls.
  virtual absl::StatusOr<ReapResult> ReapExpiredLeasesFenced(int limit,
                                                             const LeaderFence& fence) = 0;
  virtual absl::StatusOr<ServiceLiveness> RecordReaperPassFenced(const ReaperPass& pass,
                                                                 const LeaderFence& fence) = 0;
};

}  // namespace parity::server
