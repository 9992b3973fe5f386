// Fixture and helpers for the GPU parity tests: a CUDA device (the test skips, naming the reason,
// when there is none; PARITY_REQUIRE_GPU=1 makes that a failure), a CPU reference context, device
// upload/download, a normwise error check whose message names the op, the worst element and both
// values, its bf16 form (the rounding bound per element plus a normwise term), a check that both
// backends counted the same FLOPs, the MoE tests' routing-plan definition and the grouped matmul's
// row groups.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "kernels/backend/bf16.h"
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

// ‖gpu − ref‖₂ / ‖ref‖₂ ≤ tol: for outputs whose every element carries the rounding of bf16
// intermediates (the tensor-core attention rounds P and dS to bf16 before their products).
inline void ExpectNormwise(const std::string& what, const std::vector<float>& gpu,
                           const std::vector<double>& ref, double tol) {
  ASSERT_EQ(gpu.size(), ref.size()) << what << ": size mismatch";
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double d = double(gpu[i]) - ref[i];
    num += d * d, den += ref[i] * ref[i];
  }
  const double rel = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  EXPECT_LE(rel, tol) << what << ": normwise relative error " << rel << " above " << tol;
}

// The bf16 mode's host side: round to nearest-even (bf16.h's ToBf16, the reference rounding),
// widen back, and the raw bits (for bit-for-bit comparisons: Bf16 has no operator==).
inline std::vector<Bf16> RoundToBf16(const std::vector<float>& v) {
  std::vector<Bf16> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = ToBf16(v[i]);
  return out;
}
inline std::vector<float> Widen(const std::vector<Bf16>& v) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = ToFloat(v[i]);
  return out;
}
// Random normals rounded to bf16 (the values both backends see), and bf16 widened to double.
inline std::vector<Bf16> RandomBf16(int64_t n, uint64_t seed, double scale = 1.0) {
  return RoundToBf16(RandomFloats(n, seed, scale));
}
inline std::vector<double> Wide(const std::vector<Bf16>& v) { return ToDouble(Widen(v)); }
inline std::vector<uint16_t> Bits(const std::vector<Bf16>& v) {
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = v[i].bits;
  return out;
}

// For an output stored in bf16: every element within the rounding bound 2^-8·|ref_i| (bf16 keeps
// 8 significant bits; round-to-nearest is off by at most half an ulp) plus tol·max|ref|, the
// error of the fp32 math before the rounding.
template <typename R>
void ExpectCloseBf16(const std::string& what, const std::vector<Bf16>& gpu,
                     const std::vector<R>& ref, double tol) {
  ASSERT_EQ(gpu.size(), ref.size()) << what << ": size mismatch";
  double scale = 0.0;
  for (const R& r : ref) scale = std::max(scale, std::abs(double(r)));
  int64_t bad = 0;
  size_t at = 0;
  double worst = -1.0;  // error over its allowance
  for (size_t i = 0; i < ref.size(); ++i) {
    const double r = double(ref[i]), g = double(ToFloat(gpu[i]));
    const double allowed = 0x1.0p-8 * std::abs(r) + tol * scale;
    const double over = std::isnan(g) ? INFINITY : std::abs(g - r) / allowed;
    if (!(over <= 1.0)) ++bad;
    if (!(over <= worst)) worst = over, at = i;
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << ref.size()
                    << " bf16 elements outside 2^-8·|ref| + " << tol << "·max|ref| (worst [" << at
                    << "]: cuda " << ToFloat(gpu[at]) << " vs reference " << double(ref[at]) << ", "
                    << worst << "× its allowance; reference max |x| " << scale << ")";
}

// The definition of the routing plan: a stable counting sort of the T·K slots by expert.
inline void ReferencePlan(int64_t t, int64_t k, int64_t e, const std::vector<int32_t>& expert,
                          std::vector<int64_t>& offsets, std::vector<int32_t>& slot_of,
                          std::vector<int32_t>& token_of) {
  offsets.assign(e + 1, 0);
  for (int32_t x : expert) ++offsets[x + 1];
  std::partial_sum(offsets.begin(), offsets.end(), offsets.begin());
  std::vector<int64_t> cursor(offsets.begin(), offsets.end() - 1);
  slot_of.assign(t * k, 0);
  token_of.assign(t * k, 0);
  for (int64_t i = 0; i < t * k; ++i) {
    const int64_t slot = cursor[expert[i]]++;
    slot_of[i] = static_cast<int32_t>(slot);
    token_of[slot] = static_cast<int32_t>(i / k);
  }
}

// K distinct experts per token, drawn with a skew so some experts get many slots and some none.
inline std::vector<int32_t> RandomExperts(int64_t t, int64_t k, int64_t e, uint64_t seed) {
  Rng rng{.seed = seed};
  std::vector<int32_t> expert(t * k);
  const int64_t pool = e > k ? e - 1 : e;  // the last expert stays empty where K allows it
  for (int64_t i = 0; i < t; ++i) {
    for (int64_t j = 0; j < k; ++j) {
      int32_t x;
      bool dup;
      do {
        const uint64_t r = rng.Below(4);
        x = static_cast<int32_t>(r == 0 ? rng.Below(std::min<int64_t>(3, pool)) : rng.Below(pool));
        dup = false;
        for (int64_t q = 0; q < j; ++q) dup |= expert[i * k + q] == x;
      } while (dup);
      expert[i * k + j] = x;
    }
  }
  return expert;
}

// Row groups for the grouped matmul tests: rows [offsets[g], offsets[g+1]) of arrays of `rows`
// rows; rows outside [offsets[0], offsets[G]) belong to no group and must stay untouched.
struct GroupedCase {
  std::string name;
  std::vector<int64_t> offsets;  // [G+1]
  int64_t rows, in, out;
  int64_t pad = 0;  // elements before each array: pointers that miss 16-byte alignment
};
// The experts of a skewed routing plan (an empty last expert); 1500 mostly empty groups (more
// than one 1024-thread chunk of the pointer kernel) between rows outside any group; one group;
// arrays one element off 16-byte alignment (bf16: cuBLAS's pointer rule sends these to the
// per-group GEMMs) with odd widths.
inline std::vector<GroupedCase> GroupedCases() {
  std::vector<GroupedCase> cases;
  std::vector<int64_t> plan;
  std::vector<int32_t> slot_of, token_of;
  ReferencePlan(301, 2, 9, RandomExperts(301, 2, 9, 700), plan, slot_of, token_of);
  cases.push_back({"9 experts", plan, 602, 96, 80});
  std::vector<int64_t> sparse{5};
  for (int64_t g = 0; g < 1500; ++g) {
    sparse.push_back(sparse.back() + (g % 7 == 3 ? 1 + g % 13 : 0));
  }
  cases.push_back({"1500 groups", sparse, sparse.back() + 4, 32, 48});
  cases.push_back({"one group", {0, 70}, 70, 64, 128});
  cases.push_back({"unaligned", {0, 30, 30, 75}, 75, 40, 23, 1});
  return cases;
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
    bf16_ = gpu_->OpsBf16();
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
  // `host` after `pad` zero elements; returns where `host` starts.
  template <typename T>
  T* UploadPadded(std::vector<T> host, int64_t pad) {
    host.insert(host.begin(), static_cast<size_t>(pad), T{});
    return Upload(host) + pad;
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
  const Bf16OpTable* bf16_ = nullptr;  // the bf16 tests assert it is set
  ThreadPool pool_{2};
  FlopCounter cpu_flops_;
  OpContext cpu_{.pool = &pool_, .flops = &cpu_flops_};
  std::vector<std::unique_ptr<Buffer>> buffers_;
};

}  // namespace parity::kernels::testing
