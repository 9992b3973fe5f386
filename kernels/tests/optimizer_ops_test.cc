// The optimizer's ops on the CPU: the multi-tensor AdamW against one adamw_update call per tensor
// (the same bits, whatever the table: empty and one-element tensors, mixed decay, a gap the table
// does not cover, any thread count), and sum_squares against a long-double sum.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/backend/device.h"
#include "kernels/tests/test_util.h"

namespace parity::kernels {
namespace {

std::vector<float> RandomFloats(int64_t n, uint64_t seed, double scale) {
  const std::vector<double> d = testing::RandomVector(n, seed, scale);
  return std::vector<float>(d.begin(), d.end());
}

// Equal as bits (so −0 ≠ +0 and NaN payloads count), naming the first element that differs.
void ExpectSameBits(const char* what, const std::vector<float>& got,
                    const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0) {
      ADD_FAILURE() << what << "[" << i << "]: multi-tensor " << got[i] << " vs per-tensor "
                    << want[i];
      return;
    }
  }
}

struct AdamWState {
  std::vector<float> p, m, v, g;
};

AdamWState RandomState(int64_t n) {
  AdamWState s{RandomFloats(n, 1, 1.0), RandomFloats(n, 2, 0.1), RandomFloats(n, 3, 0.1),
               RandomFloats(n, 4, 1.0)};
  for (float& x : s.v) x = x * x;  // second moments are ≥ 0
  return s;
}

// Tensors of a flat buffer of 40'000 elements: sizes 0 and 1, ones that straddle the CPU's 4096
// chunks, both decays in turn, listed out of offset order, and elements [39'000, 40'000) that
// no tensor covers (they must not move).
std::vector<TensorSpan> Table() {
  const int64_t sizes[] = {4097, 0, 1, 12'000, 1, 4096, 0, 9000, 5, 8799, 1001};
  std::vector<TensorSpan> t;
  int64_t offset = 0;
  for (size_t i = 0; i < std::size(sizes); ++i) {
    t.push_back({.offset = offset,
                 .size = sizes[i],
                 .decay = i % 3 == 1 ? WeightDecay::kSkip : WeightDecay::kApply});
    offset += sizes[i];
  }
  std::swap(t[2], t[7]);
  return t;
}

TEST(OptimizerOpsTest, MultiTensorAdamWIsThePerTensorUpdateBitForBit) {
  const int64_t n = 40'000;
  const std::vector<TensorSpan> table = Table();
  for (const int threads : {1, 3}) {
    SCOPED_TRACE(::testing::Message() << threads << " threads");
    auto device = MakeCpuDevice({.threads = threads});
    const OpTable<float>& ops = *device->OpsF32();
    ASSERT_TRUE(ops.Supports(OpKind::kAdamWMultiTensor));
    AdamWState multi = RandomState(n), single = multi;
    const AdamWState before = multi;
    for (int64_t step = 1; step <= 3; ++step) {
      const AdamWArgs args{.lr = 3e-3 * static_cast<double>(step),
                           .beta1 = 0.9,
                           .beta2 = 0.95,
                           .eps = 1e-8,
                           .weight_decay = 0.1,
                           .step = step};
      const double clip = step == 2 ? 0.37 : 1.0;
      ops.adamw_multi_tensor(device->Context(), static_cast<int64_t>(table.size()), table.data(),
                             multi.p.data(), multi.m.data(), multi.v.data(), multi.g.data(), clip,
                             args);
      for (const TensorSpan& t : table) {
        ops.adamw_update(device->Context(), t.size, single.p.data() + t.offset,
                         single.m.data() + t.offset, single.v.data() + t.offset,
                         single.g.data() + t.offset, clip, args, t.decay);
      }
    }
    ExpectSameBits("p", multi.p, single.p);
    ExpectSameBits("m", multi.m, single.m);
    ExpectSameBits("v", multi.v, single.v);
    EXPECT_NE(multi.p[0], before.p[0]) << "the update moved nothing";
    for (int64_t i = 39'000; i < n; ++i) {
      ASSERT_EQ(multi.p[i], before.p[i]) << "element " << i << " is in no tensor but moved";
      ASSERT_EQ(multi.m[i], before.m[i]) << "element " << i << " is in no tensor but moved";
    }
  }
}

TEST(OptimizerOpsTest, MultiTensorAdamWOfAnEmptyTableChangesNothing) {
  auto device = MakeCpuDevice({.threads = 2});
  AdamWState s = RandomState(10);
  const AdamWState before = s;
  const AdamWArgs args{
      .lr = 1e-2, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1, .step = 1};
  device->OpsF32()->adamw_multi_tensor(device->Context(), 0, nullptr, s.p.data(), s.m.data(),
                                       s.v.data(), s.g.data(), 1.0, args);
  EXPECT_EQ(s.p, before.p);
  EXPECT_EQ(s.m, before.m);
  EXPECT_EQ(s.v, before.v);
}

TEST(OptimizerOpsTest, SumSquaresIsTheDoubleSumInAFixedOrder) {
  for (const int threads : {1, 3}) {
    auto device = MakeCpuDevice({.threads = threads});
    for (const int64_t n : {0, 1, 4095, 100'003}) {
      SCOPED_TRACE(::testing::Message() << n << " elements, " << threads << " threads");
      const std::vector<float> g = RandomFloats(n, 7, 2.0);
      long double ref = 0;
      for (float x : g) ref += static_cast<long double>(x) * x;
      double sum = -1, again = -1;
      device->OpsF32()->sum_squares(device->Context(), n, g.data(), &sum);
      device->OpsF32()->sum_squares(device->Context(), n, g.data(), &again);
      EXPECT_NEAR(sum, static_cast<double>(ref), 1e-13 * static_cast<double>(ref) + 1e-300)
          << "Σ g² in double";
      EXPECT_EQ(std::memcmp(&sum, &again, sizeof(double)), 0) << "not deterministic";
    }
  }
}

}  // namespace
}  // namespace parity::kernels
