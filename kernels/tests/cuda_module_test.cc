// The CUDA backend behind its module (backend/cuda_module.h): the engine links no CUDA library,
// loads libparity_cuda.so on the first CUDA device, and says what is wrong when it cannot. Each
// case runs in a fresh process (the loader loads once per process and reads $PARITY_CUDA_MODULE
// then), as a threadsafe-style death test that exits 0 when the expectation held.
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "kernels/backend/device.h"

namespace parity::kernels {
namespace {

class CudaModuleTest : public testing::Test {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

// Exits 0 when MakeCudaDevice's answer satisfies `expect`, else prints it and exits 1.
template <typename Expect>
[[noreturn]] void CheckDevice(Expect expect) {
  absl::StatusOr<std::unique_ptr<Device>> device = MakeCudaDevice({});
  const absl::Status status = device.status();
  const bool held = expect(status);
  if (!held) std::fprintf(stderr, "unexpected: %s\n", status.ToString().c_str());
  std::exit(held ? 0 : 1);
}

TEST_F(CudaModuleTest, TheEngineLinksNoCudaLibrary) {
  // Loaded into this process only by the module; before any CUDA device, none is mapped.
  for (const char* lib : {"libcudart.so.13", "libcublasLt.so.13", "libcudnn.so.9"}) {
    EXPECT_EQ(dlopen(lib, RTLD_NOW | RTLD_NOLOAD), nullptr)
        << lib << " is loaded before any CUDA device was asked for: something links it";
  }
}

// With $PARITY_CUDA_MODULE set to `module`, MakeCudaDevice is FAILED_PRECONDITION and its
// message holds every one of `words`.
void ExpectRefusal(const char* module, const std::vector<std::string>& words) {
  EXPECT_EXIT(
      {
        setenv("PARITY_CUDA_MODULE", module, 1);
        CheckDevice([&](const absl::Status& s) {
          bool held = s.code() == absl::StatusCode::kFailedPrecondition;
          for (const std::string& w : words) held = held && absl::StrContains(s.message(), w);
          return held;
        });
      },
      testing::ExitedWithCode(0), "")
      << module;
}

TEST_F(CudaModuleTest, AMissingModuleIsFailedPreconditionNamingItAndTheRemedy) {
  ExpectRefusal("/nonexistent/libparity_cuda.so",
                {"/nonexistent/libparity_cuda.so", "$PARITY_CUDA_MODULE", "LD_LIBRARY_PATH"});
}

TEST_F(CudaModuleTest, ALibraryThatIsNotTheModuleIsNamedAsSuch) {
  ExpectRefusal("libm.so.6", {"libm.so.6 is not the CUDA module"});
}

TEST_F(CudaModuleTest, AModuleFromAnotherBuildIsRefusedNamingBothBuilds) {
  ExpectRefusal(PARITY_CUDA_MODULE_OF_ANOTHER_BUILD,
                {"is from another build", "/0000000000000000", "install the module built with it"});
}

TEST_F(CudaModuleTest, TheBuiltModuleLoadsAndAnswersForTheGpu) {
  // Here the module loads; then the answer is the GPU's: a device, or (no GPU) the CUDA error.
  EXPECT_EXIT(
      {
        unsetenv("PARITY_CUDA_MODULE");
        CheckDevice([](const absl::Status& s) {
          return s.ok() || (s.code() == absl::StatusCode::kFailedPrecondition &&
                            !absl::StrContains(s.message(), "cannot load the CUDA backend module"));
        });
      },
      testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace parity::kernels
