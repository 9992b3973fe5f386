// RequestCombiner: callers that arrive while a batch is in flight wait and go out together in
// the next one (flat combining: no dispatcher thread; a waiting caller runs the batch). One
// call alone goes straight through, so an idle scheduler adds no latency; under load each batch
// grows to what arrived while the previous one ran, which is what lets 32 workers' leases and
// completions share one PostgreSQL statement instead of queueing 32 backends on the same rows.
// Thread-safe.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <deque>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace parity::server {

template <typename Request, typename Result>
class RequestCombiner {
 public:
  // Runs one batch: one result per request, in order. Called without the combiner's lock, by
  // at most `max_in_flight` callers at once.
  using BatchFunction = std::function<std::vector<Result>(const std::vector<const Request*>&)>;

  RequestCombiner(BatchFunction run_batch, size_t max_batch, int max_in_flight)
      : run_batch_(std::move(run_batch)), max_batch_(max_batch), max_in_flight_(max_in_flight) {}

  // Blocks until the batch holding `request` has run; `request` must stay alive until then.
  Result Submit(const Request& request) {
    Slot slot{&request, false, std::nullopt, {}};
    absl::MutexLock lock(&mu_);
    queue_.push_back(&slot);
    while (!slot.result.has_value()) {
      // Only a caller whose own request still waits leads a batch, so nobody's answer waits
      // behind a batch its caller chose to run for others.
      if (!slot.taken && in_flight_ < max_in_flight_) {
        RunOneBatch();
      } else {
        slot.wake.Wait(&mu_);
      }
    }
    return std::move(*slot.result);
  }

 private:
  struct Slot {
    const Request* request;
    bool taken;  // in a batch that is running
    std::optional<Result> result;
    // Signalled when the result is in, or when this caller should lead the next batch: one
    // waiter woken per event, not every waiter re-checking a shared condition.
    absl::CondVar wake;
  };

  void RunOneBatch() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::vector<Slot*> batch;
    std::vector<const Request*> requests;
    while (!queue_.empty() && batch.size() < max_batch_) {
      Slot* slot = queue_.front();
      queue_.pop_front();
      slot->taken = true;
      batch.push_back(slot);
      requests.push_back(slot->request);
    }
    ++in_flight_;
    mu_.Unlock();
    std::vector<Result> results = run_batch_(requests);
    if (results.size() != batch.size()) std::abort();  // a BatchFunction broke its contract
    mu_.Lock();
    --in_flight_;
    for (size_t i = 0; i < batch.size(); ++i) {
      batch[i]->result.emplace(std::move(results[i]));
      batch[i]->wake.Signal();
    }
    // What arrived meanwhile goes next, led by the oldest waiting caller.
    if (!queue_.empty()) queue_.front()->wake.Signal();
  }

  const BatchFunction run_batch_;
  const size_t max_batch_;
  const int max_in_flight_;
  absl::Mutex mu_;
  std::deque<Slot*> queue_ ABSL_GUARDED_BY(mu_);
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace parity::server
