// Fixture and helpers for the GPU parity tests: a CUDA device (the test skips, naming the reason,
// when there is none; PARITY_REQUIRE_GPU=1 makes that a failure), a CPU reference context, device
// upload/download, a normwise error check whose message names the op, the worst element and both
// values, and a check that both backends counted the same FLOPs.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "kernels/backend/device.h"
#include "kernels/backend/thread_pool.h"
#include "kernels/model/rng.h"

namespace parity::kernels::testing {

inline std::vector<float> RandomFloats(int64_t n, uint64_t seed, double scale = 1.0) {
  Rng rng{.seed = seed};
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(scale * rng.Normal());
  return v;
}

template <typename T>
std::vector<double> ToDouble(const std::vector<T>& v) {
  return std::vector<double>(v.begin(), v.end());
}

// max_i |gpu_i − ref_i| ≤ tol · max_i |ref_i| (normwise: elementwise relative error is
// meaningless for outputs that cancel to near zero).
template <typename R>
void ExpectClose(const std::string& what, const std::vector<float>& gpu, const std::vector<R>& ref,
                 double tol) {
  ASSERT_EQ(gpu.size(), ref.size()) << what << ": size mismatch";
  double scale = 0.0, worst = -1.0;
  size_t at = 0;
  for (size_t i = 0; i < ref.size(); ++i) scale = std::max(scale, std::abs(double(ref[i])));
  for (size_t i = 0; i < ref.size(); ++i) {
    const double err = std::abs(double(gpu[i]) - double(ref[i]));
    if (!(err <= worst) || std::isnan(err)) worst = std::isnan(err) ? INFINITY : err, at = i;
  }
  const double rel = scale > 0 ? worst / scale : worst;
  EXPECT_LE(rel, tol) << what << ": relative error " << rel << " above " << tol << " (worst [" << at
                      << "]: cuda " << gpu[at] << " vs reference " << double(ref[at])
                      << ", reference max |x| " << scale << ")";
}

class CudaOpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto device = MakeCudaDevice({});
    if (!device.ok()) {
      const char* require = std::getenv("PARITY_REQUIRE_GPU");
      if (require != nullptr && std::string(require) == "1") {
        FAIL() << "PARITY_REQUIRE_GPU=1 but there is no usable GPU: " << device.status();
      }
      GTEST_SKIP() << "no CUDA GPU: " << device.status().message();
    }
    gpu_ = *std::move(device);
    ops_ = gpu_->OpsF32();
    ASSERT_NE(ops_, nullptr);
    gpu_->Context().flops->Reset();
  }

  template <typename T>
  T* Alloc(int64_t n) {
    auto buffer = gpu_->Allocate(static_cast<size_t>(n) * sizeof(T));
    EXPECT_TRUE(buffer.ok()) << buffer.status();
    buffers_.push_back(*std::move(buffer));
    return buffers_.back()->as<T>();
  }
  template <typename T>
  T* Upload(const std::vector<T>& host) {
    T* p = Alloc<T>(static_cast<int64_t>(host.size()));
    gpu_->FromHost(p, host.data(), host.size() * sizeof(T));
    return p;
  }
  template <typename T>
  std::vector<T> Download(const T* p, int64_t n) {
    std::vector<T> host(n);
    gpu_->ToHost(host.data(), p, static_cast<size_t>(n) * sizeof(T));
    return host;
  }

  const OpContext& Gpu() { return gpu_->Context(); }

  // Both backends must count exactly the same FLOPs per bucket; resets both counters.
  void ExpectSameFlops(const std::string& what) {
    FlopCounter& g = *gpu_->Context().flops;
    for (int k = 0; k < kNumFlopKinds; ++k) {
      EXPECT_EQ(g.flops[k], cpu_flops_.flops[k])
          << what << ": FLOP bucket " << k << " counted differently (cuda vs cpu)";
    }
    g.Reset();
    cpu_flops_.Reset();
  }

  std::unique_ptr<Device> gpu_;
  const OpTable<float>* ops_ = nullptr;
  ThreadPool pool_{2};
  FlopCounter cpu_flops_;
  OpContext cpu_{.pool = &pool_, .flops = &cpu_flops_};
  std::vector<std::unique_ptr<Buffer>> buffers_;
};

}  // namespace parity::kernels::testing
