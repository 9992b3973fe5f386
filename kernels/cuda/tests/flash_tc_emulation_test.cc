// The tensor-core attention kernels (flash_tc.h) run under the host lane emulator, one fiber per
// CUDA thread, against the double-precision definition (attention_reference.h): index, mask,
// tiling and fragment-layout logic, checked on every CPU build. On a GPU the same kernel bodies run
// with the device environment; kernels_cuda_ops_test checks them there.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernels/backend/bf16.h"
#include "kernels/cuda/flash_tc.h"
#include "kernels/cuda/tests/attention_reference.h"
#include "kernels/cuda/tests/lane_emulator.h"

namespace parity::kernels::testing {
namespace {

using cuda::FlashArgs;

struct Case {
  AttentionShape shape;
  const char* name;
};

// ‖got − ref‖ / ‖ref‖ over the elements where keep(i).
template <typename Got, typename Keep>
double NormwiseError(const Got& got, const std::vector<double>& ref, Keep keep) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!keep(i)) continue;
    const double d = static_cast<double>(got(i)) - ref[i];
    num += d * d, den += ref[i] * ref[i];
  }
  return std::sqrt(num / den);
}

struct Outputs {
  std::vector<uint16_t> out, dqkv;
  std::vector<float> lse;
};

// The three kernels on the emulated grid, with delta = rowsum(dout·out) as the GPU's delta
// kernel computes it (double sum of the bf16 values, rounded to float).
template <int kDh>
Outputs RunFlash(const AttentionShape& s, const std::vector<uint16_t>& qkv,
                 const std::vector<uint16_t>& dout) {
  const FlashArgs a = cuda::MakeFlashArgs(s);
  const int64_t tokens = s.batch * s.seq, tiles = (s.seq + cuda::kFlashRows - 1) / cuda::kFlashRows;
  Outputs o{.out = std::vector<uint16_t>(tokens * a.ldo, 0x7fc1),
            .dqkv = std::vector<uint16_t>(tokens * a.ld, 0x7fc1),
            .lse = std::vector<float>(s.batch * s.heads * s.seq, NAN)};
  BlockEmulator fwd(cuda::kFlashThreads, cuda::FlashForwardSmem<kDh>());
  fwd.RunGrid(s.batch * s.heads, tiles, [&](LaneEnv& env) {
    cuda::FlashForwardBlock<kDh>(env, a, o.out.data(), o.lse.data(), qkv.data());
  });
  std::vector<float> delta(s.batch * s.heads * s.seq);
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < s.heads; ++h) {
      for (int64_t i = 0; i < s.seq; ++i) {
        double acc = 0;
        const int64_t off = (b * s.seq + i) * a.ldo + h * s.head_dim;
        for (int64_t d = 0; d < s.head_dim; ++d) {
          acc += static_cast<double>(ToFloat(Bf16{dout[off + d]})) * ToFloat(Bf16{o.out[off + d]});
        }
        delta[(b * s.heads + h) * s.seq + i] = static_cast<float>(acc);
      }
    }
  }
  BlockEmulator dq(cuda::kFlashThreads, cuda::FlashDqSmem<kDh>());
  dq.RunGrid(s.batch * s.heads, tiles, [&](LaneEnv& env) {
    cuda::FlashDqBlock<kDh>(env, a, o.dqkv.data(), dout.data(), o.lse.data(), delta.data(),
                            qkv.data());
  });
  const int64_t key_tiles = (s.seq + cuda::kFlashKeys - 1) / cuda::kFlashKeys;
  BlockEmulator dkdv(cuda::kFlashThreads, cuda::FlashDkDvSmem<kDh>());
  dkdv.RunGrid(s.batch * s.kv_heads, key_tiles, [&](LaneEnv& env) {
    cuda::FlashDkDvBlock<kDh>(env, a, o.dqkv.data(), dout.data(), o.lse.data(), delta.data(),
                              qkv.data());
  });
  return o;
}

// Errors of one case against the double-precision reference of the same bf16 inputs.
struct Errors {
  double out, lse, dq, dk, dv;
};

template <int kDh>
Errors Check(const Case& c, uint64_t seed) {
  const AttentionShape& s = c.shape;
  const int64_t tokens = s.batch * s.seq, width = (s.heads + 2 * s.kv_heads) * s.head_dim;
  const auto qkv = RandomBf16(tokens * width, seed);
  const auto dout = RandomBf16(tokens * s.heads * s.head_dim, seed + 1);
  const Outputs got = RunFlash<kDh>(s, qkv, dout);
  std::vector<double> out, lse, dqkv;
  AttentionForwardReference(s, Wide(qkv), out, lse);
  AttentionBackwardReference(s, Wide(qkv), Wide(dout), dqkv);
  const auto all = [](size_t) { return true; };
  const auto column = [&](int64_t from, int64_t to) {
    return [=](size_t i) {
      const int64_t col = static_cast<int64_t>(i) % width;
      return col >= from * s.head_dim && col < to * s.head_dim;
    };
  };
  const auto bf = [](const std::vector<uint16_t>& v) {
    return [&v](size_t i) { return ToFloat(Bf16{v[i]}); };
  };
  double lse_err = 0;
  for (size_t i = 0; i < lse.size(); ++i) {
    lse_err = std::max(lse_err, std::abs(static_cast<double>(got.lse[i]) - lse[i]));
  }
  const int64_t H = s.heads, Hkv = s.kv_heads;
  return Errors{.out = NormwiseError(bf(got.out), out, all),
                .lse = lse_err,
                .dq = NormwiseError(bf(got.dqkv), dqkv, column(0, H)),
                .dk = NormwiseError(bf(got.dqkv), dqkv, column(H, H + Hkv)),
                .dv = NormwiseError(bf(got.dqkv), dqkv, column(H + Hkv, H + 2 * Hkv))};
}

// Bounds: bf16 outputs carry up to 2^-9 relative rounding (≈ 1.1e-3 normwise by itself), and P
// and dS are rounded to bf16 before their products, as FlashAttention does; measured here ≈
// 1.6–1.9e-3 normwise for out and 2.2–3.0e-3 for the gradients. lse is fp32 throughout.
void ExpectWithinBounds(const Case& c, const Errors& e) {
  SCOPED_TRACE(c.name);
  EXPECT_LT(e.out, 4e-3) << "out: normwise error against the double definition";
  EXPECT_LT(e.lse, 1e-5) << "lse: largest absolute error";
  EXPECT_LT(e.dq, 6e-3) << "dq: normwise error";
  EXPECT_LT(e.dk, 6e-3) << "dk: normwise error";
  EXPECT_LT(e.dv, 6e-3) << "dv: normwise error";
  std::printf("%-28s out %.2e  lse %.2e  dq %.2e  dk %.2e  dv %.2e\n", c.name, e.out, e.lse, e.dq,
              e.dk, e.dv);
}

TEST(FlashTcEmulationTest, HeadDim32GqaAcrossTwoSequences) {
  const Case c{{2, 77, 4, 2, 32, Positions::kRotary, 10000.0}, "gqa dh32 S77 B2"};
  ExpectWithinBounds(c, Check<32>(c, 11));
}

TEST(FlashTcEmulationTest, HeadDim48PaddedMqaAlibiThreeTiles) {
  const Case c{{1, 130, 3, 1, 48, Positions::kAlibi, 10000.0}, "mqa dh48 alibi S130"};
  ExpectWithinBounds(c, Check<64>(c, 21));
}

TEST(FlashTcEmulationTest, HeadDim64MhaShortSequence) {
  const Case c{{1, 9, 2, 2, 64, Positions::kRotary, 10000.0}, "mha dh64 S9"};
  ExpectWithinBounds(c, Check<64>(c, 31));
}

TEST(FlashTcEmulationTest, HeadDim64FourTilesAlibiGqa) {
  const Case c{{1, 200, 4, 2, 64, Positions::kAlibi, 10000.0}, "gqa dh64 alibi S200"};
  ExpectWithinBounds(c, Check<64>(c, 61));
}

TEST(FlashTcEmulationTest, HeadDim128ExactTiles) {
  const Case c{{1, 128, 2, 1, 128, Positions::kRotary, 500000.0}, "gqa dh128 S128"};
  ExpectWithinBounds(c, Check<128>(c, 41));
}

// Every output element has one writer and the fibers run in a fixed order, so two runs agree
// bit for bit; on the GPU the same holds because no reduction depends on scheduling.
TEST(FlashTcEmulationTest, RepeatsBitForBit) {
  const AttentionShape s{1, 70, 2, 1, 32, Positions::kRotary, 10000.0};
  const int64_t tokens = s.batch * s.seq, width = (s.heads + 2 * s.kv_heads) * s.head_dim;
  const auto qkv = RandomBf16(tokens * width, 51);
  const auto dout = RandomBf16(tokens * s.heads * s.head_dim, 52);
  const Outputs first = RunFlash<32>(s, qkv, dout), second = RunFlash<32>(s, qkv, dout);
  EXPECT_EQ(first.out, second.out);
  EXPECT_EQ(first.dqkv, second.dqkv);
  for (size_t i = 0; i < first.lse.size(); ++i) ASSERT_EQ(first.lse[i], second.lse[i]) << i;
}

}  // namespace
}  // namespace parity::kernels::testing
