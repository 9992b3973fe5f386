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

absl::StatusOr<RetentionResult> Upkeep::ApplyRetention(const RetentionPolicy& policy,
                                                       const std::optional<LeaderFence>& fence) {
  PARITY_ASSIGN_OR_RETURN(
      const RetentionResult result,
      fence ? retention_.ApplyRetentionFenced(policy, *fence) : retention_.ApplyRetention(policy));
  if (observer_ != nullptr) observer_->OnRetentionApplied(result);
  return result;
}

absl::StatusOr<ReapResult> Upkeep::ReapExpiredLeases(ReapPass pass,
                                                     const std::optional<LeaderFence>& fence) {
  ReapResult total;
  const auto failed = [&](const absl::Status& status) {
    outage_known_.store(true);  // the next pass that succeeds begins the grace
    if (observer_ != nullptr) observer_->OnReapFailed(status);
    return status;
  };
  const absl::Duration ttl = options_.lease_ttl;
  const ReaperPass record{
      .outage = pass == ReapPass::kStartUp || outage_known_.load(),
      .max_silence =
          options_.outage_silence > absl::ZeroDuration() ? options_.outage_silence : ttl / 3,
      .lease_ttl = ttl,
      .grace = options_.outage_grace > absl::ZeroDuration() ? options_.outage_grace : 2 * ttl};
  absl::StatusOr<ServiceLiveness> liveness =
      fence ? queue_.RecordReaperPassFenced(record, *fence) : queue_.RecordReaperPass(record);
  if (!liveness.ok()) return failed(liveness.status());
  outage_known_.store(false);
  total.liveness = *liveness;
  while (true) {
    absl::StatusOr<ReapResult> batch =
        fence ? queue_.ReapExpiredLeasesFenced(options_.reap_batch, *fence)
              : queue_.ReapExpiredLeases(options_.reap_batch);
    if (!batch.ok()) return failed(batch.status());
    total.requeued += batch->requeued;
    total.failed += batch->failed;
    total.cancelled += batch->cancelled;
    total.outage_requeued += batch->outage_requeued;
    if (batch->requeued + batch->failed + batch->cancelled + batch->outage_requeued <
        options_.reap_batch) {
      break;
    }
  }
  if (total.requeued + total.outage_requeued > 0) work_signal_.Notify();
  if (observer_ != nullptr &&
      (total.requeued + total.failed + total.cancelled + total.outage_requeued > 0 ||
       total.liveness.outage)) {
    observer_->OnLeasesReaped(total);
  }
  return total;
}

}  // namespace parity::server
