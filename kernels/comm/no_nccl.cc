// MakeNcclCommunicator where kernels/cuda/ is not built: there is no CUDA device to run on either.
#include "absl/status/status.h"
#include "kernels/comm/communicator.h"

namespace parity::kernels {

absl::StatusOr<std::unique_ptr<Communicator>> MakeNcclCommunicator(const NcclSetup&, Device&) {
  return absl::UnimplementedError(
      "--device: this parity-train was built without CUDA, so it has no NCCL communicator");
}

}  // namespace parity::kernels
