#include "server/scheduling/lease_long_polls.h"

#include <algorithm>
#include <utility>

namespace parity::server {

LeaseLongPolls::LeaseLongPolls(WorkSignal& signal, const Clock& clock, Retry retry)
    : signal_(signal), clock_(clock), retry_(std::move(retry)) {
  signal_.SetListener([this](uint64_t generation) {
    absl::MutexLock lock(&mu_);
    generation_ = generation;
    changed_ = true;
  });
  thread_ = std::thread([this] { Run(); });
}

LeaseLongPolls::~LeaseLongPolls() { Stop(); }

void LeaseLongPolls::Park(std::unique_ptr<PendingLease> lease, uint64_t tried_at_generation,
                          absl::Time retry_at) {
  {
    absl::MutexLock lock(&mu_);
    if (!stopping_) {
      if (wake_on_park_.erase(lease->request.worker_id) > 0) {
        retry_at = absl::InfinitePast();
        lease->in_gang_pool = lease->accepts_gangs;
      }
      // Wake the thread only if this call is due before it would wake anyway: a fleet of idle
      // workers re-parks every idle_poll_interval, and each wake looks at every parked call.
      if (retry_at < sleeping_until_ || tried_at_generation != generation_) changed_ = true;
      parked_.push_back(Parked{std::move(lease), tried_at_generation, retry_at});
      return;
    }
  }
  lease->done(v1::LeaseRunResponse());
}

void LeaseLongPolls::WakeWorkers(const std::vector<std::string>& worker_ids) {
  constexpr size_t kMaxRemembered = 4096;  // a woken worker that never parks again is forgotten
  absl::MutexLock lock(&mu_);
  for (const std::string& worker : worker_ids) {
    bool parked = false;
    for (Parked& p : parked_) {
      if (p.lease->request.worker_id != worker) continue;
      p.retry_at = absl::InfinitePast();
      p.lease->in_gang_pool = p.lease->accepts_gangs;
      parked = true;
    }
    if (parked) {
      changed_ = true;
    } else {
      if (wake_on_park_.size() >= kMaxRemembered) wake_on_park_.clear();
      wake_on_park_.insert(worker);
    }
  }
}

void LeaseLongPolls::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
  signal_.SetListener(nullptr);
}

void LeaseLongPolls::Run() {
  mu_.Lock();
  while (true) {
    absl::Time wake = absl::InfiniteFuture();
    for (const Parked& p : parked_) wake = std::min(wake, p.retry_at);
    sleeping_until_ = wake;
    auto woken = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return changed_ || stopping_; };
    clock_.AwaitWithDeadline(mu_, absl::Condition(&woken), wake);
    sleeping_until_ = absl::InfinitePast();  // awake: the next sleep counts calls parked now
    changed_ = false;
    const bool stopping = stopping_;
    const uint64_t generation = generation_;
    std::vector<Parked> looked_at;
    looked_at.swap(parked_);
    // Outside the lock: asking whether a gRPC call was cancelled takes gRPC's own locks, and a
    // retry or an answer re-enters the lease queue or gRPC.
    mu_.Unlock();
    const absl::Time now = clock_.Now();
    std::vector<Parked> still_waiting;
    for (Parked& p : looked_at) {
      if (stopping || p.lease->cancelled()) {
        p.lease->done(v1::LeaseRunResponse());
      } else if (p.generation != generation || now >= p.retry_at) {
        retry_(std::move(p.lease));
      } else {
        still_waiting.push_back(std::move(p));
      }
    }
    mu_.Lock();
    for (Parked& p : still_waiting) parked_.push_back(std::move(p));
    if (stopping) break;  // parked_ is empty: Park() answers at once from now on
  }
  mu_.Unlock();
}

}  // namespace parity::server
