// SchedulerMetrics: the scheduler's Prometheus metrics (names prefixed parity_scheduler_).
//
// Two sources, one exposition:
//   - events, counted as they happen through the SchedulerObserver seam and ObserveRpc (called by
//     the gRPC interceptor in rpc_metrics_interceptor.cc): sweeps submitted, leases and how long
//     they waited, RPCs by method and code with their latency, metric points ingested,
//     completions by state and failure class, reaper outcomes and errors;
//   - state, read from PostgreSQL when scraped (ReadModels::CountRunsByState): runs by state (in
//     total and per unfinished sweep, capped), the lease queue, live workers. Several scheduler
//     replicas share one database, so these gauges are the same on each; the event counters are
//     per replica (sum them).
//
// Every label is bounded: method names come from the service descriptors (anything else is
// "other"), codes are the 17 gRPC codes, sweeps are capped (RunCountsQuery::max_sweeps) with the
// rest summed under sweep="other". Render() serves the scheduler's HTTP /metrics hook; Expose()
// starts a standalone endpoint (prometheus-cpp pull) for --metrics-listen.
//
// Owned by SchedulerServer. Thread-safe: observer calls come from RPC threads concurrently,
// scrapes from HTTP threads; counters are atomic and the database cache is behind a mutex.
#pragma once

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "server/scheduling/clock.h"
#include "server/scheduling/scheduler_observer.h"
#include "server/store/read_models.h"

namespace prometheus {
class Exposer;
}

namespace parity::server {

struct SchedulerMetricsOptions {
  // The database gauges are read at most this often; scrapes in between get the cached values,
  // so a dashboard that polls /metrics hard does not load PostgreSQL.
  absl::Duration refresh_interval = absl::Seconds(1);
  RunCountsQuery counts;
};

class SchedulerMetrics final : public SchedulerObserver {
 public:
  // `reads` and `clock` must outlive this object (and any Exposer from Expose()).
  SchedulerMetrics(ReadModels& reads, const Clock& clock, SchedulerMetricsOptions options = {});
  ~SchedulerMetrics() override;
  SchedulerMetrics(const SchedulerMetrics&) = delete;
  SchedulerMetrics& operator=(const SchedulerMetrics&) = delete;

  void OnSweepSubmitted(const v1::Sweep& sweep, bool deduplicated) override;
  void OnRunLeased(const v1::Run& run, absl::Duration waited) override;
  void OnMetricsStored(const MetricsAppendResult& result) override;
  void OnRunCompleted(const v1::Run& run) override;
  void OnLeasesReaped(const ReapResult& result) override;
  void OnReapFailed(const absl::Status& status) override;
  void OnRetentionApplied(const RetentionResult& result) override;
  void OnGangCounts(const GangCounts& counts) override;
  void OnGangRendezvous(absl::Duration took) override;
  void OnGangRestarted(const v1::Run& run, absl::string_view reason) override;

  // One finished RPC. `method` is the gRPC path ("/parity.v1.WorkerService/LeaseRun") or the
  // bare method name; methods outside SweepService and WorkerService count as "other".
  void ObserveRpc(absl::string_view method, absl::StatusCode code, absl::Duration duration);

  // The text exposition format (version 0.0.4) of every metric, database gauges refreshed when
  // older than refresh_interval. For the HTTP server's /metrics.
  std::string Render();

  // Serves GET /metrics on `address` ("host:port"; port 0 = any free port, see
  // prometheus::Exposer::GetListeningPorts) on its own threads. UNAVAILABLE when the address
  // cannot be bound. The exposer must be destroyed before this object.
  absl::StatusOr<std::unique_ptr<prometheus::Exposer>> Expose(const std::string& address);

 private:
  class DatabaseGauges;  // a prometheus::Collectable reading ReadModels::CountRunsByState

  prometheus::Counter& RpcCounter(const std::string& method, absl::StatusCode code);

  const std::shared_ptr<prometheus::Registry> registry_;
  const std::shared_ptr<DatabaseGauges> database_;
  prometheus::Family<prometheus::Counter>& sweeps_submitted_;
  prometheus::Counter& leases_;
  prometheus::Histogram& lease_wait_;
  prometheus::Family<prometheus::Counter>& rpcs_;
  prometheus::Family<prometheus::Histogram>& rpc_duration_;
  prometheus::Counter& points_ingested_;
  prometheus::Counter& points_duplicate_;
  prometheus::Family<prometheus::Counter>& runs_completed_;
  prometheus::Family<prometheus::Counter>& reaped_;
  prometheus::Counter& reaper_errors_;
  prometheus::Counter& lease_grace_;
  prometheus::Family<prometheus::Counter>& retention_deleted_;
  prometheus::Family<prometheus::Gauge>& gangs_;  // by state: waiting, placed, pool_workers
  prometheus::Histogram& gang_rendezvous_;
  prometheus::Family<prometheus::Counter>& gang_restarts_;  // by reason
};

}  // namespace parity::server
