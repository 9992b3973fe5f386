// Built where cuDNN is not found: the bf16 attention ops' cuDNN entry points decline every shape,
// so attention runs on the tensor-core kernels (flash_tc.h), and the device state has no cuDNN
// state to hold.
#include "kernels/cuda/backend_state.h"
#include "kernels/cuda/cudnn_attention.h"

namespace parity::kernels::cuda {

struct SdpaState {};
void SdpaStateDeleter::operator()(SdpaState* state) const { delete state; }

bool CudnnSdpaForward(const OpContext&, const AttentionShape&, Bf16*, float*, const Bf16*) {
  return false;
}
bool CudnnSdpaBackward(const OpContext&, const AttentionShape&, Bf16*, const Bf16*, const Bf16*,
                       const float*, const Bf16*) {
  return false;
}

}  // namespace parity::kernels::cuda
