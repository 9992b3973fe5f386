// MakeCudaDevice in a build without the CUDA backend (no nvcc, or kernels/cuda/ absent): the
// engine links and runs on the CPU, and asking for a GPU says why it cannot have one.
#include "absl/status/status.h"
#include "kernels/backend/device.h"

namespace parity::kernels {

absl::StatusOr<std::unique_ptr<Device>> MakeCudaDevice(const CudaDeviceOptions&) {
  return absl::UnimplementedError("built without CUDA");
}

}  // namespace parity::kernels
