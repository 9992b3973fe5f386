// RequestCombiner: callers that arrive while a batch is in flight wait and go out together in
// the next one. A lone call goes straight out (one thread hand-off, tens of microseconds); under
// load each batch grows to what arrived while the previous one ran, which is what lets 32
// workers' leases and completions share one PostgreSQL statement instead of queueing 32
// backends on the same rows. Batches are run by dispatcher threads of the combiner's own, which
// start the next batch the moment one ends: handing the lead to a waiting caller instead (flat
// combining) left the database idle a fifth of the time on a busy 2-core machine, waiting for
// that caller to be scheduled. Thread-safe.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <deque>
#include <functional>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace parity::server {

template <typename Request, typename Result>
class RequestCombiner {
 public:
  // Runs one batch: one result per request, in order. Called by at most `max_in_flight`
  // dispatcher threads at once, never with the combiner's lock held.
  using BatchFunction = std::function<std::vector<Result>(const std::vector<const Request*>&)>;

  RequestCombiner(BatchFunction run_batch, size_t max_batch, int max_in_flight)
      : run_batch_(std::move(run_batch)), max_batch_(max_batch) {
    for (int i = 0; i < max_in_flight; ++i) dispatchers_.emplace_back([this] { Dispatch(); });
  }

  // Callers still waiting get their answers first: the dispatchers drain the queue, then stop.
  ~RequestCombiner() {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
    }
    for (std::thread& dispatcher : dispatchers_) dispatcher.join();
  }

  RequestCombiner(const RequestCombiner&) = delete;
  RequestCombiner& operator=(const RequestCombiner&) = delete;

  // Blocks until the batch holding `request` has run; `request` must stay alive until then.
  Result Submit(const Request& request) {
    Slot slot{&request, std::nullopt, {}};
    absl::MutexLock lock(&mu_);
    queue_.push_back(&slot);
    while (!slot.result.has_value()) slot.done.Wait(&mu_);
    return std::move(*slot.result);
  }

 private:
  struct Slot {
    const Request* request;
    std::optional<Result> result;
    absl::CondVar done;  // one waiter woken per answer, not every caller re-checking
  };

  void Dispatch() {
    absl::MutexLock lock(&mu_);
    while (true) {
      auto has_work = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return !queue_.empty() || stopping_;
      };
      mu_.Await(absl::Condition(&has_work));
      if (queue_.empty()) return;  // stopping, and nothing left to answer
      std::vector<Slot*> batch;
      std::vector<const Request*> requests;
      while (!queue_.empty() && batch.size() < max_batch_) {
        batch.push_back(queue_.front());
        requests.push_back(queue_.front()->request);
        queue_.pop_front();
      }
      mu_.Unlock();
      std::vector<Result> results = run_batch_(requests);
      if (results.size() != batch.size()) std::abort();  // a BatchFunction broke its contract
      mu_.Lock();
      for (size_t i = 0; i < batch.size(); ++i) {
        batch[i]->result.emplace(std::move(results[i]));
        batch[i]->done.Signal();
      }
    }
  }

  const BatchFunction run_batch_;
  const size_t max_batch_;
  absl::Mutex mu_;
  std::deque<Slot*> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> dispatchers_;  // last: started once everything above exists
};

}  // namespace parity::server
