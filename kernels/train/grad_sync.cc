#include "kernels/train/grad_sync.h"

#include <algorithm>

namespace parity::kernels {
namespace {

// Floats per collective (64 MiB): bounds what one all-reduce registers with the transport.
constexpr int64_t kBucketFloats = int64_t{1} << 24;

}  // namespace

GradientSync::GradientSync(Communicator& comm, float* grads, int64_t n, bool overlap)
    : comm_(comm), grads_(grads), n_(n), queued_(overlap && comm.QueuesOnDevice()) {
  if (overlap && !queued_) thread_ = std::thread([this] { Loop(); });
}

GradientSync::~GradientSync() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

absl::Status GradientSync::Sum(int64_t offset, int64_t count) {
  for (int64_t done = 0; done < count; done += kBucketFloats) {
    float* bucket = grads_ + offset + done;
    const int64_t n = std::min(kBucketFloats, count - done);
    const absl::Status s =
        queued_ ? comm_.QueueAllReduceSum(bucket, n) : comm_.AllReduceSum(bucket, n);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

void GradientSync::Post(int64_t offset, int64_t count) {
  if (queued_) {  // on the caller's (the backward's) thread: queuing returns at once
    std::lock_guard<std::mutex> lock(mu_);
    done_.emplace_back(offset, count);
    // After a failure the gang is broken: what is left is dropped, not queued.
    if (status_.ok()) status_ = Sum(offset, count);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_.emplace_back(offset, count);
    if (thread_.joinable()) {
      queue_.emplace_back(offset, count);
      ++pending_;
    }
  }
  cv_.notify_all();
}

void GradientSync::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (stop_) return;
    const auto [offset, count] = queue_.front();
    queue_.pop_front();
    const bool failed = !status_.ok();
    lock.unlock();
    // After a failure the gang is broken: what is left is dropped, not summed.
    absl::Status s = failed ? absl::OkStatus() : Sum(offset, count);
    lock.lock();
    if (status_.ok()) status_ = std::move(s);
    --pending_;
    cv_.notify_all();
  }
}

absl::Status GradientSync::Finish() {
  std::vector<std::pair<int64_t, int64_t>> posted;
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return pending_ == 0; });
    if (!status_.ok()) return status_;
    posted = done_;
    if (!thread_.joinable() && !queued_) posted.clear();  // nothing summed yet: all below
  }
  // The complement of the summed ranges, in ascending order, in buckets.
  std::sort(posted.begin(), posted.end());
  int64_t at = 0;
  posted.emplace_back(n_, 0);
  for (const auto& [offset, count] : posted) {
    if (offset > at) {
      if (absl::Status s = Sum(at, offset - at); !s.ok()) return s;
    }
    at = std::max(at, offset + count);
  }
  return queued_ ? comm_.WaitQueued() : absl::OkStatus();
}

}  // namespace parity::kernels
