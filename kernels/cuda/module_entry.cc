// libparity_cuda.so's entry (backend/cuda_module.h): the CUDA backend's two factories. Everything
// else in the module is hidden (the target's visibility preset), so its symbols cannot clash with
// the engine's, whose own MakeCudaDevice is the loader.
#include "kernels/backend/cuda_module.h"

extern "C" __attribute__((visibility("default"))) const parity::kernels::CudaModuleApi*
parity_cuda_api_v1() {
  static const parity::kernels::CudaModuleApi api{
      .version = parity::kernels::kCudaModuleApiVersion,
      .abi = PARITY_CUDA_ABI,
      .make_device = &parity::kernels::MakeCudaDevice,
      .make_nccl_communicator = &parity::kernels::MakeNcclCommunicator,
  };
  return &api;
}
