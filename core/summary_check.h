// Whether a run's summary is the run that was planned: the one rule that decides whether an exit 0
// counts as a result. The worker applies it before it reports a success; the scheduler's store
// applies it again to every success it records (the in-memory store through this function, the
// PostgreSQL store in server/sql/complete_runs_success.sql, both held to one contract suite), so
// that no client — a worker of another version, a buggy one or a forged call — records a result
// the plan did not ask for.
#pragma once

#include <cstdint>
#include <string>

#include "parity/v1/run.pb.h"

namespace parity::core {

// Relative tolerance between the FLOPs per token the engine counted and the planned M.
inline constexpr double kFlopsPerTokenTolerance = 0.01;

// Empty when `summary` matches the plan of `spec`: steps and tokens equal to the planned ones
// (where planned: > 0), finite training and validation BPC, counted FLOPs per token within 1% of
// M. Otherwise each disagreement, "; "-separated, e.g. "steps 10, planned 200". An attempt that
// resumed from a checkpoint at or past the last step (`resumed_from_step`) trains nothing and may
// count no FLOPs (measured 0).
std::string SummaryMismatch(const v1::RunSpec& spec, const v1::RunSummary& summary,
                            uint64_t resumed_from_step);

// A summary that matches the plan of `spec`, with these BPCs: what an honest engine reports. For
// tests and load generators that complete runs without training them.
v1::RunSummary PlannedSummary(const v1::RunSpec& spec, double final_val_bpc,
                              double final_train_bpc);

}  // namespace parity::core
