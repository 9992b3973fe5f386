// The load run itself (start the clients over a ramp, hold the load, kill a replica when asked,
// sample the processes' CPU and memory, stop and drain), its report, and the end check that
// every run a simulated worker completed is SUCCEEDED in the store exactly as often as it was
// completed.
#pragma once

#include <sys/types.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "bench/load/load_support.h"
#include "bench/load/sim_dashboard.h"
#include "bench/load/sim_watcher.h"
#include "bench/load/sim_worker.h"

namespace parity::load {

struct LoadPlan {
  int workers = 0, watchers = 0, dashboards = 0;
  absl::Duration duration, ramp;
  // Latencies are also reported for answers from here on (the fleet registered, the watch
  // snapshots sent): the steady state, beside the whole window with its start.
  absl::Duration steady_from;
  std::vector<pid_t> scheduler_pids;
  pid_t postgres_pid = 0;
  pid_t kill_pid = 0;  // 0 = none
  absl::Duration kill_at;
};

struct LoadOutcome {
  double elapsed_s = 0;
  std::string load_before, load_after;
  std::map<pid_t, ProcessUsage> scheduler_start, scheduler_last;  // last sample while alive
  ProcessUsage postgres_start, postgres_end;
  double machine_busy_s = 0;  // all cores, over the window
  double generator_cpu_s = 0;
  double kill_time_s = -1;    // since the recorder's origin; -1 = no kill
  int drained_in_flight = 0;  // calls still unanswered when the report was taken
  // Owned here so that late callbacks and timers never outlive them (main exits with _exit).
  std::vector<std::unique_ptr<SimWorker>> workers;
  std::vector<std::unique_ptr<SimWatcher>> watchers;
};

LoadOutcome RunLoad(const LoadPlan& plan, const WorkerCadence& cadence,
                    const DashboardOptions& dashboard, const std::string& sweep_id, LoadEnv& env);
void PrintReport(const LoadPlan& plan, const LoadOutcome& outcome, const Recorder& recorder,
                 const TimerQueue& timers);
// Lists the sweep's SUCCEEDED runs through the first replica that answers and compares them
// with the ledger; prints the verdict. False when a completed run is missing or counted twice.
bool VerifyCompleted(LoadEnv& env, const std::string& sweep_id, const RunLedger& ledger,
                     const LoadOutcome& outcome);

}  // namespace parity::load
