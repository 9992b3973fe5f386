// The CUDA backend as a loadable module, libparity_cuda.so (kernels/cuda/ plus module_entry.cc),
// so that the engine's binaries do not link the CUDA libraries: a CPU run never loads them (the
// CUDA runtime, cuBLASLt, cuDNN and NCCL added ≈ 150 MiB of resident memory to every process
// before any work, bench/engine/RESULTS.md), and a binary built where nvcc exists still starts
// on a machine without them. The first MakeCudaDevice or MakeNcclCommunicator loads the module
// (backend/cuda_loader.cc) from $PARITY_CUDA_MODULE when set, else libparity_cuda.so beside the
// executable (binaries copied out of the build tree together), else the build tree's module.
//
// The module and the engine are built together from one tree with one compiler, so the table
// passes C++ types; `abi` (a digest of the headers defining them, kernels/CMakeLists.txt) refuses
// a module from a build whose types differ.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "kernels/backend/device.h"
#include "kernels/comm/communicator.h"

namespace parity::kernels {

inline constexpr int kCudaModuleApiVersion = 1;
inline constexpr const char* kCudaModuleEntry = "parity_cuda_api_v1";
inline constexpr const char* kCudaModuleFile = "libparity_cuda.so";

struct CudaModuleApi {
  int version = kCudaModuleApiVersion;
  const char* abi = nullptr;  // PARITY_CUDA_ABI of the module's build
  absl::StatusOr<std::unique_ptr<Device>> (*make_device)(const CudaDeviceOptions&) = nullptr;
  absl::StatusOr<std::unique_ptr<Communicator>> (*make_nccl_communicator)(const NcclSetup&,
                                                                          Device&) = nullptr;
};

}  // namespace parity::kernels

// The module's one exported symbol (kCudaModuleEntry).
extern "C" const parity::kernels::CudaModuleApi* parity_cuda_api_v1();
