// MemoryRunStore's TelemetryRetention, by apply_telemetry_retention.sql's rules: old ended sweeps'
// curves thinned to every k-th training point plus the evaluations and the last point, their
// events cut to each run's last, long-unseen workers without a live lease forgotten.
#include <algorithm>
#include <map>

#include "server/store/memory/memory_run_store.h"

namespace parity::server {
namespace {

bool IsLive(v1::RunState state) {
  return state == v1::RUN_STATE_LEASED || state == v1::RUN_STATE_RUNNING;
}

}  // namespace

absl::StatusOr<RetentionResult> MemoryRunStore::ApplyRetention(const RetentionPolicy& policy) {
  absl::MutexLock lock(&mu_);
  const absl::Time now = now_();
  const uint64_t kept = std::max<uint32_t>(policy.thinned_points, 1);
  RetentionResult result;
  // Oldest-ended first, as PostgreSQL takes them.
  std::vector<SweepRow*> ended;
  for (auto& [id, sweep] : sweeps_) {
    if (sweep.ended) ended.push_back(&sweep);
  }
  std::sort(ended.begin(), ended.end(),
            [](const SweepRow* a, const SweepRow* b) { return *a->ended < *b->ended; });
  for (SweepRow* sweep : ended) {
    if (!sweep->metrics_thinned && *sweep->ended < now - policy.metrics_full &&
        result.sweeps_thinned < policy.sweeps_per_pass) {
      for (const std::string& run_id : sweep->run_ids) {
        auto& metrics = runs_.at(run_id).metrics;
        const uint64_t n = metrics.size();
        if (n <= kept) continue;
        const uint64_t every = (n + kept - 1) / kept;
        uint64_t rank = 0;
        for (auto it = metrics.begin(); it != metrics.end(); ++rank) {
          const bool keep = it->second.first.has_val_bpc() || rank + 1 == n || rank % every == 0;
          if (keep) {
            ++it;
          } else {
            it = metrics.erase(it);
            ++result.points_deleted;
          }
        }
      }
      sweep->metrics_thinned = true;
      ++result.sweeps_thinned;
    }
    if (!sweep->events_pruned && *sweep->ended < now - policy.events &&
        result.sweeps_pruned < policy.sweeps_per_pass) {
      // As apply_telemetry_retention: each run keeps only its last event (how it ended).
      std::map<std::string, int64_t> last_event;
      for (const auto& [id, row] : events_) {
        if (row.sweep_id == sweep->sweep_id) last_event[row.event.run_id] = id;
      }
      for (auto it = events_.begin(); it != events_.end();) {
        const EventRow& row = it->second;
        if (row.sweep_id == sweep->sweep_id && last_event.at(row.event.run_id) != it->first) {
          it = events_.erase(it);
          ++result.events_deleted;
        } else {
          ++it;
        }
      }
      sweep->events_pruned = true;
      ++result.sweeps_pruned;
    }
  }
  for (auto it = workers_.begin(); it != workers_.end();) {
    const bool holds_lease = std::any_of(runs_.begin(), runs_.end(), [&](const auto& entry) {
      return IsLive(entry.second.run.state()) && entry.second.lease_owner == it->first;
    });
    if (it->second.last_seen < now - policy.workers && !holds_lease) {
      it = workers_.erase(it);
      ++result.workers_deleted;
    } else {
      ++it;
    }
  }
  return result;
}

}  // namespace parity::server
