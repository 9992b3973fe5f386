// SweepEventsObserver: tells every replica's watch feeds that a sweep's runs changed, without a
// NOTIFY inside the transactions that changed them (pg_notifier.h says why).
//
// It sits between the scheduling units and their observer (the metrics): each lease and
// completion is passed on, and its sweep id handed to `publish` — the server's PgNotifier, whose
// batched NOTIFY parity_sweep_events reaches each replica's PgListener and so
// SweepsService::WakeWatchers. Changes it does not see (a run's first heartbeat, a cancellation,
// the reaper's requeues) reach the feeds at their next poll (watch_poll_interval).
#pragma once

#include <functional>
#include <string>
#include <utility>

#include "server/scheduling/scheduler_observer.h"

namespace parity::server {

class SweepEventsObserver final : public SchedulerObserver {
 public:
  // `inner` may be null; `publish` must be quick and thread-safe (it is called on RPC threads).
  SweepEventsObserver(SchedulerObserver* inner,
                      std::function<void(const std::string& sweep_id)> publish)
      : inner_(inner), publish_(std::move(publish)) {}

  void OnSweepSubmitted(const v1::Sweep& sweep, bool deduplicated) override {
    if (inner_ != nullptr) inner_->OnSweepSubmitted(sweep, deduplicated);
  }
  void OnRunLeased(const v1::Run& run, absl::Duration waited) override {
    if (inner_ != nullptr) inner_->OnRunLeased(run, waited);
    publish_(run.sweep_id());
  }
  void OnMetricsStored(const MetricsAppendResult& result) override {
    if (inner_ != nullptr) inner_->OnMetricsStored(result);
  }
  void OnRunCompleted(const v1::Run& run) override {
    if (inner_ != nullptr) inner_->OnRunCompleted(run);
    publish_(run.sweep_id());
  }
  void OnLeasesReaped(const ReapResult& result) override {
    if (inner_ != nullptr) inner_->OnLeasesReaped(result);
  }
  void OnReapFailed(const absl::Status& status) override {
    if (inner_ != nullptr) inner_->OnReapFailed(status);
  }
  void OnRetentionApplied(const RetentionResult& result) override {
    if (inner_ != nullptr) inner_->OnRetentionApplied(result);
  }

 private:
  SchedulerObserver* const inner_;
  const std::function<void(const std::string&)> publish_;
};

}  // namespace parity::server
