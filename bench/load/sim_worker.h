// A simulated parity-worker: what the real one (worker/worker.cc, run_supervisor.cc) says to the
// scheduler, without an engine. RegisterWorker; LeaseRun long polls with the worker's real wait
// (20 s); once a run is leased, a Heartbeat at once (it marks the run RUNNING) and then every
// heartbeat interval the scheduler gave at registration, ReportMetrics every few seconds with a
// few points, and CompleteRun(success, the planned summary) after the simulated run time; then
// the next LeaseRun. On UNAVAILABLE it moves to the next scheduler address, as a client given
// several addresses does, and retries after a second; a lease it lost (FAILED_PRECONDITION)
// is dropped and it leases again.
//
// No thread of its own: each step is an async call (gRPC's callback API) whose callback arms the
// next step on the shared TimerQueue. Thread-safe (callbacks and timers race on mu_).
#pragma once

#include <atomic>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "bench/load/load_support.h"
#include "parity/v1/sweep_service.grpc.pb.h"
#include "parity/v1/worker_service.grpc.pb.h"

namespace parity::load {

struct WorkerCadence {
  absl::Duration lease_wait = absl::Seconds(20);  // worker/worker.h: lease_wait
  absl::Duration metrics_interval = absl::Seconds(3);
  int points_per_report = 5;
  absl::Duration run_time = absl::Seconds(30);  // mean; each run uniform in [0.5, 1.5]×
  absl::Duration retry_delay = absl::Seconds(1);
};

// What every simulated client shares: which runs are held and completed (to find a run leased
// twice or completed twice), and when each completion was sent (the watchers' event delay is
// measured from it: the transition cannot have been caused earlier).
class RunLedger {
 public:
  // kTakenOver: another worker still held `run_id` under an older epoch (its lease lapsed and
  // was requeued; the epoch fences its writes). kDuplicate: the same epoch twice — a bug.
  enum class Lease { kFree, kTakenOver, kDuplicate };
  Lease Leased(const std::string& run_id, int worker, int64_t epoch);
  void Released(const std::string& run_id, int worker);
  void CompletionSent(const std::string& run_id, absl::Time at);
  bool CompletionTime(const std::string& run_id, absl::Time& at) const;
  // False when `run_id` had already been completed (a duplicate success).
  bool Completed(const std::string& run_id);
  // A completion whose answer was lost (the replica died mid-call): it may or may not have
  // committed; its retry decides.
  void Unknown(const std::string& run_id);
  std::set<std::string> completed() const;
  std::set<std::string> unknown() const;

 private:
  mutable absl::Mutex mu_;
  struct Holder {
    int worker;
    int64_t epoch;
  };
  std::map<std::string, Holder> holders_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, absl::Time> completion_sent_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> completed_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> unknown_ ABSL_GUARDED_BY(mu_);
};

// Everything a simulated client needs, owned by main and outliving every client.
struct LoadEnv {
  // stubs[address][channel]: each address is one scheduler replica.
  std::vector<std::vector<std::unique_ptr<v1::WorkerService::Stub>>> worker_stubs;
  std::vector<std::vector<std::unique_ptr<v1::SweepService::Stub>>> sweep_stubs;  // watchers
  TimerQueue* timers = nullptr;
  Recorder* recorder = nullptr;
  RunLedger* ledger = nullptr;
  std::atomic<bool> stopping{false};
  std::atomic<int> in_flight{0};  // calls started and not yet answered
};

class SimWorker {
 public:
  SimWorker(LoadEnv& env, WorkerCadence cadence, int index);
  void Start();
  // Cancels the long poll in flight (if any); other calls finish by themselves.
  void Stop();
  bool registered() const;

 private:
  void Register();
  void Lease();
  void OnLeased(const v1::LeaseRunResponse& response, uint64_t generation);
  void Heartbeat(uint64_t generation);
  void Report(uint64_t generation);
  void Complete(uint64_t generation);
  void CompleteAttempt(std::shared_ptr<v1::CompleteRunRequest> request, int attempt);
  // Records an error; moves to the next address when the replica is unreachable. Returns the
  // backoff before the retry (doubling per consecutive failure, up to 30 s, jittered).
  absl::Duration Failed(const std::string& call, const grpc::Status& status);
  void Succeeded();  // resets the backoff
  v1::WorkerService::Stub& Stub() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether `generation` is still the run in hand (timers of an ended run stop here).
  bool Current(uint64_t generation) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  LoadEnv& env_;
  const WorkerCadence cadence_;
  const int index_;
  mutable absl::Mutex mu_;
  int address_ ABSL_GUARDED_BY(mu_);
  std::string worker_id_ ABSL_GUARDED_BY(mu_);
  absl::Duration heartbeat_interval_ ABSL_GUARDED_BY(mu_) = absl::Seconds(15);
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;  // +1 per lease and per completion
  v1::LeaseRunResponse held_ ABSL_GUARDED_BY(mu_);
  uint64_t step_ ABSL_GUARDED_BY(mu_) = 0;
  int failures_ ABSL_GUARDED_BY(mu_) = 0;      // consecutive
  int calls_in_run_ ABSL_GUARDED_BY(mu_) = 0;  // Heartbeat/ReportMetrics in flight
  grpc::ClientContext* long_poll_ ABSL_GUARDED_BY(mu_) = nullptr;
  // The LeaseRun attempt in hand: its request_id (empty: take the next), and whether it is a
  // retry, as the real worker does (worker/worker.cc): a failed attempt is repeated with the
  // same id and retry = true, so a lease whose answer was lost is handed back.
  std::string lease_request_id_ ABSL_GUARDED_BY(mu_);
  bool lease_retry_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t lease_attempts_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t seed_ ABSL_GUARDED_BY(mu_);
};

}  // namespace parity::load
