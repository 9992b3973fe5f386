// The bytes a device's buffers hold, shared by the device and its buffers (backends' Allocate
// and buffer destructors): in all, live now, and the most live at once. Used from the one thread
// that drives the model, as Allocate is. Shared ownership: a buffer may outlive its device (a test,
// a model torn down after it) and then returns its bytes to counts nobody reads any more.
#pragma once

#include <algorithm>
#include <cstddef>

namespace parity::kernels {

struct MemoryCounts {
  size_t allocated = 0;  // requested through Allocate, freed or not
  size_t live = 0;       // held by buffers not yet destroyed
  size_t peak = 0;       // the most `live` has been

  void Allocated(size_t bytes) {
    allocated += bytes;
    live += bytes;
    peak = std::max(peak, live);
  }
  void Freed(size_t bytes) { live -= bytes; }
};

}  // namespace parity::kernels
