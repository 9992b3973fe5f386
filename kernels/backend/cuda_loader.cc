// MakeCudaDevice and MakeNcclCommunicator in a build with the CUDA backend: they load the module
// (backend/cuda_module.h says why and from where) on first use and forward to it. A module that
// cannot be loaded — its CUDA libraries missing on this machine — is FAILED_PRECONDITION naming
// what the loader said and the remedy, the same answer as a machine without a GPU.
#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/status_macros.h"
#include "kernels/backend/cuda_module.h"

#if !defined(PARITY_CUDA_MODULE_PATH) || !defined(PARITY_CUDA_ABI)
#error "PARITY_CUDA_MODULE_PATH, PARITY_CUDA_ABI: the build defines both (kernels/CMakeLists.txt)"
#endif

namespace parity::kernels {
namespace {

std::vector<std::string> Candidates() {
  if (const char* env = std::getenv("PARITY_CUDA_MODULE"); env != nullptr && *env != '\0') {
    return {env};
  }
  // An installed engine's own module first (copied out of the build tree together), then the
  // build tree's, for binaries run where they were built.
  std::vector<std::string> candidates;
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (!error) candidates.push_back((self.parent_path() / kCudaModuleFile).string());
  candidates.push_back(PARITY_CUDA_MODULE_PATH);
  return candidates;
}

// The module's table, or FAILED_PRECONDITION saying why there is none (loaded once per process).
absl::StatusOr<const CudaModuleApi*> LoadModule() {
  static std::once_flag once;
  static const CudaModuleApi* api = nullptr;
  static std::string load_error;
  std::call_once(once, [] {
    std::vector<std::string> failures;
    for (const std::string& candidate : Candidates()) {
      // RTLD_LOCAL: the CUDA libraries stay out of the global scope; a module that is there but
      // whose libraries are not fails here with the loader's message naming the missing one.
      void* module = ::dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (module == nullptr) {
        failures.push_back(::dlerror());
        continue;
      }
      using Entry = const CudaModuleApi* (*)();
      auto entry = reinterpret_cast<Entry>(::dlsym(module, kCudaModuleEntry));
      if (entry == nullptr) {
        failures.push_back(
            absl::StrCat(candidate, " is not the CUDA module (no ", kCudaModuleEntry, ")"));
        continue;
      }
      const CudaModuleApi* table = entry();
      if (table == nullptr || table->version != kCudaModuleApiVersion || table->abi == nullptr ||
          std::string_view(table->abi) != PARITY_CUDA_ABI) {
        failures.push_back(absl::StrCat(
            candidate, " is from another build (module API ",
            table == nullptr ? -1 : table->version, "/",
            table == nullptr || table->abi == nullptr ? "?" : table->abi, ", this engine's ",
            kCudaModuleApiVersion, "/", PARITY_CUDA_ABI, "): install the module built with it"));
        continue;
      }
      api = table;
      return;
    }
    load_error = absl::StrCat(
        "cannot load the CUDA backend module ", kCudaModuleFile, " (",
        absl::StrJoin(failures, "; "),
        "); the CUDA runtime, cuBLAS, cuDNN and NCCL libraries it links must be on the loader "
        "path (LD_LIBRARY_PATH), and the module beside the executable or named in "
        "$PARITY_CUDA_MODULE");
  });
  if (api == nullptr) return absl::FailedPreconditionError(load_error);
  return api;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Device>> MakeCudaDevice(const CudaDeviceOptions& options) {
  PARITY_ASSIGN_OR_RETURN(const CudaModuleApi* api, LoadModule());
  return api->make_device(options);
}

absl::StatusOr<std::unique_ptr<Communicator>> MakeNcclCommunicator(const NcclSetup& setup,
                                                                   Device& device) {
  PARITY_ASSIGN_OR_RETURN(const CudaModuleApi* api, LoadModule());
  return api->make_nccl_communicator(setup, device);
}

}  // namespace parity::kernels
