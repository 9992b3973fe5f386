// How a rank's share of an optimizer step is cut into micro-batches: the one rule the planner
// (core/gpu_sizing.cc) and the engine (kernels/train/session.cc) share.
//
// The Step Law's batch rarely has a convenient divisor (the 2B study's ranks take 43, 67, 149…
// sequences a step: primes), so a micro-batch that had to divide the share would often be a
// single sequence, starving the GEMMs and, in an MoE layer, leaving each expert a handful of
// rows. Instead a share of P sequences with a cap of m is cut into the fewest micro-batches that
// respect the cap, n = ⌈P/m⌉, as equal as can be: the first P mod n hold ⌈P/n⌉ sequences, the rest
// ⌊P/n⌋. A cap that divides P gives P/m micro-batches of m, as before. The gradient stays the
// step's token mean (each micro-batch's cross-entropy is scaled by 1/(tokens in the step), so
// uneven micro-batches sum to the same gradient); only the per-micro-batch MoE balance losses
// are weighted by their micro-batch's share of the step's sequences.
#pragma once

#include <cstdint>
#include <vector>

namespace parity::core {

// The sizes (sequences) of the micro-batches `sequences` is cut into with at most `max_micro`
// each, larger first; empty when either is not positive.
std::vector<int64_t> SplitIntoMicroBatches(int64_t sequences, int64_t max_micro);

// The largest micro-batch SplitIntoMicroBatches(sequences, max_micro) makes (≤ max_micro, and
// ≤ sequences): what a resolved spec records, since the memory it needs is the largest's. 0 when
// either is not positive.
int64_t LargestMicroBatch(int64_t sequences, int64_t max_micro);

}  // namespace parity::core
