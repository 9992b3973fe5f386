// RunStore: the scheduler's durable state as domain operations (not a key-value blob).
//
// Every method is one transaction. Errors are absl::Status, chosen by what the caller should do:
//   NOT_FOUND            the sweep, run or worker does not exist (payload: ResourceInfo);
//   FAILED_PRECONDITION  a stale fencing token or a lost lease (payload: PreconditionFailure);
//   ALREADY_EXISTS       an idempotency key reused with a different spec;
//   ABORTED              a lost race (serialization failure, deadlock): re-read and retry;
//   UNAVAILABLE          the database cannot be reached: retry with backoff.
// The one implementation is PostgresRunStore; a FakeRunStore may implement the same contract.
// Implementations must be safe to call from many threads at once.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "google/rpc/status.pb.h"
#include "parity/v1/run.pb.h"
#include "parity/v1/sweep.pb.h"
#include "parity/v1/sweep_service.pb.h"
#include "parity/v1/worker.pb.h"

namespace parity::server {

// A sweep to store with its planned runs (in grid order).
struct NewSweep {
  v1::SweepSpec spec;
  std::vector<v1::RunSpec> runs;
  std::string owner;
  std::string idempotency_key;  // empty = no idempotency
};

struct CreatedSweep {
  v1::Sweep sweep;
  std::vector<std::string> run_ids;  // grid order
  bool deduplicated = false;         // the key matched an existing sweep; nothing written
};

struct WorkerRegistration {
  std::string worker_id;  // empty = assign a new id
  std::string hostname;
  std::vector<v1::Device> devices;
  std::vector<std::pair<std::string, std::string>> labels;
  std::string version;
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

struct LeaseRequest {
  std::string worker_id;
  ResourceOffer offer;
  absl::Duration ttl;
};

struct LeasedRun {
  v1::Lease lease;
  v1::Run run;
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

struct Completion {
  std::string run_id;
  int64_t lease_epoch = 0;
  std::optional<v1::RunSummary> success;  // set: SUCCEEDED; else failure_* apply
  v1::FailureClass failure_class = v1::FAILURE_CLASS_UNSPECIFIED;
  google::rpc::Status failure_status;
  std::optional<v1::Checkpoint> checkpoint;
};

struct CompletionResult {
  v1::Run run;
  absl::Duration retry_delay = absl::ZeroDuration();  // > 0 when requeued with a delay
};

struct ReapResult {
  int requeued = 0;   // back to PENDING with attempt + 1
  int failed = 0;     // past max_attempts: FAILED, LEASE_EXPIRED
  int cancelled = 0;  // cancellation was pending: CANCELLED
};

struct CancelResult {
  v1::Sweep sweep;
  uint32_t cancelled_runs = 0;
};

// Keyset paging: the token is opaque to callers and validated by the store.
struct PageRequest {
  uint32_t page_size = 100;
  std::string page_token;
};

template <typename T>
struct Page {
  std::vector<T> items;
  std::string next_page_token;  // empty = no more
};

struct ResultsQuery {
  std::string sweep_id;  // empty = all
  std::vector<v1::RunState> states;
  std::string layout;
  double min_activation_rate = 0;
  double max_activation_rate = 0;
  std::string order_by;  // a results column, optionally " desc"; empty = grid order
  PageRequest page;
};

struct WorkersQuery {
  absl::Duration seen_within = absl::Seconds(300);  // last lease, heartbeat or registration
  PageRequest page;
};

// What the metrics endpoint asks of the store (server/scheduler_metrics.cc), in one call.
struct RunCountsQuery {
  // Unfinished sweeps counted one by one, newest first, at most this many; the runs of every
  // other sweep are summed under an empty sweep_id, so the answer stays small (and the series
  // exported from it bounded) however many sweeps the database holds.
  int max_sweeps = 50;
  // A worker is live when seen (registration, lease call, heartbeat) within this window.
  absl::Duration live_worker_window = absl::Seconds(60);
};

struct SweepStateCount {
  std::string sweep_id;  // empty = the sum over every sweep not listed on its own
  std::string sweep_name;
  v1::RunState state = v1::RUN_STATE_UNSPECIFIED;
  int64_t runs = 0;  // count; rows with no runs are left out
};

struct RunCounts {
  std::vector<SweepStateCount> by_sweep;
  int64_t ready_to_lease = 0;  // PENDING runs of open sweeps past any retry delay (count)
  int64_t live_workers = 0;    // count
};

// One row of the events table.
struct RunEvent {
  int64_t event_id = 0;
  std::string run_id;
  v1::RunState from_state = v1::RUN_STATE_UNSPECIFIED;
  v1::RunState to_state = v1::RUN_STATE_UNSPECIFIED;
  uint32_t attempt = 0;
  std::string reason;
  absl::Time time;
};

struct SweepEventPage {
  std::vector<RunEvent> events;
  uint64_t next_horizon = 0;
};

class RunStore {
 public:
  virtual ~RunStore() = default;

  // Stores the sweep and all its runs (PENDING) with one creation event each, or returns the
  // sweep already stored under the idempotency key when the spec is identical.
  virtual absl::StatusOr<CreatedSweep> CreateSweep(const NewSweep& sweep) = 0;
  virtual absl::StatusOr<v1::Sweep> GetSweep(const std::string& sweep_id) = 0;
  virtual absl::StatusOr<Page<v1::Sweep>> ListSweeps(v1::SweepState state,
                                                     const PageRequest& page) = 0;
  // PENDING runs become CANCELLED; LEASED/RUNNING ones are flagged and end at their next
  // heartbeat. Idempotent.
  virtual absl::StatusOr<CancelResult> CancelSweep(const std::string& sweep_id,
                                                   const std::string& reason) = 0;

  virtual absl::StatusOr<v1::Run> GetRun(const std::string& run_id) = 0;
  virtual absl::StatusOr<Page<v1::Run>> ListRuns(const std::string& sweep_id,
                                                 const std::vector<v1::RunState>& states,
                                                 const PageRequest& page) = 0;
  virtual absl::StatusOr<Page<v1::ResultRow>> QueryResults(const ResultsQuery& query) = 0;

  virtual absl::StatusOr<v1::Worker> RegisterWorker(const WorkerRegistration& worker) = 0;
  // Workers seen within `seen_within`, most recently seen first (keyset paging on
  // (last_seen_at, worker_id); a worker seen again while a client pages may move to an earlier
  // page and be missed by that listing), each with its count of LEASED/RUNNING runs.
  virtual absl::StatusOr<Page<v1::Worker>> ListWorkers(const WorkersQuery& query) = 0;

  // Leases the best PENDING run that fits the offer: highest priority, then the sweep with the
  // fewest live runs (fair share), then the oldest. Bumps the fencing token. nullopt = no work.
  absl::StatusOr<std::optional<LeasedRun>> LeaseNextRun(const LeaseRequest& request) {
    return std::move(LeaseNextRuns({&request})[0]);
  }
  // LeaseNextRun for several requests at once, one result each, in order. Requests that offer
  // the same resources get the runs a LeaseNextRun per request, one after another, would give;
  // such groups go in the order of their first request. The batch is one unit of work for the
  // database per group, which is what makes a busy fleet cheap to serve.
  virtual std::vector<absl::StatusOr<std::optional<LeasedRun>>> LeaseNextRuns(
      const std::vector<const LeaseRequest*>& requests) = 0;
  virtual absl::StatusOr<HeartbeatResult> Heartbeat(const HeartbeatUpdate& update) = 0;
  // All or nothing: a stale token writes no point. Points already stored are skipped.
  virtual absl::StatusOr<MetricsAppendResult> AppendMetrics(
      const std::string& run_id, int64_t lease_epoch,
      const std::vector<v1::MetricPoint>& points) = 0;
  // Ends the lease: SUCCEEDED, or a failure with its class's retry policy. Repeating a
  // completion of the same epoch returns the run as it is.
  absl::StatusOr<CompletionResult> CompleteRun(const Completion& completion) {
    return std::move(CompleteRuns({&completion})[0]);
  }
  // CompleteRun for several completions at once, one result each, in order; each is checked and
  // applied on its own (a stale token fails that completion only).
  virtual std::vector<absl::StatusOr<CompletionResult>> CompleteRuns(
      const std::vector<const Completion*>& completions) = 0;
  // Returns up to `limit` expired leases to the queue (or fails them past max_attempts).
  virtual absl::StatusOr<ReapResult> ReapExpiredLeases(int limit) = 0;

  // Watch support. A sweep's events from transactions that finished since `horizon` (an opaque
  // commit watermark; 0 = none, just return the current watermark), in commit order, and the
  // next watermark. Unlike an event-id cursor this never skips a late-committing transaction.
  virtual absl::StatusOr<SweepEventPage> ListSweepEvents(const std::string& sweep_id,
                                                         uint64_t horizon) = 0;
  // A run's events after `after_event_id`, oldest first. Ids are in commit order within one run
  // (every writer holds the run's row lock), so an id cursor is exact here.
  virtual absl::StatusOr<std::vector<RunEvent>> ListRunEvents(const std::string& run_id,
                                                              int64_t after_event_id,
                                                              int limit) = 0;
  // Runs by sweep and state, the lease queue and the live workers, for dashboards. Reads only;
  // cost grows with the runs table (one grouped scan), so callers cache it.
  virtual absl::StatusOr<RunCounts> CountRunsByState(const RunCountsQuery& query) = 0;
  // Metric points of a run with step >= from_step, by step.
  virtual absl::StatusOr<std::vector<v1::MetricPoint>> ListMetrics(const std::string& run_id,
                                                                   uint64_t from_step,
                                                                   int limit) = 0;

  // --- Web dashboard queries (server/postgres_run_store_dashboard.cc; server/http_server.h) ---
  struct MetricSampling {
    // Points per run, about: the first point at or after each of the steps 0, s, 2s, ... up to
    // the run's latest step (s = ceil((latest+1)/max_points_per_run)), plus its last point.
    // web::SampleEvenly picks the same points from a full history.
    int max_points_per_run = 200;
    // Only evaluation steps (val_bpc set): the sweep page's validation curves.
    bool validation_only = false;
    // Expert load per layer without the per-expert shares (the summaries are enough over
    // steps); false = no expert load at all.
    bool expert_load_summaries = false;
  };
  // A bounded sample of each run's metric history, by run then step, with run_id set. Costs
  // index lookups per sampled point, not a scan of the run's history, so a 250-run sweep with
  // 100k points per run is cheap to draw. Unknown run ids give no points.
  virtual absl::StatusOr<std::vector<v1::MetricPoint>> SampleMetrics(
      const std::vector<std::string>& run_ids, const MetricSampling& sampling) = 0;
};

}  // namespace parity::server
