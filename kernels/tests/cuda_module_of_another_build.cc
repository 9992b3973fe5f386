// A stand-in for libparity_cuda.so from another build: the right entry and API version, another
// header digest. cuda_module_test points $PARITY_CUDA_MODULE at it and expects the refusal.
#include "kernels/backend/cuda_module.h"

extern "C" __attribute__((visibility("default"))) const parity::kernels::CudaModuleApi*
parity_cuda_api_v1() {
  static const parity::kernels::CudaModuleApi api{
      .version = parity::kernels::kCudaModuleApiVersion,
      .abi = "0000000000000000",
      .make_device = nullptr,
      .make_nccl_communicator = nullptr,
  };
  return &api;
}
