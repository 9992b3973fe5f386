// What the scheduling units are told at construction: SchedulerOptions (one value struct, so a
// server or a test sets the scheduler's limits in one place; each unit reads its own fields) and
// the Planner that SweepsService plans specs with.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "parity/v1/run.pb.h"
#include "parity/v1/sweep.pb.h"
#include "server/scheduling/retry_policy.h"

namespace parity::server {

struct SchedulerOptions {
  // --- LeasesService (and Upkeep's outage grace: one TTL) ---
  absl::Duration lease_ttl = absl::Seconds(60);
  absl::Duration heartbeat_interval = absl::Seconds(15);
  // LeaseRun waits at most this long for work, whatever the worker asks.
  absl::Duration max_lease_wait = absl::Seconds(60);
  // Idle long polls look for work this often even without a wake-up (a missed NOTIFY, a retry
  // delay running out).
  absl::Duration idle_poll_interval = absl::Seconds(1);
  // --- SweepsService's watch streams ---
  // Watch feeds poll the database at least this often, and streams end UNAVAILABLE
  // ("reconnect") after this long: a server-side deadline, so that no stream holds a thread and
  // a watch slot for ever.
  absl::Duration watch_poll_interval = absl::Milliseconds(200);
  absl::Duration max_watch_duration = absl::Hours(1);
  // Watch streams ask WatchControl::authorized this often, so that a stream whose token was
  // revoked (or expired) ends UNAUTHENTICATED within about this long, not at its lifetime.
  absl::Duration watch_reauth_interval = absl::Seconds(2);
  // A sweep's watch streams share one poller per replica (sweep_feed.h), which polls every
  // watch_poll_interval or sooner when woken by a run event (NOTIFY parity_sweep_events). A
  // stream further behind its feed than this many messages ends UNAVAILABLE ("reconnect"); a
  // feed stays this long after its last stream left, for a reconnect to find it warm.
  size_t watch_buffer_messages = 50000;
  absl::Duration watch_feed_linger = absl::Seconds(10);
  // Analyses kept (analysis_cache.h): one per sweep and evaluation set being looked at, each up
  // to a few MiB at 10,000 runs.
  size_t analysis_cache_entries = 16;
  // --- LeasesService ---
  // How long a worker id's owner (the token name that registered it) is remembered here: the
  // ownership never changes while the worker is known, so this only bounds how long a worker
  // that telemetry retention forgot stays bound to its old name in this replica.
  absl::Duration worker_owner_cache_ttl = absl::Seconds(60);
  uint32_t max_metrics_batch = 4096;
  // LeaseRun and successful CompleteRun calls that arrive together reach the store as one batch
  // (RequestCombiner) of at most this many, with at most `store_batches_in_flight` batches of
  // each kind running at once. One: two lease batches at once contend for the same first runs
  // of the same sweeps (measured slower, with a p99 half again as long, on 2 cores).
  size_t max_store_batch = 64;
  int store_batches_in_flight = 1;
  // --- SweepsService ---
  uint32_t max_runs_per_sweep = 10000;
  // Limits per identity (Caller::name), checked at each submission: sweeps it owns that are
  // still ACTIVE, and their runs not yet ended. Admins are held to them too.
  uint32_t max_open_sweeps_per_owner = 100;
  uint64_t max_queued_runs_per_owner = 50000;
  // The highest SweepSpec.priority a non-admin may submit.
  int32_t max_priority = 100;
  // --- Upkeep ---
  int reap_batch = 500;
  // Outages (Upkeep::ReapExpiredLeases, RunQueue::RecordReaperPass): a silence of the reaper
  // longer than outage_silence (0 = lease_ttl / 3; the server takes at least 3 reaper intervals)
  // proves one; after one nothing is reaped for outage_grace (0 = 2 × lease_ttl: a TTL for the
  // holders' next heartbeat, another for their reconnects).
  absl::Duration outage_silence = absl::ZeroDuration();
  absl::Duration outage_grace = absl::ZeroDuration();
  // --- Gangs (runs with resources.ranks > 1; gang_leases.h) ---
  // Every rank must check in within this of the placement, or the gang is failed and requeued
  // (decided as a preemption: no attempt spent up to the retry policy's cap).
  absl::Duration gang_rendezvous_timeout = absl::Minutes(5);
  // A pending gang eligible this long that still cannot be placed reserves the waiting workers
  // it could use: they get no ordinary runs until it is placed (docs/operations.md).
  absl::Duration gang_reservation_after = absl::Minutes(2);
  // --- LeasesService: what a failed attempt does to its run (retry_policy.h) ---
  RetryPolicy retry_policy;
};

// Plans a spec into runs; parity::core::PlanSweep in production, a stub in tests.
using Planner = std::function<absl::StatusOr<std::vector<v1::RunSpec>>(const v1::SweepSpec&)>;

}  // namespace parity::server
