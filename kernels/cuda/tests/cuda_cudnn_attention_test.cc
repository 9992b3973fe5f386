// cuDNN's fused attention (cudnn_sdpa.h) on the GPU, called directly rather than through the op
// table, so that a silent fallback cannot pass for it: on a GPU with cuDNN, every shape here must
// get a plan and run (a refusal fails the test with cuDNN's reason), match the double-precision
// definition on the same bf16 inputs, repeat bit for bit, and pair with the tensor-core kernels
// (a cuDNN forward's lse drives the tensor-core backward, and the reverse) — the two paths'
// contract, since either may run a given pass. Skips without a GPU, like the other op tests.
#include "kernels/backend/op_table_bf16.h"
#include "kernels/cpu/ops_attention.h"
#include "kernels/cuda/cudnn_attention.h"
#ifdef PARITY_HAVE_CUDNN
#include "kernels/cuda/cudnn_sdpa.h"
#endif
#include "kernels/cuda/flash_tc_launch.h"
#include "kernels/cuda/tests/attention_reference.h"
#include "kernels/cuda/tests/cuda_test_util.h"

namespace parity::kernels::testing {
namespace {

using CudaCudnnAttentionTest = CudaOpsTest;

// delta[(b·H + h)·S + i] = Σ_d dout·out over query i's head h: the backward's row term.
std::vector<float> RowSums(const AttentionShape& s, const std::vector<float>& out,
                           const std::vector<float>& dout) {
  std::vector<float> delta(static_cast<size_t>(s.batch * s.heads * s.seq));
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < s.heads; ++h) {
      for (int64_t i = 0; i < s.seq; ++i) {
        const int64_t row = ((b * s.seq + i) * s.heads + h) * s.head_dim;
        double sum = 0.0;
        for (int64_t d = 0; d < s.head_dim; ++d) {
          sum += static_cast<double>(out[static_cast<size_t>(row + d)]) *
                 dout[static_cast<size_t>(row + d)];
        }
        delta[static_cast<size_t>((b * s.heads + h) * s.seq + i)] = static_cast<float>(sum);
      }
    }
  }
  return delta;
}

struct CudnnCase {
  AttentionShape shape;
  const char* name;
};

TEST_F(CudaCudnnAttentionTest, MatchesTheDefinitionRepeatsAndPairsWithTheTensorCoreKernels) {
#ifndef PARITY_HAVE_CUDNN
  GTEST_SKIP() << "built without cuDNN (no libcudnn beside the CUDA toolkit)";
#endif
  const CudnnCase cases[] = {{{2, 77, 4, 2, 32, Positions::kRotary, 10000.0}, "gqa dh32 S77"},
                             {{2, 256, 4, 4, 64, Positions::kRotary, 10000.0}, "mha dh64 S256"},
                             {{1, 200, 4, 1, 128, Positions::kRotary, 500000.0}, "mqa dh128 S200"},
                             {{2, 512, 2, 2, 128, Positions::kRotary, 10000.0}, "mha dh128 S512"}};
  uint64_t seed = 880;
  for (const CudnnCase& c : cases) {
    const AttentionShape s = c.shape;
    const std::string what = std::string("cuDNN attention ") + c.name;
    const int64_t tokens = s.batch * s.seq, width = (s.heads + 2 * s.kv_heads) * s.head_dim;
    const int64_t out_width = s.heads * s.head_dim, nl = s.batch * s.heads * s.seq;
    const auto qkv = RandomBf16(tokens * width, ++seed);
    const auto dout = RandomBf16(tokens * out_width, ++seed);
    const Bf16* qkvd = Upload(qkv);
    const Bf16* doutd = Upload(dout);
    Bf16 *out = Alloc<Bf16>(tokens * out_width), *dqkv = Alloc<Bf16>(tokens * width);
    float* lse = Alloc<float>(nl);

    ASSERT_TRUE(cuda::CudnnSdpaForward(Gpu(), s, out, lse, qkvd))
        << what << ": cuDNN declined the forward (its reason is on stderr)";
    ASSERT_TRUE(cuda::CudnnSdpaBackward(Gpu(), s, dqkv, doutd, out, lse, qkvd))
        << what << ": cuDNN declined the backward (its reason is on stderr)";
    const auto got_out = Download(out, tokens * out_width);
    const auto got_lse = Download(lse, nl);
    const auto grad = Download(dqkv, tokens * width);

    std::vector<double> ref_out, ref_lse, ref_dqkv;
    const auto wide = Wide(qkv);
    AttentionForwardReference(s, wide, ref_out, ref_lse);
    AttentionBackwardReference(s, wide, Wide(dout), ref_dqkv);
    // P and dS are rounded to bf16 before their products, as in the tensor-core kernels: the
    // same bounds (kernels_cuda_ops_test's RopeAndAttention).
    ExpectClose(what + " lse", got_lse, ref_lse, 1e-5);
    ExpectNormwise(what + " out", Widen(got_out), ref_out, 4e-3);
    ExpectNormwise(what + " dqkv", Widen(grad), ref_dqkv, 6e-3);

    ASSERT_TRUE(cuda::CudnnSdpaForward(Gpu(), s, out, lse, qkvd));
    ASSERT_TRUE(cuda::CudnnSdpaBackward(Gpu(), s, dqkv, doutd, out, lse, qkvd));
    EXPECT_EQ(Bits(Download(out, tokens * out_width)), Bits(got_out)) << what << ": forward";
    EXPECT_EQ(Download(lse, nl), got_lse) << what << ": lse is not deterministic";
    EXPECT_EQ(Bits(Download(dqkv, tokens * width)), Bits(grad)) << what << ": backward";

    if (!cuda::FlashTcSupports(s, qkvd, out)) continue;
    // The tensor-core backward from cuDNN's forward (its out and lse).
    Bf16* dqkv_tc = Alloc<Bf16>(tokens * width);
    const float* delta = Upload(RowSums(s, Widen(got_out), Widen(dout)));
    cuda::FlashTcBackward(Gpu(), s, dqkv_tc, doutd, lse, delta, qkvd);
    ExpectNormwise(what + " tensor-core dqkv from cuDNN's lse",
                   Widen(Download(dqkv_tc, tokens * width)), ref_dqkv, 6e-3);
    // cuDNN's backward from the tensor-core forward.
    Bf16* out_tc = Alloc<Bf16>(tokens * out_width);
    float* lse_tc = Alloc<float>(nl);
    cuda::FlashTcForward(Gpu(), s, out_tc, lse_tc, qkvd);
    ASSERT_TRUE(cuda::CudnnSdpaBackward(Gpu(), s, dqkv, doutd, out_tc, lse_tc, qkvd));
    ExpectNormwise(what + " cuDNN dqkv from the tensor-core lse",
                   Widen(Download(dqkv, tokens * width)), ref_dqkv, 6e-3);
  }
}

// A backward whose workspace would pass the cap runs as slices of the batch: the same gradients
// as one call (each sequence's depend on it alone), within the summation-order noise of another
// plan shape.
TEST_F(CudaCudnnAttentionTest, ABackwardOverTheWorkspaceCapRunsInSlicesWithTheSameGradients) {
#ifndef PARITY_HAVE_CUDNN
  GTEST_SKIP() << "built without cuDNN (no libcudnn beside the CUDA toolkit)";
#else
  const AttentionShape s{5, 256, 4, 2, 64, Positions::kRotary, 10000.0};
  const int64_t tokens = s.batch * s.seq, width = (s.heads + 2 * s.kv_heads) * s.head_dim;
  const int64_t out_width = s.heads * s.head_dim, nl = s.batch * s.heads * s.seq;
  const Bf16* qkv = Upload(RandomBf16(tokens * width, 991));
  const Bf16* dout = Upload(RandomBf16(tokens * out_width, 992));
  Bf16 *out = Alloc<Bf16>(tokens * out_width), *whole = Alloc<Bf16>(tokens * width);
  Bf16* sliced = Alloc<Bf16>(tokens * width);
  float* lse = Alloc<float>(nl);
  ASSERT_TRUE(cuda::CudnnSdpaForward(Gpu(), s, out, lse, qkv));
  ASSERT_TRUE(cuda::CudnnSdpaBackward(Gpu(), s, whole, dout, out, lse, qkv));
  // B·H·S² bf16 values is 1.25 MiB here: a 0.6 MiB cap makes slices of two sequences (2 + 2 + 1).
  ASSERT_TRUE(cuda::CudnnSdpaBackwardWithin(Gpu(), s, sliced, dout, out, lse, qkv, 600 << 10));
  const auto a = Widen(Download(whole, tokens * width));
  const auto b = Widen(Download(sliced, tokens * width));
  ExpectNormwise("sliced against whole backward", b, ToDouble(a), 1e-5);
  // A cap below one sequence's need declines (the op then runs the tensor-core kernels).
  EXPECT_FALSE(cuda::CudnnSdpaBackwardWithin(
      Gpu(), AttentionShape{1, 512, 4, 2, 64, Positions::kRotary, 1e4}, sliced, dout, out, lse, qkv,
      1 << 10));
#endif
}

}  // namespace
}  // namespace parity::kernels::testing
