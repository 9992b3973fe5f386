// libFuzzer target: sweep specs as YAML (tests/fuzz/README.md).
#include "tests/fuzz/spec_fuzz.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  parity::fuzz::QuietLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  parity::fuzz::FuzzSpecText(data, size, parity::core::SpecFormat::kYaml);
  return 0;
}
