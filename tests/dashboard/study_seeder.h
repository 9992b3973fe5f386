// Seeds a realistic sweep into a running scheduler through its real gRPC API, playing the
// workers: RegisterWorker, LeaseRun every run, Heartbeat, ReportMetrics with synthetic but
// plausible curves (BPC falling to a final value that follows a dense compute law, MoE runs
// gaining from an activation-rate-dependent efficiency leverage; cosine learning rate; gradient
// norms; per-layer expert load that balances over training), then CompleteRun with a summary.
// A few runs are left unfinished so the dashboard has something live: kRunningRuns stay
// RUNNING at 40% of their steps, kPendingRuns are preempted back to PENDING.
//
// The scheduler plans with PlanWithDenseSizes: every fresh-data dense run also at two more
// sizes, so the analysis has a compute-optimal dense frontier that differs from the fixed-N law
// (the synthetic dense loss has an optimal size that grows with compute).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "parity/v1/sweep_service.grpc.pb.h"
#include "parity/v1/worker_service.grpc.pb.h"

namespace parity::dashboard_testing {

inline constexpr const char* kRunningRuns[] = {"moe-ra25-C2-unique-s0", "moe-ra40-C2-strict-s0"};
inline constexpr const char* kPendingRuns[] = {"moe-ra60-C2-strict-s0", "moe-ra15-C1-strict-s0"};
inline constexpr double kRunningFraction = 0.4;

struct SeededRun {
  parity::v1::Run run;  // as leased (spec, ids)
  int64_t lease_epoch = 0;
  std::string lease_secret;          // LeaseRunResponse.lease_secret, sent with every write
  uint64_t reported_up_to_step = 0;  // last step reported
};

struct SeededStudy {
  std::string sweep_id;
  std::string worker_id;
  std::map<std::string, SeededRun> runs;  // by run name
};

// The final validation BPC the seeder gives a run (what the results and figures must show).
double SyntheticFinalBpc(const parity::v1::RunSpec& spec);

// The dense sizes PlanWithDenseSizes adds beside the planned one (num_layers), and the name
// infix of their runs: "dense-1C-C1-unique-s0" at 1 layer is "dense-1C-L1-C1-unique-s0".
inline constexpr uint32_t kExtraDenseLayers[] = {1, 4};

// core::PlanSweep, plus every dense run of a "unique" data variant again at each of
// kExtraDenseLayers at the same compute (tokens = C/M): an IsoFLOP family per budget. The
// planner does not plan size families yet; the scheduler takes any planner (SchedulerServer).
absl::StatusOr<std::vector<parity::v1::RunSpec>> PlanWithDenseSizes(
    const parity::v1::SweepSpec& spec);

// Synthetic metric points of `spec` at its logging steps in (after_step, up_to_step].
std::vector<parity::v1::MetricPoint> SyntheticPoints(const parity::v1::RunSpec& spec,
                                                     uint64_t after_step, uint64_t up_to_step);

class StudySeeder {
 public:
  explicit StudySeeder(const std::shared_ptr<grpc::Channel>& channel);

  // Submits `spec` and drives every run as described above.
  absl::StatusOr<SeededStudy> Seed(const parity::v1::SweepSpec& spec);

  // As a worker without the dataset: leases whatever is queued (waiting up to `wait`) and fails
  // each run with USER_ERROR "dataset 'NAME' not found on worker WORKER", as the worker does.
  // Returns how many runs it failed.
  absl::StatusOr<int> FailQueuedRuns(const std::string& worker_id, absl::Duration wait);

  // Reports the points of a RUNNING run up to `fraction` of its steps (a live update).
  absl::Status ReportMore(SeededStudy& study, const std::string& run_name, double fraction);

 private:
  absl::Status Report(SeededRun& run, uint64_t up_to_step);

  std::unique_ptr<parity::v1::SweepService::Stub> sweeps_;
  std::unique_ptr<parity::v1::WorkerService::Stub> workers_;
};

}  // namespace parity::dashboard_testing
