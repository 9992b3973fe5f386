// The load generator's shared parts: a recorder of latencies and errors that every simulated
// client writes into, a one-thread timer queue that re-arms the clients' cadences (so 1,000
// workers need no thread of their own: a timer starts an async call, gRPC's callback threads
// finish it), and /proc readings of the scheduler's and PostgreSQL's CPU and memory.
// Thread-safe unless a class says otherwise.
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace parity::load {

// Latency samples by call name ("lease", "heartbeat", …) and errors by (call, code). Every
// error keeps its time so a failover's window can be told from the rest.
class Recorder {
 public:
  explicit Recorder(absl::Time origin) : origin_(origin) {}
  // Times count from here on (the load's start, after the sweep was submitted).
  void SetOrigin(absl::Time origin) {
    absl::MutexLock lock(&mu_);
    origin_ = origin;
  }
  absl::Time origin() const {
    absl::MutexLock lock(&mu_);
    return origin_;
  }
  void Sample(const std::string& call, double ms);
  void Error(const std::string& call, const std::string& code, const std::string& message);
  // A count without a latency ("lease_empty", "duplicate_completion").
  void Count(const std::string& what, int64_t n = 1);

  // Latencies of `call` whose answer came at least `from_s` seconds after the origin.
  std::vector<double> Samples(const std::string& call, double from_s = -1e300) const;
  int64_t CountOf(const std::string& what) const;
  struct ErrorSummary {
    int64_t count = 0;
    double first_s = 0;  // seconds since origin
    double last_s = 0;
    std::string example;
  };
  std::map<std::string, ErrorSummary> Errors() const;  // key "call code"
  std::vector<double> ErrorTimes() const;              // seconds since origin, all calls
  std::map<std::string, int64_t> Counts() const;

 private:
  mutable absl::Mutex mu_;
  absl::Time origin_ ABSL_GUARDED_BY(mu_);
  // Per call: (seconds since origin at the answer, latency ms).
  std::map<std::string, std::vector<std::pair<double, double>>> samples_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, ErrorSummary> errors_ ABSL_GUARDED_BY(mu_);
  std::vector<double> error_times_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int64_t> counts_ ABSL_GUARDED_BY(mu_);
};

// p in [0, 1] of `values` (nearest rank); 0 when empty.
double Percentile(std::vector<double> values, double p);

// Runs callbacks at their time on one thread. Callbacks must be short (start an async call,
// re-arm a timer): a slow one delays every other client's cadence.
class TimerQueue {
 public:
  TimerQueue();
  ~TimerQueue();  // drops what is still queued
  void At(absl::Time when, std::function<void()> callback);
  void After(absl::Duration delay, std::function<void()> callback) {
    At(absl::Now() + delay, std::move(callback));
  }
  // How late callbacks ran, p99 in ms: the generator's own saturation shows here.
  double LatenessP99Ms() const;

 private:
  void Run();
  mutable absl::Mutex mu_;
  std::multimap<absl::Time, std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  std::vector<double> lateness_ms_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

// CPU seconds (user + system) and resident memory of a process, from /proc.
struct ProcessUsage {
  double cpu_s = 0;
  double rss_mib = 0;
  double peak_rss_mib = 0;  // VmHWM
  bool alive = false;
};
ProcessUsage UsageOf(pid_t pid);
// The same summed over `root` and every process whose parent is `root` (a PostgreSQL
// postmaster and its backends; a backend that exited during the window is not counted).
ProcessUsage TreeUsageOf(pid_t root);
// Machine-wide busy CPU seconds (all cores, from /proc/stat) and the 1-minute load average.
double MachineBusySeconds();
std::string LoadAverage();

}  // namespace parity::load
