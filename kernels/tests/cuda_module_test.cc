// The CUDA backend behind its module (backend/cuda_module.h): the engine links no CUDA library,
// loads libparity_cuda.so on the first CUDA device, and says what is wrong when it cannot. Each
// case runs in a fresh process (the loader loads once per process and reads $PARITY_CUDA_MODULE
// then), as a threadsafe-style death test that exits 0 when the expectation held.
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>

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

TEST_F(CudaModuleTest, AMissingModuleIsFailedPreconditionNamingItAndTheRemedy) {
  EXPECT_EXIT(
      {
        setenv("PARITY_CUDA_MODULE", "/nonexistent/libparity_cuda.so", 1);
        CheckDevice([](const absl::Status& s) {
          return s.code() == absl::StatusCode::kFailedPrecondition &&
                 absl::StrContains(s.message(), "/nonexistent/libparity_cuda.so") &&
                 absl::StrContains(s.message(), "$PARITY_CUDA_MODULE") &&
                 absl::StrContains(s.message(), "LD_LIBRARY_PATH");
        });
      },
      testing::ExitedWithCode(0), "");
}

TEST_F(CudaModuleTest, ALibraryThatIsNotTheModuleIsNamedAsSuch) {
  EXPECT_EXIT(
      {
        setenv("PARITY_CUDA_MODULE", "libm.so.6", 1);
        CheckDevice([](const absl::Status& s) {
          return s.code() == absl::StatusCode::kFailedPrecondition &&
                 absl::StrContains(s.message(), "libm.so.6 is not the CUDA module");
        });
      },
      testing::ExitedWithCode(0), "");
}

TEST_F(CudaModuleTest, AModuleFromAnotherBuildIsRefusedNamingBothBuilds) {
  EXPECT_EXIT(
      {
        setenv("PARITY_CUDA_MODULE", PARITY_CUDA_MODULE_OF_ANOTHER_BUILD, 1);
        CheckDevice([](const absl::Status& s) {
          return s.code() == absl::StatusCode::kFailedPrecondition &&
                 absl::StrContains(s.message(), "is from another build") &&
                 absl::StrContains(s.message(), "/0000000000000000") &&
                 absl::StrContains(s.message(), "install the module built with it");
        });
      },
      testing::ExitedWithCode(0), "");
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
