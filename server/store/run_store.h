// RunStore: the scheduler's durable state as domain operations (not a key-value blob), in five
// interfaces by job:
//   SweepCatalog       (sweep_catalog.h)        sweeps, their runs and the workers: submit,
//                                               cancel, delete, list;
//   RunQueue           (run_queue.h)            the lease queue that workers drive, the reaper;
//   ReadModels         (read_models.h)          results, event feeds, counts, metric samples;
//   TelemetryRetention (telemetry_retention.h)  old telemetry thinned, pruned, forgotten;
//   AccessTokens       (access_tokens.h)        bearer tokens (hashed) and signing keys.
// RunStore is all five, what the Scheduler holds. Both implementations, PostgresRunStore
// (store/postgres/) and MemoryRunStore (store/memory/), implement all five.
//
// Errors are absl::Status, chosen by what the caller should do:
//   NOT_FOUND            the sweep, run or worker does not exist (payload: ResourceInfo);
//   FAILED_PRECONDITION  a stale fencing token or a lost lease (payload: PreconditionFailure);
//   ALREADY_EXISTS       an idempotency key reused with a different spec;
//   ABORTED              a lost race (serialization failure, deadlock): re-read and retry;
//   UNAVAILABLE          the database cannot be reached: retry with backoff.
// Every method is one transaction. Implementations (store/postgres/, store/memory/) must be safe
// to call from many threads at once; tests/scheduler/store_contract_test.h,
// read_models_contract_test.h and access_contract_test.h are the contract both pass. The fencing
// rule is CheckLeaseEpoch (store_errors.h), which both call.
#pragma once

#include "server/store/access_tokens.h"
#include "server/store/read_models.h"
#include "server/store/run_queue.h"
#include "server/store/sweep_catalog.h"
#include "server/store/telemetry_retention.h"

namespace parity::server {

class RunStore : public SweepCatalog,
                 public RunQueue,
                 public ReadModels,
                 public TelemetryRetention,
                 public AccessTokens {};

}  // namespace parity::server
