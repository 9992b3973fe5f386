// SchedulerUnderTest: the scheduling units over one store — SweepsService, LeasesService with its
// LeaseSecrets, Upkeep — wired the way SchedulerServer wires them, behind one object so that a
// test calls each call where the gRPC adapters send it (SubmitSweep to the sweeps service,
// LeaseRun to the leases service, a reaper pass to the upkeep) without naming the unit.
#pragma once

#include <string>
#include <utility>

#include "server/scheduling/lease_secrets.h"
#include "server/scheduling/leases_service.h"
#include "server/scheduling/sweeps_service.h"
#include "server/scheduling/upkeep.h"
#include "server/store/run_store.h"

namespace parity::server::testing {

// What both scheduler fixtures run with: retries due within milliseconds, a 30 s lease, quick
// idle and watch polls.
inline SchedulerOptions FastSchedulerOptions() {
  SchedulerOptions options;
  options.retry_policy = RetryPolicy{.backoff_base = absl::Milliseconds(1),
                                     .backoff_max = absl::Milliseconds(10),
                                     .preemption_backoff_base = absl::Milliseconds(1),
                                     .preemption_backoff_max = absl::Milliseconds(10)};
  options.lease_ttl = absl::Seconds(30);
  options.idle_poll_interval = absl::Milliseconds(50);
  options.watch_poll_interval = absl::Milliseconds(20);
  return options;
}

namespace internal {
// Constructed before the services that hold a reference to it (base-from-member).
struct WithLeaseSecrets {
  explicit WithLeaseSecrets(AccessTokens& tokens) : lease_secrets(tokens) {}
  LeaseSecrets lease_secrets;
};
}  // namespace internal

class SchedulerUnderTest : private internal::WithLeaseSecrets,
                           public SweepsService,
                           public LeasesService,
                           public Upkeep {
 public:
  // `store`, `work_signal`, `clock` and `observer` (may be null) must outlive this object.
  // `gangs` (may be null: no gangs) too.
  SchedulerUnderTest(RunStore& store, WorkSignal& work_signal, const Clock& clock, Planner planner,
                     const SchedulerOptions& options, SchedulerObserver* observer = nullptr,
                     GangQueue* gangs = nullptr)
      : WithLeaseSecrets(store),
        SweepsService(store, store, work_signal, clock, std::move(planner), options, observer),
        LeasesService(
            store, [&store](const std::string& run_id) { return store.GetRun(run_id); },
            lease_secrets, work_signal, clock, options, observer, gangs),
        Upkeep(store, store, work_signal, options, observer) {}
};

}  // namespace parity::server::testing
