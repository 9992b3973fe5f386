// WorkerMetrics: one worker's Prometheus metrics (names prefixed parity_worker_): its runs, the
// live progress of each (tokens/s, train and validation BPC from the engine's metric lines), its
// devices, and how its conversation with the scheduler goes (leases, heartbeats, metric points).
//
// Labels stay bounded: per-run series carry run_id and run_name and exist only while the run is
// supervised here (at most --max-runs at once), removed when it ends; devices are fixed at start;
// outcomes and reasons are small fixed sets. No step or other growing value is ever a label.
//
// Owned by worker_main (or a test); the lease loop and the run supervisors get a pointer that may
// be null. Thread-safe: supervisors, their reader threads and the lease loop call concurrently,
// the exposer's HTTP threads read.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "parity/v1/run.pb.h"
#include "parity/v1/worker.pb.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/registry.h"
#include "worker/device_inventory.h"

namespace prometheus {
class Exposer;
}

namespace parity::worker {

enum class LeaseAttemptResult { kLeased, kEmpty, kError };

class WorkerMetrics {
 public:
  WorkerMetrics();
  ~WorkerMetrics();
  WorkerMetrics(const WorkerMetrics&) = delete;
  WorkerMetrics& operator=(const WorkerMetrics&) = delete;

  // --- lease loop ---
  void LeaseAttempt(LeaseAttemptResult result);
  // Replaces the device gauges (called at start and whenever a run takes or frees devices).
  void SetDevices(const std::vector<DeviceUsage>& devices);

  // --- run supervisors ---
  // The run's series appear at its first metric point and vanish at RunFinished.
  void RunStarted(const std::string& run_id, const std::string& run_name);
  // A metric point parsed from the engine: tokens/s and train BPC, validation BPC when present.
  void RunProgress(const std::string& run_id, const parity::v1::MetricPoint& point);
  // `outcome` is RunOutcomeName() ("succeeded", "failed", "lease-lost", ...).
  void RunFinished(const std::string& run_id, absl::string_view outcome);
  void PointsForwarded(uint64_t count);
  // `reason`: "buffer_full" (the scheduler was away too long) or "undelivered" (the run ended
  // with points the scheduler never took).
  void PointsDropped(absl::string_view reason, uint64_t count);
  void HeartbeatSent(bool ok);

  // The text exposition format of every metric (tests, or an HTTP server of the caller's).
  std::string Render() const;
  // Serves GET /metrics on `endpoint.address` on its own threads, to scrapers that send
  // `endpoint.scrape_token` as the basic-auth password (any user name; compared in constant
  // time; 401 otherwise). The port has no TLS (civetweb through prometheus-cpp), so an address
  // that does not resolve to loopback needs `endpoint.insecure_plaintext`. INVALID_ARGUMENT
  // without a token or for such an address, UNAVAILABLE when it cannot be bound. The exposer
  // must be destroyed first.
  struct Endpoint {
    std::string address;       // "ip:port"; port 0 = any free port
    std::string scrape_token;  // --metrics-token-file's contents
    bool insecure_plaintext = false;
  };
  absl::StatusOr<std::unique_ptr<prometheus::Exposer>> Expose(const Endpoint& endpoint);

 private:
  struct RunSeries {
    std::string run_name;
    prometheus::Gauge* tokens_per_second = nullptr;  // null until the first point
    prometheus::Gauge* train_bpc = nullptr;
    prometheus::Gauge* val_bpc = nullptr;  // null until the first evaluation
  };
  prometheus::Labels RunLabels(const std::string& run_id, const RunSeries& run) const;

  const std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Gauge& runs_in_flight_;
  prometheus::Family<prometheus::Counter>& runs_finished_;
  prometheus::Family<prometheus::Gauge>& run_tokens_per_second_;
  prometheus::Family<prometheus::Gauge>& run_train_bpc_;
  prometheus::Family<prometheus::Gauge>& run_val_bpc_;
  prometheus::Family<prometheus::Gauge>& device_memory_;
  prometheus::Family<prometheus::Gauge>& device_busy_;
  prometheus::Gauge& cpu_threads_;
  prometheus::Gauge& cpu_threads_booked_;
  prometheus::Counter& points_forwarded_;
  prometheus::Family<prometheus::Counter>& points_dropped_;
  prometheus::Counter& heartbeats_;
  prometheus::Counter& heartbeat_failures_;
  prometheus::Family<prometheus::Counter>& lease_attempts_;

  // Series are added and removed under this lock, so a point racing a run's end cannot bring a
  // removed series back.
  absl::Mutex mu_;
  std::map<std::string, RunSeries> runs_ ABSL_GUARDED_BY(mu_);  // run id → its series
};

}  // namespace parity::worker
