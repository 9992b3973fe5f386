#include "core/micro_batches.h"

#include <cstddef>

namespace parity::core {

std::vector<int64_t> SplitIntoMicroBatches(int64_t sequences, int64_t max_micro) {
  if (sequences <= 0 || max_micro <= 0) return {};
  const int64_t count = (sequences + max_micro - 1) / max_micro;
  const int64_t base = sequences / count, larger = sequences % count;
  std::vector<int64_t> sizes(static_cast<size_t>(count), base);
  for (int64_t i = 0; i < larger; ++i) ++sizes[static_cast<size_t>(i)];
  return sizes;
}

int64_t LargestMicroBatch(int64_t sequences, int64_t max_micro) {
  if (sequences <= 0 || max_micro <= 0) return 0;
  const int64_t count = (sequences + max_micro - 1) / max_micro;
  return (sequences + count - 1) / count;
}

}  // namespace parity::core
