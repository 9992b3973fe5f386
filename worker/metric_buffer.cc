#include "worker/metric_buffer.h"

#include <algorithm>

namespace parity::worker {

void MetricBuffer::Add(parity::v1::MetricPoint point, absl::Time now) {
  absl::MutexLock lock(&mu_);
  latest_step_ = std::max<uint64_t>(latest_step_, point.step());
  pending_.push_back(Entry{std::move(point), now});
  while (pending_.size() > options_.max_points) {
    pending_.pop_front();
    ++dropped_;
  }
}

bool MetricBuffer::FlushDue(absl::Time now) const {
  absl::MutexLock lock(&mu_);
  if (pending_.empty()) return false;
  return pending_.size() >= options_.batch_points ||
         now - pending_.front().added >= options_.max_delay;
}

std::vector<parity::v1::MetricPoint> MetricBuffer::PeekBatch() const {
  absl::MutexLock lock(&mu_);
  const size_t n = std::min(pending_.size(), options_.batch_points);
  std::vector<parity::v1::MetricPoint> batch;
  batch.reserve(n);
  for (size_t i = 0; i < n; ++i) batch.push_back(pending_[i].point);
  return batch;
}

void MetricBuffer::Acknowledge(size_t count) {
  absl::MutexLock lock(&mu_);
  count = std::min(count, pending_.size());
  pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(count));
}

size_t MetricBuffer::size() const {
  absl::MutexLock lock(&mu_);
  return pending_.size();
}

uint64_t MetricBuffer::dropped() const {
  absl::MutexLock lock(&mu_);
  return dropped_;
}

uint64_t MetricBuffer::latest_step() const {
  absl::MutexLock lock(&mu_);
  return latest_step_;
}

std::optional<uint64_t> MetricBuffer::OldestPendingStep() const {
  absl::MutexLock lock(&mu_);
  // Points arrive in step order (one engine, steps increasing) and leave from the front.
  if (pending_.empty()) return std::nullopt;
  return pending_.front().point.step();
}

}  // namespace parity::worker
