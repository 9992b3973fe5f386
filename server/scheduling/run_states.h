// Which run states end a run and which hold a lease, and a run event as the watch streams send
// it: what the streams (sweeps_watch.cc) and their feeds (sweep_feed_poller.cc) share.
#pragma once

#include "core/proto_time.h"
#include "parity/v1/run.pb.h"
#include "server/store/read_models.h"

namespace parity::server {

// SUCCEEDED, FAILED or CANCELLED: nothing follows.
inline bool IsFinalRunState(v1::RunState state) {
  return state == v1::RUN_STATE_SUCCEEDED || state == v1::RUN_STATE_FAILED ||
         state == v1::RUN_STATE_CANCELLED;
}

// LEASED or RUNNING: a worker holds it and may report metrics.
inline bool IsLiveRunState(v1::RunState state) {
  return state == v1::RUN_STATE_LEASED || state == v1::RUN_STATE_RUNNING;
}

// A stored run event as a stream's state change.
inline v1::RunStateChange StateChangeOf(const RunEvent& event) {
  v1::RunStateChange change;
  change.set_run_id(event.run_id);
  change.set_from_state(event.from_state);
  change.set_to_state(event.to_state);
  change.set_attempt(event.attempt);
  change.set_reason(event.reason);
  *change.mutable_time() = ToProtoTime(event.time);
  return change;
}

}  // namespace parity::server
