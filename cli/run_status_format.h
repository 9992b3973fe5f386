// `parity status RUN`: one run's state, progress, last failure and memory (once it has a summary),
// and for a gang (resources.ranks > 1) where its ranks run and how far its rendezvous got
// (GetRunResponse.gang).
// Pure: the caller passes the time to measure deadlines against, so tests fix it.
#pragma once

#include <string>

#include "absl/time/time.h"
#include "parity/v1/sweep_service.pb.h"

namespace parity::cli {

// "3.2 s", "4m 10s", "2h 5m": a span as a person reads it (negative spans as their magnitude).
std::string SpanText(absl::Duration span);

// The rendezvous in one line, as of `now`:
//   "released 3.2 s after placement"
//   "waiting: 2 of 4 checked in, deadline in 4m 10s"
//   "waiting: 1 of 2 checked in, deadline passed 12 s ago (the scheduler fails and requeues it)"
std::string RendezvousText(const parity::v1::RunGang& gang, absl::Time now);

// A finished run's memory, "" when its summary reports none:
//   "memory: host peak 3 GB; device 61.2 GB of 58 GB estimated (+5.5%)"
// the host's peak RSS, the device's high-water mark and the planner's estimate for the run's
// config (RunSummary fields 7, 11, 12); each part only where the summary has it.
std::string MemoryText(const parity::v1::RunSummary& summary);

// The run's header lines (with MemoryText for a run that has a summary), then for a gang its
// placement: hosts, epoch, the rendezvous line and one row per rank (rank, worker, host, devices,
// checked in). A PENDING gang says it waits to be placed; a run of one rank prints no gang part.
std::string FormatRunStatus(const parity::v1::GetRunResponse& response, absl::Time now);

}  // namespace parity::cli
