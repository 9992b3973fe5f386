// The worker daemon's lease loop: register, long-poll LeaseRun for runs that fit the free devices,
// start a RunSupervisor per run, release devices when runs end, and on shutdown preempt every run
// and wait for their reports.
#pragma once

#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/backoff.h"
#include "worker/device_inventory.h"
#include "worker/run_supervisor.h"
#include "worker/scheduler_client.h"
#include "worker/worker_metrics.h"

namespace parity::worker {

struct WorkerOptions {
  std::string hostname;
  std::map<std::string, std::string> labels;
  std::string version;
  // Id from an earlier registration (reused after a restart); empty = a new one.
  std::string worker_id;
  // File the assigned id is written to (and read from when worker_id is empty); empty = none.
  std::string worker_id_file;
  // How long one LeaseRun waits for work.
  absl::Duration lease_wait = absl::Seconds(20);
  // Template for every run; worker_id, heartbeat_interval and lease_ttl come from registration.
  RunSupervisorOptions run;
  core::BackoffOptions backoff;
  // How often the checkpoints on this disk that no run needs are deleted (and once at start).
  absl::Duration checkpoint_retention_interval = absl::Minutes(10);
  // Where the lease loop and every run report (run.worker_metrics is set from it); may be null,
  // else must outlive the daemon.
  WorkerMetrics* metrics = nullptr;
};

// Run() is called on one thread (the lease loop); Shutdown() from any other thread (signals).
class WorkerDaemon {
 public:
  WorkerDaemon(SchedulerClient& client, DeviceSlots& slots, WorkerOptions options);

  // Registers, then leases and supervises runs until Shutdown(); then preempts the runs still
  // going and returns once each has been reported. OK unless registration was impossible.
  absl::Status Run();
  void Shutdown();
  bool shutting_down() const;
  // Runs supervised now (count).
  size_t active_runs() const { return slots_.active_runs(); }

 private:
  absl::Status Register();
  void StartRun(parity::v1::LeaseRunResponse lease);
  void ReapFinished();
  // Deletes what no run needs of the checkpoints under the root (checkpoint_retention.h): the
  // runs of deleted sweeps, all but the final checkpoint of finished runs, the older leases'
  // files of runs that moved on. Runs supervised here are their supervisors' to tidy.
  void RetainCheckpoints();
  // Tells the metrics which devices runs hold now.
  void PublishDevices();
  // The next LeaseRun request for the free devices `free`: a fresh request_id, or the lost
  // attempt's again with retry = true when the devices offered are the same.
  parity::v1::LeaseRunRequest NextLeaseRequest(std::vector<parity::v1::Device> free);
  // Sleeps up to `d`, waking early on Shutdown(). Returns whether shutting down.
  bool SleepUnlessShutdown(absl::Duration d);
  // Sleeps up to `d`, waking early on Shutdown() or once finished_runs() has moved past `seen`.
  void WaitForFreeSlot(uint64_t seen, absl::Duration d);
  uint64_t finished_runs() const;

  SchedulerClient& client_;
  DeviceSlots& slots_;
  // Verifies datasets when options.run.dataset_check has no cache of the operator's.
  datasets::VerifyCache own_verify_cache_{""};
  WorkerOptions options_;  // lease-loop thread only after construction
  // What ScanDatasets found at start, sent with every registration; lease-loop thread only.
  std::vector<v1::DatasetHolding> datasets_;
  // Run id → supervisor; lease-loop thread only.
  std::map<std::string, std::unique_ptr<RunSupervisor>> runs_;
  // The last LeaseRun attempt whose answer may have been lost (AnswerMayHaveBeenLost): its
  // request_id (empty = none, the last attempt was answered) and the devices it offered
  // (serialized). Lease-loop thread only.
  std::string lost_request_id_;
  std::string lost_offer_;
  std::mt19937_64 request_ids_{std::random_device{}()};  // lease-loop thread only
  mutable absl::Mutex mu_;
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  // Bumped by supervisors (on their threads) each time a run finishes.
  uint64_t finished_runs_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace parity::worker
