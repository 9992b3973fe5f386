// What the sweep feed tests share: a SweepCatalog + ReadModels that forward to a store and count
// the calls a watch makes (the feed's whole point is how few there are), and the store-level
// steps that make events (a sweep, a worker, a lease, metric points).
#pragma once

#include <atomic>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/store/read_models.h"
#include "server/store/run_queue.h"
#include "server/store/sweep_catalog.h"

namespace parity::server::testing {

class CountingStore final : public SweepCatalog, public ReadModels {
 public:
  CountingStore(SweepCatalog& catalog, ReadModels& reads) : catalog_(catalog), reads_(reads) {}

  std::atomic<int> list_sweep_events{0};
  std::atomic<int> list_metrics{0};
  std::atomic<int> get_sweep{0};
  std::atomic<int> list_runs{0};

  absl::StatusOr<CreatedSweep> CreateSweep(const NewSweep& sweep) override {
    return catalog_.CreateSweep(sweep);
  }
  absl::StatusOr<v1::Sweep> GetSweep(const std::string& sweep_id) override {
    ++get_sweep;
    return catalog_.GetSweep(sweep_id);
  }
  absl::StatusOr<Page<v1::Sweep>> ListSweeps(v1::SweepState state,
                                             const PageRequest& page) override {
    return catalog_.ListSweeps(state, page);
  }
  absl::StatusOr<CancelResult> CancelSweep(const std::string& sweep_id,
                                           const std::string& reason) override {
    return catalog_.CancelSweep(sweep_id, reason);
  }
  absl::StatusOr<uint32_t> DeleteSweep(const std::string& sweep_id) override {
    return catalog_.DeleteSweep(sweep_id);
  }
  absl::StatusOr<OwnerLoad> CountOwnerLoad(const std::string& owner) override {
    return catalog_.CountOwnerLoad(owner);
  }
  absl::StatusOr<v1::Run> GetRun(const std::string& run_id) override {
    return catalog_.GetRun(run_id);
  }
  absl::StatusOr<Page<v1::Run>> ListRuns(const std::string& sweep_id,
                                         const std::vector<v1::RunState>& states,
                                         const PageRequest& page) override {
    ++list_runs;
    return catalog_.ListRuns(sweep_id, states, page);
  }
  absl::StatusOr<Page<v1::Worker>> ListWorkers(const WorkersQuery& query) override {
    return catalog_.ListWorkers(query);
  }

  absl::StatusOr<Page<v1::ResultRow>> QueryResults(const ResultsQuery& query) override {
    return reads_.QueryResults(query);
  }
  absl::StatusOr<Page<RunStateRow>> ListRunStates(const std::string& sweep_id,
                                                  const PageRequest& page) override {
    ++list_runs;
    return reads_.ListRunStates(sweep_id, page);
  }
  absl::StatusOr<SweepEventPage> ListSweepEvents(const std::string& sweep_id,
                                                 uint64_t horizon) override {
    ++list_sweep_events;
    return reads_.ListSweepEvents(sweep_id, horizon);
  }
  absl::StatusOr<std::vector<RunEvent>> ListRunEvents(const std::string& run_id,
                                                      int64_t after_event_id, int limit) override {
    return reads_.ListRunEvents(run_id, after_event_id, limit);
  }
  absl::StatusOr<RunCounts> CountRunsByState(const RunCountsQuery& query) override {
    return reads_.CountRunsByState(query);
  }
  absl::StatusOr<std::vector<v1::MetricPoint>> ListMetrics(const std::string& run_id,
                                                           uint64_t from_step, int limit) override {
    ++list_metrics;
    return reads_.ListMetrics(run_id, from_step, limit);
  }
  absl::StatusOr<std::vector<v1::MetricPoint>> SampleMetrics(
      const std::vector<std::string>& run_ids, const MetricSampling& sampling) override {
    return reads_.SampleMetrics(run_ids, sampling);
  }
  absl::StatusOr<std::optional<v1::RunGang>> GetRunGang(const std::string& run_id) override {
    return reads_.GetRunGang(run_id);
  }

 private:
  SweepCatalog& catalog_;
  ReadModels& reads_;
};

inline CreatedSweep MakeSweep(SweepCatalog& catalog, const std::string& name, int runs) {
  NewSweep sweep;
  sweep.spec.set_name(name);
  sweep.spec.set_max_attempts(2);
  for (int i = 0; i < runs; ++i) {
    v1::RunSpec& run = sweep.runs.emplace_back();
    run.set_name(name + "-" + std::to_string(i));
    run.mutable_resources()->set_cpu_threads(1);
  }
  absl::StatusOr<CreatedSweep> created = catalog.CreateSweep(sweep);
  EXPECT_TRUE(created.ok()) << created.status();
  return created.ok() ? *created : CreatedSweep();
}

inline std::string MakeWorker(RunQueue& queue) {
  WorkerRegistration registration;
  registration.hostname = "feed-host";
  absl::StatusOr<v1::Worker> worker = queue.RegisterWorker(registration);
  EXPECT_TRUE(worker.ok()) << worker.status();
  return worker.ok() ? worker->worker_id() : "";
}

// Leases the next run to `worker` (a PENDING → LEASED event).
inline LeasedRun LeaseOne(RunQueue& queue, const std::string& worker) {
  LeaseRequest request;
  request.worker_id = worker;
  request.offer.cpu_threads = 4;
  request.ttl = absl::Seconds(600);
  absl::StatusOr<std::optional<LeasedRun>> leased = queue.LeaseNextRun(request);
  EXPECT_TRUE(leased.ok() && leased->has_value()) << "a run to lease: " << leased.status();
  return leased.ok() && leased->has_value() ? **leased : LeasedRun();
}

inline void AppendPoints(RunQueue& queue, const LeasedRun& run, uint64_t first, uint64_t last) {
  std::vector<v1::MetricPoint> points;
  for (uint64_t step = first; step <= last; ++step) {
    v1::MetricPoint& point = points.emplace_back();
    point.set_step(step);
    point.set_train_bpc(2.0);
  }
  absl::StatusOr<MetricsAppendResult> appended =
      queue.AppendMetrics(run.run.run_id(), run.lease.lease_epoch(), points);
  EXPECT_TRUE(appended.ok()) << appended.status();
}

}  // namespace parity::server::testing
