// `parity compare SWEEP_A SWEEP_B`: the matching cells of two sweeps side by side. A cell is one
// group of a sweep over its seeds: role, budget, data variant and the rest of the grid point
// (the MoE point's label and ablation keys, the baseline or dense size, hyperparameter values),
// so a rerun of a study with another engine, corpus or seed set lines up with the first.
// Runs planned once for several groups (RunSpec.also_serves) count in each. Pure: the command
// fetches the runs, this joins and renders them.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "parity/v1/run.pb.h"

namespace parity::cli {

// One cell present in both sweeps: mean final validation BPC over its SUCCEEDED runs (seeds).
struct ComparedCell {
  std::string cell;    // "C1 unique moe=ra20", the key shown
  int finished_a = 0;  // succeeded runs of A in the cell (count)
  int finished_b = 0;  // (count)
  double bpc_a = 0;    // mean final validation BPC of A (bits per byte); valid if finished_a > 0
  double bpc_b = 0;    // (bits per byte); valid if finished_b > 0
};

struct SweepComparison {
  std::vector<ComparedCell> matched;  // in A's grid order
  std::vector<std::string> only_a;    // cells of A that B lacks, in A's order
  std::vector<std::string> only_b;    // cells of B that A lacks, in B's order
};

// The cell key of a run's group: budget, data variant, then the grid point's other keys sorted
// (seed left out), e.g. "C1 unique moe=ra20" or "C2 unique baseline=dense-1C".
SweepComparison CompareSweeps(const std::vector<parity::v1::Run>& a,
                              const std::vector<parity::v1::Run>& b);

// The table (cell, runs and BPC of each, ΔBPC = B − A) and the unmatched cells.
std::string FormatComparison(const SweepComparison& comparison, std::string_view name_a,
                             std::string_view name_b);

}  // namespace parity::cli
