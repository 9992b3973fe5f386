// Finds and loads libparity_spm_bridge.so (sentencepiece_bridge.h says why SentencePiece lives in
// a module of its own) and implements Processor and Train on its function table.
#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <string>
#include <vector>

#include "datasets/prepare/sentencepiece_bridge.h"

#ifndef PARITY_SPM_BRIDGE_PATH
#error "PARITY_SPM_BRIDGE_PATH: the build names the module's path (datasets/CMakeLists.txt)"
#endif

namespace parity::datasets::spm {

const SpmApi* LoadSpmApi(std::string* error) {
  static std::once_flag once;
  static const SpmApi* api = nullptr;
  static std::string load_error;
  std::call_once(once, [] {
    // $PARITY_SENTENCEPIECE_BRIDGE, else the build tree's module, else one beside the executable
    // (for binaries copied out of the build tree together with the module).
    std::vector<std::string> candidates;
    if (const char* env = std::getenv("PARITY_SENTENCEPIECE_BRIDGE"); env != nullptr && *env) {
      candidates.push_back(env);
    } else {
      candidates.push_back(PARITY_SPM_BRIDGE_PATH);
      std::error_code error;
      const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
      if (!error) candidates.push_back((self.parent_path() / "libparity_spm_bridge.so").string());
    }
    void* module = nullptr;
    std::string path, failures;
    for (const std::string& candidate : candidates) {
      // RTLD_LOCAL keeps SentencePiece's protobuf out of the global scope; RTLD_DEEPBIND makes
      // the module (and libsentencepiece, loaded with it) bind to its own copy first.
      module = ::dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
      if (module != nullptr) {
        path = candidate;
        break;
      }
      failures += std::string(failures.empty() ? "" : "; ") + ::dlerror();
    }
    if (module == nullptr) {
      load_error = "cannot load the SentencePiece module libparity_spm_bridge.so (" + failures +
                   "); build the target parity_spm_bridge, or name the module in "
                   "$PARITY_SENTENCEPIECE_BRIDGE";
      return;
    }
    using Entry = const SpmApi* (*)();
    auto entry = reinterpret_cast<Entry>(::dlsym(module, "parity_spm_api_v1"));
    if (entry == nullptr) {
      load_error = "'" + path + "' is not the SentencePiece module (no parity_spm_api_v1)";
      return;
    }
    api = entry();
  });
  if (api == nullptr) *error = load_error;
  return api;
}

Processor::~Processor() { api_->destroy(handle_); }

std::unique_ptr<Processor> Processor::Load(const std::string& path, std::string* error) {
  const SpmApi* api = LoadSpmApi(error);
  if (api == nullptr) return nullptr;
  void* handle = api->load(path, error);
  if (handle == nullptr) return nullptr;
  return std::unique_ptr<Processor>(new Processor(api, handle));
}

bool Processor::Encode(std::string_view text, std::vector<int>* ids, std::string* error) const {
  return api_->encode(handle_, text, ids, error);
}

ModelFacts Processor::Facts() const {
  ModelFacts facts;
  api_->facts(handle_, &facts);
  return facts;
}

bool Train(const std::vector<std::pair<std::string, std::string>>& flags, std::string* error) {
  const SpmApi* api = LoadSpmApi(error);
  return api != nullptr && api->train(flags, error);
}

}  // namespace parity::datasets::spm
