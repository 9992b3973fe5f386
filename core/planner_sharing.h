// Planning each run once. Groups of a sweep often need the very same run: dense 2C of budget C1
// and dense 1C of C2 = 2·C1 train the same model on the same data for the same tokens; the 1C
// baseline under unique data and under strict reuse of its own D see the same D̂ for one epoch; the
// frontier's 1.0× size is the dense 1C baseline. The planner keeps the first (grid order) and
// records the others in its `also_serves`, so the analysis finds the run in every group without
// training it twice.
#pragma once

#include <string>
#include <vector>

#include "parity/v1/sweep.pb.h"

namespace parity::core {

// What makes two planned runs the same training: the model's shape, the resolved training
// (hyperparameters, seed, steps), the data (corpus, validation split, D̂, epochs), D and the
// resources; not the group they were planned for (name, role, budget, multiple, variant, grid
// point, reuse mode label, targets). Deterministic bytes.
std::string RunIdentity(const parity::v1::RunSpec& run);

// Merges runs with equal RunIdentity into the first: each later one becomes a GroupRef in the
// first's also_serves (its budget, variant, role, multiple, grid point and name) and is removed.
// Order is otherwise kept.
void MergeIdenticalRuns(std::vector<parity::v1::RunSpec>& runs);

// The groups a run serves: its own first, then also_serves.
std::vector<parity::v1::GroupRef> GroupsOf(const parity::v1::RunSpec& run);

}  // namespace parity::core
