// cuDNN's fused attention planned for an H200 on a machine without a GPU (cuDNN ≥ 9.8's deviceless
// plans from a JSON device description). The CUDA driver's stub library stands in for libcuda, so
// cuDNN goes as far as it can without a device: it parses the graph, its heuristics match it to
// the fused-attention engines, and it generates and compiles each engine's kernel for sm_90; only
// loading the compiled kernel into a driver fails (the stub refuses). A graph cuDNN does not
// recognise fails long before that — no engine offered, or a compile error — and fails here.
// Numbers come from the GPU: kernels_cuda_ops_test's cuDNN cases, in bench/gpu_check.sh.
#include <dlfcn.h>

#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "kernels/cuda/cudnn_sdpa.h"

namespace parity::kernels::cuda {
namespace {

struct NamedShape {
  const char* name;
  AttentionShape shape;
};

AttentionShape Shape(int64_t batch, int64_t seq, int64_t heads, int64_t kv_heads,
                     int64_t head_dim) {
  return AttentionShape{.batch = batch,
                        .seq = seq,
                        .heads = heads,
                        .kv_heads = kv_heads,
                        .head_dim = head_dim,
                        .positions = Positions::kRotary,
                        .rope_theta = 10000.0};
}

// The study's shapes (bench/RESULTS.md, "GPU check"): the 2B dense baseline and the r_a ≈ 20 %
// MoE at the peer's micro-batch, the check's micro model, and grouped kv heads.
const std::vector<NamedShape>& Shapes() {
  static const std::vector<NamedShape> shapes{
      {"dense-1C (B8 S2048 H20 Dh128)", Shape(8, 2048, 20, 20, 128)},
      {"moe-ra20 (B8 S2048 H12 Dh128)", Shape(8, 2048, 12, 12, 128)},
      {"micro (B4 S1024 H8 Dh64)", Shape(4, 1024, 8, 8, 64)},
      {"grouped kv heads (B2 S512 H16/4 Dh64)", Shape(2, 512, 16, 4, 64)},
      {"ragged sequence (B3 S300 H4 Dh32)", Shape(3, 300, 4, 4, 32)},
      {"head dim 256 (B1 S512 H4 Dh256)", Shape(1, 512, 4, 4, 256)},
  };
  return shapes;
}

class CudnnSdpaPlanTest : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    // Loaded first under its soname (libcuda.so.1), the stub is what cuDNN's own dlopen finds.
    stub_ = dlopen(PARITY_CUDA_DRIVER_STUB, RTLD_NOW | RTLD_GLOBAL);
  }
  void SetUp() override {
    ASSERT_NE(stub_, nullptr) << "the CUDA driver stub " << PARITY_CUDA_DRIVER_STUB
                              << " did not load: " << dlerror();
  }
  static void* stub_;
};
void* CudnnSdpaPlanTest::stub_ = nullptr;

// Every deterministic candidate got as far as loading its compiled kernel; at least one was tried.
void ExpectCompiledEverywhere(const absl::Status& status, const std::string& what) {
  if (status.ok()) return;  // a plan outright (a real driver behind the stub's name)
  ASSERT_EQ(status.code(), absl::StatusCode::kNotFound) << what << ": " << status;
  int compiled = 0;
  for (absl::string_view part : absl::StrSplit(status.message(), "; ")) {
    if (!absl::StartsWith(part, "engine ") && !absl::StrContains(part, "(engine ")) continue;
    if (absl::StrContains(part, "non-deterministic")) continue;
    EXPECT_TRUE(absl::StrContains(part, "cuLibraryLoadData"))
        << what << ": an engine failed before its kernel was compiled: " << part;
    ++compiled;
  }
  EXPECT_GT(compiled, 0) << what << ": no deterministic engine was even tried: " << status;
}

TEST_F(CudnnSdpaPlanTest, CudnnCompilesTheForwardAndBackwardForAnH200AtTheStudysShapes) {
  for (const NamedShape& s : Shapes()) {
    for (SdpaPass pass : {SdpaPass::kForward, SdpaPass::kBackward}) {
      const std::string what =
          std::string(s.name) + (pass == SdpaPass::kForward ? " forward" : " backward");
      absl::StatusOr<SdpaPlanPtr> plan = BuildSdpaPlan(pass, s.shape, H200DevicePropertiesJson());
      ExpectCompiledEverywhere(plan.status(), what);
      // Which engines cuDNN tried and their workspaces, for the log (bench/RESULTS.md quotes it).
      std::printf("%s: %s\n", what.c_str(),
                  plan.ok() ? "planned" : std::string(plan.status().message()).c_str());
    }
  }
}

TEST_F(CudnnSdpaPlanTest, ShapesTheGraphCannotExpressAreRefusedWithTheReason) {
  AttentionShape alibi = Shape(2, 256, 4, 4, 64);
  alibi.positions = Positions::kAlibi;
  EXPECT_NE(CudnnSdpaRefusal(alibi).find("ALiBi"), std::string::npos);
  EXPECT_NE(CudnnSdpaRefusal(Shape(2, 256, 4, 4, 264)).find("head dim 264"), std::string::npos);
  EXPECT_NE(CudnnSdpaRefusal(Shape(2, 256, 4, 4, 60)).find("head dim 60"), std::string::npos);
  EXPECT_NE(CudnnSdpaRefusal(Shape(2, 256, 6, 4, 64)).find("6 heads over 4"), std::string::npos);
  EXPECT_EQ(CudnnSdpaRefusal(Shape(2, 256, 8, 2, 128)), "");

  absl::StatusOr<SdpaPlanPtr> plan =
      BuildSdpaPlan(SdpaPass::kForward, alibi, H200DevicePropertiesJson());
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument) << plan.status();
  EXPECT_TRUE(absl::StrContains(plan.status().message(), "ALiBi")) << plan.status();
}

TEST_F(CudnnSdpaPlanTest, AMalformedDeviceDescriptionIsAnErrorNotACrash) {
  absl::StatusOr<SdpaPlanPtr> plan =
      BuildSdpaPlan(SdpaPass::kForward, Shape(2, 256, 4, 4, 64), R"({"deviceVer":900})");
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kFailedPrecondition) << plan.status();
  EXPECT_TRUE(absl::StrContains(plan.status().message(), "device properties")) << plan.status();
}

}  // namespace
}  // namespace parity::kernels::cuda
