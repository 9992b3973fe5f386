// A simulated watcher (`parity sweep watch`, a notebook following a sweep): one WatchSweep
// stream, read through gRPC's callback API. It measures the event delay of every run's
// SUCCEEDED transition: the time the event arrived minus the time the simulated worker sent
// the CompleteRun that caused it (RunLedger; one process, one clock — an upper bound, since the
// transition commits somewhat after the send). The opening snapshot (asked for as pages: one
// message per 1,000 runs, as the CLI does) is counted, not timed. A stream that ends is reopened
// after a backoff (1 s doubling to 30 s), on the next address when the replica was unreachable.
// Thread-safe.
#pragma once

#include <string>

#include "absl/synchronization/mutex.h"
#include "bench/load/sim_worker.h"

namespace parity::load {

class WatchStream;

class SimWatcher {
 public:
  SimWatcher(LoadEnv& env, std::string sweep_id, int index)
      : env_(env), sweep_id_(std::move(sweep_id)), index_(index), address_(index) {}
  void Start();
  void Stop();

 private:
  friend class WatchStream;
  void OnMessage(const v1::WatchSweepResponse& message, absl::Time received);
  void OnStreamDone(const grpc::Status& status, absl::Time opened);

  LoadEnv& env_;
  const std::string sweep_id_;
  const int index_;
  absl::Mutex mu_;
  int address_ ABSL_GUARDED_BY(mu_);
  int failures_ ABSL_GUARDED_BY(mu_) = 0;               // streams that died young in a row
  WatchStream* stream_ ABSL_GUARDED_BY(mu_) = nullptr;  // deletes itself when done
};

}  // namespace parity::load
