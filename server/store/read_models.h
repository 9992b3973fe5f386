// ReadModels: reads shaped for watchers and dashboards: results, event feeds, counts, metric
// listings and samples. Reads only. See run_store.h for the errors.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/model_layout.h"
#include "parity/v1/run.pb.h"
#include "parity/v1/sweep.pb.h"
#include "parity/v1/sweep_service.pb.h"
#include "server/store/paging.h"

namespace parity::server {

// The columns of the results view that ResultsQuery::order_by may name: every store checks the
// request against this list (PostgreSQL never sees an order_by that is not on it).
inline constexpr std::string_view kResultsOrderColumns[] = {"name",
                                                            "role",
                                                            "layout",
                                                            "state",
                                                            "d_model",
                                                            "num_layers",
                                                            "num_experts",
                                                            "top_k",
                                                            "expert_hidden",
                                                            "params",
                                                            "active_params",
                                                            "activation_rate",
                                                            "flops_per_token",
                                                            "measured_flops_per_token",
                                                            "compute_flops",
                                                            "tokens",
                                                            "unique_tokens",
                                                            "epochs",
                                                            "final_val_bpc",
                                                            "wall_seconds",
                                                            "compute_budget",
                                                            "compute_multiple",
                                                            "data_variant",
                                                            "predicted_efficiency_leverage",
                                                            "delta_bpc_vs_dense",
                                                            "seed"};

struct ResultsQuery {
  std::string sweep_id;  // empty = all
  std::vector<v1::RunState> states;
  std::string layout;
  double min_activation_rate = 0;
  double max_activation_rate = 0;
  std::string order_by;  // a results column, optionally " desc"; empty = grid order
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

// What a watch stream's opening snapshot says of a run (ListRunStates): no spec, no lease.
struct RunStateRow {
  std::string run_id;
  v1::RunState state = v1::RUN_STATE_UNSPECIFIED;
  uint32_t attempt = 0;
  uint64_t latest_step = 0;
};

class ReadModels {
 public:
  virtual ~ReadModels() = default;

  virtual absl::StatusOr<Page<v1::ResultRow>> QueryResults(const ResultsQuery& query) = 0;

  // Watch support. A sweep's events from transactions that finished since `horizon` (an opaque
  // commit watermark; 0 = none, just return the current watermark), in commit order, and the
  // next watermark. Unlike an event-id cursor this never skips a late-committing transaction.
  virtual absl::StatusOr<SweepEventPage> ListSweepEvents(const std::string& sweep_id,
                                                         uint64_t horizon) = 0;
  // A page of the sweep's runs in grid order, only their state, attempt and latest step: a
  // watch snapshot of 10,000 runs reads no spec (ListRuns' page tokens; NOT_FOUND for an
  // unknown sweep).
  virtual absl::StatusOr<Page<RunStateRow>> ListRunStates(const std::string& sweep_id,
                                                          const PageRequest& page) = 0;
  // A run's events after `after_event_id`, oldest first. Ids are in commit order within one run
  // (every writer holds the run's row lock), so an id cursor is exact here.
  virtual absl::StatusOr<std::vector<RunEvent>> ListRunEvents(const std::string& run_id,
                                                              int64_t after_event_id,
                                                              int limit) = 0;
  // Runs by sweep and state, the lease queue and the live workers, for dashboards. Reads only;
  // cost grows with the runs table (one grouped scan), so callers cache it.
  virtual absl::StatusOr<RunCounts> CountRunsByState(const RunCountsQuery& query) = 0;
  // A gang run's placement under the run's current lease epoch (GetRunResponse.gang): world
  // size, epoch, when placed, the rendezvous deadline and release, and each rank's worker, its
  // hostname, the rank's devices and its check-in. nullopt for a run of one rank, an unknown
  // run, a PENDING run (a reaped gang's rows stay until its next placement) and a gang whose
  // placement a failure cleared (GangQueue::FailGang); an ended gang otherwise keeps the
  // placement it ended under. One indexed read (gangs' tables are keyed by run).
  virtual absl::StatusOr<std::optional<v1::RunGang>> GetRunGang(const std::string& run_id) = 0;
  // Metric points of a run with step >= from_step, by step.
  virtual absl::StatusOr<std::vector<v1::MetricPoint>> ListMetrics(const std::string& run_id,
                                                                   uint64_t from_step,
                                                                   int limit) = 0;

  // --- Web dashboard queries (server/api/dashboard_api.h) ---
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
