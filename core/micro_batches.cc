#include "core/micro_batches.h"

#include <cstddef>

namespace parity::core {
namespace {

// The fewest micro-batches of at most `max_micro` (both positive).
int64_t MicroBatchCount(int64_t sequences, int64_t max_micro) {
  return (sequences + max_micro - 1) / max_micro;
}

}  // namespace

std::vector<int64_t> SplitIntoMicroBatches(int64_t sequences, int64_t max_micro) {
  if (sequences <= 0 || max_micro <= 0) return {};
  const int64_t count = MicroBatchCount(sequences, max_micro);
  const int64_t base = sequences / count, larger = sequences % count;
  std::vector<int64_t> sizes(static_cast<size_t>(count), base);
  for (int64_t i = 0; i < larger; ++i) ++sizes[static_cast<size_t>(i)];
  return sizes;
}

int64_t LargestMicroBatch(int64_t sequences, int64_t max_micro) {
  if (sequences <= 0 || max_micro <= 0) return 0;
  return MicroBatchCount(sequences, MicroBatchCount(sequences, max_micro));
}

}  // namespace parity::core
