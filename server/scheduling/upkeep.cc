#include "server/scheduling/upkeep.h"

#include <utility>

#include "core/status_macros.h"

namespace parity::server {

Upkeep::Upkeep(RunQueue& queue, TelemetryRetention& retention, WorkSignal& work_signal,
               SchedulerOptions options, SchedulerObserver* observer)
    : queue_(queue),
      retention_(retention),
      work_signal_(work_signal),
      options_(std::move(options)),
      observer_(observer) {}

absl::StatusOr<RetentionResult> Upkeep::ApplyRetention(const RetentionPolicy& policy) {
  PARITY_ASSIGN_OR_RETURN(const RetentionResult result, retention_.ApplyRetention(policy));
  if (observer_ != nullptr) observer_->OnRetentionApplied(result);
  return result;
}

absl::StatusOr<ReapResult> Upkeep::ReapExpiredLeases() {
  ReapResult total;
  const auto failed = [&](const absl::Status& status) {
    leases_need_grace_.store(true);
    if (observer_ != nullptr) observer_->OnReapFailed(status);
    return status;
  };
  if (leases_need_grace_.load()) {
    absl::StatusOr<int> extended = queue_.ExtendLiveLeases(options_.lease_ttl);
    if (!extended.ok()) return failed(extended.status());
    total.extended = *extended;
    leases_need_grace_.store(false);
  }
  while (true) {
    absl::StatusOr<ReapResult> batch = queue_.ReapExpiredLeases(options_.reap_batch);
    if (!batch.ok()) return failed(batch.status());
    total.requeued += batch->requeued;
    total.failed += batch->failed;
    total.cancelled += batch->cancelled;
    if (batch->requeued + batch->failed + batch->cancelled < options_.reap_batch) break;
  }
  if (total.requeued > 0) work_signal_.Notify();
  if (observer_ != nullptr &&
      (total.requeued + total.failed + total.cancelled + total.extended) > 0) {
    observer_->OnLeasesReaped(total);
  }
  return total;
}

}  // namespace parity::server
