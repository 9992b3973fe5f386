// Which run states end a run and which hold a lease: what the watch streams and their feeds ask
// of the events they pass on.
#pragma once

#include "parity/v1/run.pb.h"

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

}  // namespace parity::server
