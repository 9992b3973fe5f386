// The bf16 mode's grouped weight-gradient kernel (cuda/grouped_wgrad_tc.h) under the host lane
// emulator against the definition in double: dW_g += dy_gᵀ·x_g for every non-empty group, the
// empty groups' dW untouched, edges of N and K that are not whole 64-wide tiles.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/backend/bf16.h"
#include "kernels/cuda/grouped_wgrad_tc.h"
#include "kernels/cuda/tests/lane_emulator.h"

namespace parity::kernels::testing {
namespace {

struct Case {
  int64_t n, k;
  std::vector<int64_t> offsets;  // group boundaries into the rows
  const char* name;
};

void Check(const Case& c, uint64_t seed) {
  SCOPED_TRACE(c.name);
  const int64_t groups = static_cast<int64_t>(c.offsets.size()) - 1, rows = c.offsets.back();
  const auto dy = RandomBf16(rows * c.n, seed), x = RandomBf16(rows * c.k, seed + 1);
  std::vector<float> dw(groups * c.n * c.k);
  std::mt19937_64 rng(seed + 2);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (float& v : dw) v = dist(rng);  // accumulated into
  const std::vector<float> before = dw;
  const cuda::WgradArgs a{.n = c.n,
                          .k = c.k,
                          .offsets = c.offsets.data(),
                          .dy = dy.data(),
                          .x = x.data(),
                          .dw = dw.data()};
  BlockEmulator block(cuda::kFlashThreads, cuda::GroupedWgradSmem());
  block.RunGrid(cuda::GroupedWgradTiles(c.n, c.k), groups,
                [&](LaneEnv& env) { cuda::GroupedWgradBlock(env, a); });
  double num = 0, den = 0;
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t i = 0; i < c.n; ++i) {
      for (int64_t j = 0; j < c.k; ++j) {
        double ref = before[(g * c.n + i) * c.k + j];
        for (int64_t r = c.offsets[g]; r < c.offsets[g + 1]; ++r) {
          ref += Wide(dy[r * c.n + i]) * Wide(x[r * c.k + j]);
        }
        const float got = dw[(g * c.n + i) * c.k + j];
        if (c.offsets[g + 1] == c.offsets[g]) {
          ASSERT_EQ(got, before[(g * c.n + i) * c.k + j]) << "an empty group's dW was written";
        }
        num += (got - ref) * (got - ref), den += ref * ref;
      }
    }
  }
  // Products of bf16 values are exact in fp32; what is left is the fp32 summation (and the
  // emulator's, in double, is exact to fp32 rounding): far below 1e-5 normwise.
  EXPECT_LT(std::sqrt(num / den), 1e-6) << "dW against the double definition";
}

TEST(GroupedWgradEmulationTest, WholeTilesWithEmptyGroups) {
  Check({64, 128, {0, 40, 40, 71, 71}, "n64 k128, empty groups between and last"}, 1);
}

TEST(GroupedWgradEmulationTest, EdgeTilesAndAChunkBoundary) {
  Check({72, 40, {0, 33, 97}, "n72 k40: partial tiles, rows across 32-row chunks"}, 2);
}

TEST(GroupedWgradEmulationTest, OneRowGroupsAndAnEmptyFirst) {
  Check({16, 24, {0, 0, 1, 2, 5}, "single rows"}, 3);
}

}  // namespace
}  // namespace parity::kernels::testing
