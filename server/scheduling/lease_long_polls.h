// LeaseLongPolls: LeaseRun calls that found no work wait here without holding a thread. An
// idle fleet of hundreds of workers each holds a LeaseRun open for up to a minute; a thread per
// wait (the sync gRPC server's way) also made every busy call hand its answer from the thread
// that ran the batch to the thread that held the call. A parked call goes back to try again
// when work may have appeared (WorkSignal), when its idle re-check comes round or when its
// deadline arrives (a last try); it is answered empty here if its caller went away or the
// server is stopping. One thread for all of them. Thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "parity/v1/worker_service.pb.h"
#include "server/scheduling/clock.h"
#include "server/scheduling/work_signal.h"
#include "server/store/run_queue.h"

namespace parity::server {

// One LeaseRun call from validation to its answer.
struct PendingLease {
  LeaseRequest request;
  absl::Time start;                 // when the call arrived (the observer's "waited")
  absl::Time deadline;              // answer by then, empty if nothing was found
  std::function<bool()> cancelled;  // the caller went away or the server stopped; never empty
  absl::AnyInvocable<void(absl::StatusOr<v1::LeaseRunResponse>)> done;  // called exactly once
  std::string holder;  // the caller's identity, which the lease secret is bound to
  // The caller can start a gang's ranks (LeaseRunRequest.accepts_gangs).
  bool accepts_gangs = false;
  // Its worker is in the gang pool (LeasesService::TryGang): its tries ask GangQueue first.
  bool in_gang_pool = false;
};

class LeaseLongPolls {
 public:
  using Retry = std::function<void(std::unique_ptr<PendingLease>)>;

  // `retry` takes a parked call back to the lease queue; it runs on this class's thread.
  // `signal` and `clock` (whose time retry_at is on) must outlive this object.
  LeaseLongPolls(WorkSignal& signal, const Clock& clock, Retry retry);
  // Stops (see Stop).
  ~LeaseLongPolls();

  LeaseLongPolls(const LeaseLongPolls&) = delete;
  LeaseLongPolls& operator=(const LeaseLongPolls&) = delete;

  // Parks a call whose last try began at WorkSignal generation `tried_at_generation` and found
  // nothing, until that generation moves on or `retry_at`, whichever is first. After Stop(),
  // answers it empty at once.
  void Park(std::unique_ptr<PendingLease> lease, uint64_t tried_at_generation, absl::Time retry_at);

  // Retries at once the parked calls of these workers (a gang placement gave them slots), and a
  // call of theirs that is mid-try when it parks next: a placement wakes the R workers it placed,
  // not every parked call.
  // Woken calls ask the gang pool first (PendingLease::in_gang_pool, when they accept gangs).
  void WakeWorkers(const std::vector<std::string>& worker_ids);

  // Answers every parked call empty and ends the thread; later Park() calls answer at once.
  void Stop();

 private:
  struct Parked {
    std::unique_ptr<PendingLease> lease;
    uint64_t generation;
    absl::Time retry_at;
  };

  void Run();

  WorkSignal& signal_;
  const Clock& clock_;
  const Retry retry_;
  absl::Mutex mu_;
  std::vector<Parked> parked_ ABSL_GUARDED_BY(mu_);
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;  // the signal's latest
  bool changed_ ABSL_GUARDED_BY(mu_) = false;     // a Notify() or an earlier retry_at parked
  absl::Time sleeping_until_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();  // while it sleeps
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // Woken workers none of whose calls was parked (one was mid-try): their next Park is due now.
  absl::flat_hash_set<std::string> wake_on_park_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;  // last: started once everything above exists
};

}  // namespace parity::server
