// RequestCombiner: requests that arrive while a batch is in flight wait and go out together in
// the next one. A lone request goes straight out (one thread hand-off, tens of microseconds); under
// load each batch grows to what arrived while the previous one ran, which is what lets 32
// workers' leases and completions share one PostgreSQL statement instead of queueing 32
// backends on the same rows. Batches are run by dispatcher threads of the combiner's own, which
// start the next batch the moment one ends: handing the lead to a waiting caller instead (flat
// combining) left the database idle a fifth of the time on a busy 2-core machine, waiting for
// that caller to be scheduled. Answers go to callbacks run on the dispatcher thread, so a gRPC
// callback handler holds no thread while its request waits (SubmitAsync); Submit blocks for
// callers that have a thread to spare. Thread-safe.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <deque>
#include <functional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"
#include "server/scheduling/await_callback.h"

namespace parity::server {

template <typename Request, typename Result>
class RequestCombiner {
 public:
  // Runs one batch: one result per request, in order. Called by at most `max_in_flight`
  // dispatcher threads at once, never with the combiner's lock held.
  using BatchFunction = std::function<std::vector<Result>(const std::vector<const Request*>&)>;
  // Receives one request's result, on a dispatcher thread: it should hand the result on and
  // return (the next batch starts when every callback of this one has returned).
  using Callback = absl::AnyInvocable<void(Result)>;

  RequestCombiner(BatchFunction run_batch, size_t max_batch, int max_in_flight)
      : run_batch_(std::move(run_batch)), max_batch_(max_batch) {
    for (int i = 0; i < max_in_flight; ++i) dispatchers_.emplace_back([this] { Dispatch(); });
  }

  // Requests still queued get their answers first: the dispatchers drain the queue, then stop.
  ~RequestCombiner() {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
    }
    for (std::thread& dispatcher : dispatchers_) dispatcher.join();
  }

  RequestCombiner(const RequestCombiner&) = delete;
  RequestCombiner& operator=(const RequestCombiner&) = delete;

  // Returns at once; `done` gets the result once the batch holding `request` has run.
  // `request` must stay alive until then (typically `done` owns it).
  void SubmitAsync(const Request& request, Callback done) {
    absl::MutexLock lock(&mu_);
    queue_.push_back(Queued{&request, std::move(done)});
  }

  // Blocks until the batch holding `request` has run.
  Result Submit(const Request& request) {
    return AwaitCallback<Result>([&](Callback done) { SubmitAsync(request, std::move(done)); });
  }

 private:
  struct Queued {
    const Request* request;
    Callback done;
  };

  void Dispatch() {
    absl::MutexLock lock(&mu_);
    while (true) {
      auto has_work = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return !queue_.empty() || stopping_;
      };
      mu_.Await(absl::Condition(&has_work));
      if (queue_.empty()) return;  // stopping, and nothing left to answer
      std::vector<Queued> batch;
      std::vector<const Request*> requests;
      while (!queue_.empty() && batch.size() < max_batch_) {
        requests.push_back(queue_.front().request);
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
      mu_.Unlock();
      std::vector<Result> results = run_batch_(requests);
      if (results.size() != batch.size()) std::abort();  // a BatchFunction broke its contract
      // Outside the lock: a callback may submit again (a long poll trying once more).
      for (size_t i = 0; i < batch.size(); ++i) batch[i].done(std::move(results[i]));
      mu_.Lock();
    }
  }

  const BatchFunction run_batch_;
  const size_t max_batch_;
  absl::Mutex mu_;
  std::deque<Queued> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> dispatchers_;  // last: started once everything above exists
};

}  // namespace parity::server
