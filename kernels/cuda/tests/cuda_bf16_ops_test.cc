// GPU checks of the bf16 mode's op table (Bf16OpTable, backend/op_table_bf16.h): every bf16 op on
// the CUDA device against the CPU's reference ops (cpu/ops_*.h in double, attention against
// attention_reference.h) run on the same bf16-rounded inputs, widened.
//
// Tolerances, from what bf16 can represent:
//   - an output stored in bf16 is rounded once, so each element may differ from the exact value
//     by 2^-8 of its magnitude, plus the fp32 math's own error before the rounding: 1e-5·max|ref|
//     for elementwise ops, 1e-4·max|ref| for reductions and GEMMs (ExpectCloseBf16);
//   - fp32 outputs keep the fp32 tests' bounds (1e-5 normwise elementwise, 1e-4 reductions);
//   - a bf16 GEMM equals the fp32 GEMM of the same widened values within 1e-5 normwise: products
//     of bf16 values are exact in fp32, only the summation order differs (GemmVsF32Tol);
//   - the attention backward reads its bf16 `out` (delta = rowsum(dout·out)), which the
//     reference recomputes exactly: 1e-2 normwise, the bound for chains of bf16 GEMM-like steps.
// FLOP counts equal the fp32 ops', and every op repeats bit for bit on a second run.
#include "kernels/backend/op_table_bf16.h"
#include "kernels/cpu/ops_attention.h"
#include "kernels/cpu/ops_dense.h"
#include "kernels/cpu/ops_grouped.h"
#include "kernels/cpu/ops_moe.h"
#include "kernels/cuda/flash_tc_launch.h"
#ifdef PARITY_HAVE_CUDNN
#include "kernels/cuda/cudnn_sdpa.h"
#endif
#include "kernels/cuda/tests/attention_reference.h"
#include "kernels/cuda/tests/cuda_test_util.h"

namespace parity::kernels::testing {
namespace {

constexpr double kTol = 1e-5;        // fp32 math of elementwise ops
constexpr double kReduceTol = 1e-4;  // fp32 math of reductions, GEMMs, attention
constexpr double kChainTol = 1e-2;   // chains through bf16-rounded intermediates

// bf16 GEMM vs the fp32 GEMM of the same values, over a reduction of length k: 1e-5, widened
// past k ≈ 670 because tensor cores round their fp32 accumulator toward zero once per block of
// about 8 products (Fasi et al., "Numerical behavior of NVIDIA tensor cores", 2021): at most
// k/8 roundings of 2^-23 relative each, a bias of ≤ 1.5e-5 of the partial sums at k = 1024.
double GemmVsF32Tol(int64_t k) { return std::max(1e-5, static_cast<double>(k / 8) * 0x1.0p-23); }

class CudaBf16OpsTest : public CudaOpsTest {
 protected:
  void SetUp() override {
    CudaOpsTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    ASSERT_NE(bf16_, nullptr) << "the CUDA device offers no bf16 table";
  }
};

TEST_F(CudaBf16OpsTest, TableIsCompleteAndItsFp32EntriesAreTheFp32Ops) {
  EXPECT_TRUE(bf16_->Complete()) << "Bf16OpTable has an unset entry";
  EXPECT_EQ(bf16_->embedding_forward, ops_->embedding_forward);
  EXPECT_EQ(bf16_->embedding_backward, ops_->embedding_backward);
  EXPECT_EQ(bf16_->cross_entropy_forward, ops_->cross_entropy_forward);
  EXPECT_EQ(bf16_->cross_entropy_backward, ops_->cross_entropy_backward);
  EXPECT_EQ(bf16_->route_forward, ops_->route_forward);
  EXPECT_EQ(bf16_->route_backward, ops_->route_backward);
  EXPECT_EQ(bf16_->routing_plan, ops_->routing_plan);
  EXPECT_EQ(bf16_->bias_update, ops_->bias_update);
  EXPECT_EQ(bf16_->sum_squares, ops_->sum_squares);
  EXPECT_EQ(bf16_->adamw_update, ops_->adamw_update);
}

// cast_to_bf16 is __float2bfloat16_rn; bf16.h's ToBf16 is the host definition. They must agree
// bit for bit on every non-NaN input: ties (both directions), subnormals, overflow to infinity.
TEST_F(CudaBf16OpsTest, CastToBf16RoundsToNearestEven) {
  std::vector<float> src = RandomFloats(100'003, 70);
  for (size_t i = 0; i < src.size(); i += 3) src[i] *= 1e-30f;  // tiny magnitudes too
  const uint32_t special[] = {0x3f808000u,  // 1 + 2^-8: a tie, rounds down to the even 1.0
                              0x3f818000u,  // a tie that rounds up to the even neighbour
                              0x3f808001u,  // just above a tie: up
                              0x00000001u, 0x00008000u, 0x007fffffu, 0x80000001u,  // subnormals
                              0x7f7fffffu, 0xff7fffffu,  // ±FLT_MAX: round to ±infinity
                              0x7f7f7fffu,               // largest value that stays finite
                              0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u,  // ±0, ±infinity
                              0x7fc00000u, 0xffc00001u, 0x7f800001u};              // NaNs
  for (uint32_t u : special) src.push_back(std::bit_cast<float>(u));
  const int64_t n = static_cast<int64_t>(src.size());
  Bf16* dst = Alloc<Bf16>(n);
  bf16_->cast_to_bf16(Gpu(), n, dst, Upload(src));
  const auto got = Download(dst, n);
  int64_t mismatches = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (std::isnan(src[i])) {
      EXPECT_TRUE(std::isnan(ToFloat(got[i]))) << "cast_to_bf16: NaN must stay NaN at " << i;
      continue;
    }
    if (got[i].bits != ToBf16(src[i]).bits && ++mismatches <= 5) {
      ADD_FAILURE() << "cast_to_bf16(" << src[i] << " = 0x" << std::hex
                    << std::bit_cast<uint32_t>(src[i]) << "): cuda 0x" << got[i].bits
                    << ", round-to-nearest-even 0x" << ToBf16(src[i]).bits;
    }
  }
  EXPECT_EQ(mismatches, 0) << "cast_to_bf16 differs from ToBf16 on " << mismatches << " inputs";
  EXPECT_EQ(Gpu().flops->Get(FlopKind::kModel) + Gpu().flops->Get(FlopKind::kElementwise), 0.0)
      << "a cast is not counted";
}

struct MatmulCase {
  MatmulShape shape;
  Accumulate acc;
  bool with_dx;
  int64_t offset;  // elements: 2-byte offsets exercise plans for unaligned bf16 pointers
};

// Inputs of one matmul case, host side; the bf16 ones already rounded.
struct MatmulInputs {
  std::vector<Bf16> x, w, y0, dy, dx0;
  std::vector<float> y0_f32, dy_f32, dw0;
};

// Outputs of the four bf16 matmul entries, each from fresh copies of the inputs.
struct MatmulOutputs {
  std::vector<Bf16> y, dx, dx_f32;       // matmul_forward, matmul_backward(_f32) dx
  std::vector<float> y_f32, dw, dw_f32;  // matmul_forward_f32, matmul_backward(_f32) dw
};

class CudaBf16MatmulTest : public CudaBf16OpsTest {
 protected:
  template <typename T>
  T* UploadAt(const std::vector<T>& v, int64_t offset) {
    std::vector<T> padded(offset);
    padded.insert(padded.end(), v.begin(), v.end());
    return Upload(padded) + offset;
  }
  MatmulOutputs Run(const MatmulCase& c, const MatmulInputs& in) {
    const MatmulShape s = c.shape;
    const int64_t o = c.offset, nx = s.rows * s.in, nw = s.out * s.in, ny = s.rows * s.out;
    const Bf16 *x = UploadAt(in.x, o), *w = UploadAt(in.w, o);
    Bf16 *y = UploadAt(in.y0, o), *dx = UploadAt(in.dx0, o), *dx2 = UploadAt(in.dx0, o);
    float *y32 = UploadAt(in.y0_f32, o), *dw = UploadAt(in.dw0, o), *dw2 = UploadAt(in.dw0, o);
    bf16_->matmul_forward(Gpu(), s, y, x, w, c.acc, FlopKind::kModel);
    bf16_->matmul_forward_f32(Gpu(), s, y32, x, w, c.acc, FlopKind::kModel);
    bf16_->matmul_backward(Gpu(), s, c.with_dx ? dx : nullptr, dw, UploadAt(in.dy, o), x, w, c.acc,
                           FlopKind::kModel);
    bf16_->matmul_backward_f32(Gpu(), s, c.with_dx ? dx2 : nullptr, dw2, UploadAt(in.dy_f32, o), x,
                               w, c.acc, FlopKind::kModel);
    return {Download(y, ny),   Download(dx, nx), Download(dx2, nx),
            Download(y32, ny), Download(dw, nw), Download(dw2, nw)};
  }
};

// The references: the CPU in double on the widened bf16 values. matmul_backward_f32 rounds its
// fp32 dy to bf16 before the tensor-core GEMMs (ops.h), so its reference uses bf16(dy).
TEST_F(CudaBf16MatmulTest, MatchesTheReferenceAndTheFp32Gemm) {
  const MatmulCase cases[] = {{{256, 128, 384}, Accumulate::kNo, true, 0},
                              {{333, 97, 61}, Accumulate::kYes, true, 1},
                              {{5, 128, 256}, Accumulate::kNo, false, 3},
                              {{1024, 352, 128}, Accumulate::kYes, true, 0}};
  uint64_t seed = 520;
  for (const MatmulCase& c : cases) {
    const MatmulShape s = c.shape;
    const std::string what = "bf16 matmul " + std::to_string(s.rows) + "x" + std::to_string(s.in) +
                             "x" + std::to_string(s.out);
    const int64_t nx = s.rows * s.in, nw = s.out * s.in, ny = s.rows * s.out;
    MatmulInputs in{.x = RandomBf16(nx, ++seed),
                    .w = RandomBf16(nw, ++seed),
                    .y0 = RandomBf16(ny, ++seed),
                    .dy = RandomBf16(ny, ++seed),
                    .dx0 = RandomBf16(nx, ++seed),
                    .y0_f32 = RandomFloats(ny, ++seed),
                    .dy_f32 = RandomFloats(ny, ++seed),
                    .dw0 = RandomFloats(nw, ++seed)};
    const MatmulOutputs got = Run(c, in);

    const auto x = Wide(in.x), w = Wide(in.w), dy = Wide(in.dy);
    const auto dy_f32_rounded = Wide(RoundToBf16(in.dy_f32));
    auto ry = Wide(in.y0), ry32 = ToDouble(in.y0_f32);
    auto rdx = Wide(in.dx0), rdx2 = Wide(in.dx0), rdw = ToDouble(in.dw0), rdw2 = ToDouble(in.dw0);
    cpu::MatmulForward<double>(cpu_, s, ry.data(), x.data(), w.data(), c.acc, FlopKind::kModel);
    cpu::MatmulForward<double>(cpu_, s, ry32.data(), x.data(), w.data(), c.acc, FlopKind::kModel);
    cpu::MatmulBackward<double>(cpu_, s, c.with_dx ? rdx.data() : nullptr, rdw.data(), dy.data(),
                                x.data(), w.data(), c.acc, FlopKind::kModel);
    cpu::MatmulBackward<double>(cpu_, s, c.with_dx ? rdx2.data() : nullptr, rdw2.data(),
                                dy_f32_rounded.data(), x.data(), w.data(), c.acc, FlopKind::kModel);
    ExpectCloseBf16(what + " matmul_forward y", got.y, ry, kReduceTol);
    ExpectClose(what + " matmul_forward_f32 y", got.y_f32, ry32, kReduceTol);
    ExpectCloseBf16(what + " matmul_backward dx", got.dx, rdx, kReduceTol);
    ExpectClose(what + " matmul_backward dw (+=)", got.dw, rdw, kReduceTol);
    ExpectCloseBf16(what + " matmul_backward_f32 dx", got.dx_f32, rdx2, kReduceTol);
    ExpectClose(what + " matmul_backward_f32 dw (+=)", got.dw_f32, rdw2, kReduceTol);
    ExpectSameFlops(what);

    // Bit for bit on a second run (fixed plan per shape, fixed workspace, one stream).
    const MatmulOutputs again = Run(c, in);
    EXPECT_EQ(Bits(again.y), Bits(got.y)) << what << ": matmul_forward is not deterministic";
    EXPECT_EQ(again.y_f32, got.y_f32) << what << ": matmul_forward_f32 is not deterministic";
    EXPECT_EQ(Bits(again.dx), Bits(got.dx)) << what << ": matmul_backward dx";
    EXPECT_EQ(again.dw, got.dw) << what << ": matmul_backward dw is not deterministic";
    EXPECT_EQ(Bits(again.dx_f32), Bits(got.dx_f32)) << what << ": matmul_backward_f32 dx";
    EXPECT_EQ(again.dw_f32, got.dw_f32) << what << ": matmul_backward_f32 dw";

    // Against the fp32 GEMMs of the same widened values: only the summation order differs.
    const float* xf = Upload(Widen(in.x));
    const float* wf = Upload(Widen(in.w));
    float* y32 = Upload(in.y0_f32);
    float* dw32 = Upload(in.dw0);
    ops_->matmul_forward(Gpu(), s, y32, xf, wf, c.acc, FlopKind::kModel);
    ops_->matmul_backward(Gpu(), s, nullptr, dw32, Upload(Widen(in.dy)), xf, wf, c.acc,
                          FlopKind::kModel);
    ExpectClose(what + " matmul_forward_f32 vs the fp32 GEMM", got.y_f32, Download(y32, ny),
                GemmVsF32Tol(s.in));
    ExpectClose(what + " matmul_backward dw vs the fp32 GEMM", got.dw, Download(dw32, nw),
                GemmVsF32Tol(s.rows));
    Gpu().flops->Reset();
    cpu_flops_.Reset();
  }
}

TEST_F(CudaBf16OpsTest, RmsNorm) {
  const int64_t t = 333, d = 160;
  const auto x = RandomFloats(t * d, 507), w = RandomFloats(d, 508);
  const auto g = RandomBf16(t * d, 509);
  const auto dx0 = RandomFloats(t * d, 510), dw0 = RandomFloats(d, 511);
  Bf16* out = Alloc<Bf16>(t * d);
  float* rstd = Alloc<float>(t);
  float *dx = Upload(dx0), *dw = Upload(dw0);
  const float *xd = Upload(x), *wd = Upload(w);
  const Bf16* gd = Upload(g);
  bf16_->rmsnorm_forward(Gpu(), t, d, out, rstd, xd, wd);
  bf16_->rmsnorm_backward(Gpu(), t, d, dx, dw, gd, xd, wd, rstd);
  std::vector<double> ref_out(t * d), ref_rstd(t), ref_dx = ToDouble(dx0), ref_dw = ToDouble(dw0);
  const auto xr = ToDouble(x), wr = ToDouble(w);
  cpu::RmsNormForward<double>(cpu_, t, d, ref_out.data(), ref_rstd.data(), xr.data(), wr.data());
  cpu::RmsNormBackward<double>(cpu_, t, d, ref_dx.data(), ref_dw.data(), Wide(g).data(), xr.data(),
                               wr.data(), ref_rstd.data());
  ExpectCloseBf16("bf16 rmsnorm_forward out", Download(out, t * d), ref_out, kTol);
  ExpectClose("bf16 rmsnorm_forward rstd", Download(rstd, t), ref_rstd, kTol);
  ExpectClose("bf16 rmsnorm_backward dx (+=)", Download(dx, t * d), ref_dx, kReduceTol);
  ExpectClose("bf16 rmsnorm_backward dw (+=)", Download(dw, d), ref_dw, kReduceTol);
  ExpectSameFlops("bf16 rmsnorm");
  const auto first_out = Download(out, t * d);
  const auto first_dx = Download(dx, t * d), first_dw = Download(dw, d);
  gpu_->FromHost(dw, dw0.data(), d * sizeof(float));
  gpu_->FromHost(dx, dx0.data(), t * d * sizeof(float));
  bf16_->rmsnorm_forward(Gpu(), t, d, out, rstd, xd, wd);
  bf16_->rmsnorm_backward(Gpu(), t, d, dx, dw, gd, xd, wd, rstd);
  EXPECT_EQ(Bits(Download(out, t * d)), Bits(first_out)) << "bf16 rmsnorm_forward";
  EXPECT_EQ(Download(dx, t * d), first_dx) << "bf16 rmsnorm_backward dx is not deterministic";
  EXPECT_EQ(Download(dw, d), first_dw) << "bf16 rmsnorm_backward dw is not deterministic";
}

TEST_F(CudaBf16OpsTest, SwiGlu) {
  const int64_t t = 301, f = 176;
  const auto ab = RandomBf16(t * 2 * f, 530), dg = RandomBf16(t * f, 531);
  Bf16 *g = Alloc<Bf16>(t * f), *dab = Alloc<Bf16>(t * 2 * f);
  const Bf16 *abd = Upload(ab), *dgd = Upload(dg);
  bf16_->swiglu_forward(Gpu(), t, f, g, abd);
  bf16_->swiglu_backward(Gpu(), t, f, dab, dgd, abd);
  std::vector<double> rg(t * f), rdab(t * 2 * f);
  const auto abr = Wide(ab);
  cpu::SwiGluForward<double>(cpu_, t, f, rg.data(), abr.data());
  cpu::SwiGluBackward<double>(cpu_, t, f, rdab.data(), Wide(dg).data(), abr.data());
  const auto first_g = Download(g, t * f), first_dab = Download(dab, t * 2 * f);
  ExpectCloseBf16("bf16 swiglu_forward g", first_g, rg, kTol);
  ExpectCloseBf16("bf16 swiglu_backward dab", first_dab, rdab, kTol);
  ExpectSameFlops("bf16 swiglu");
  bf16_->swiglu_forward(Gpu(), t, f, g, abd);
  bf16_->swiglu_backward(Gpu(), t, f, dab, dgd, abd);
  EXPECT_EQ(Bits(Download(g, t * f)), Bits(first_g)) << "bf16 swiglu_forward";
  EXPECT_EQ(Bits(Download(dab, t * 2 * f)), Bits(first_dab)) << "bf16 swiglu_backward";
}

// Whether the bf16 attention op may run a path that rounds the probabilities P (and dS) to bf16:
// cuDNN's fused attention (where it may plan the shape) or the tensor-core kernels.
bool RoundsProbabilities(const AttentionShape& s, const void* qkv, const void* out) {
#ifdef PARITY_HAVE_CUDNN
  if (cuda::CudnnSdpaRefusal(s).empty()) return true;
#endif
  return cuda::FlashTcSupports(s, qkv, out);
}

struct AttentionCase {
  AttentionShape shape;
  const char* name;
};

// One case per head-dim instance (≤32, ≤64, ≤128, ≤256), GQA/MQA/MHA, rotary and ALiBi.
TEST_F(CudaBf16OpsTest, RopeAndAttention) {
  const AttentionCase cases[] = {
      {{2, 77, 4, 2, 32, Positions::kRotary, 10000.0}, "gqa dh32 rotary"},
      {{1, 130, 3, 1, 48, Positions::kAlibi, 10000.0}, "mqa dh48 alibi"},
      {{1, 64, 2, 2, 128, Positions::kRotary, 500000.0}, "mha dh128"},
      {{1, 40, 2, 1, 200, Positions::kRotary, 10000.0}, "dh200"}};
  uint64_t seed = 550;
  for (const AttentionCase& c : cases) {
    const AttentionShape s = c.shape;
    const std::string what = std::string("bf16 attention ") + c.name;
    const int64_t tokens = s.batch * s.seq, width = (s.heads + 2 * s.kv_heads) * s.head_dim;
    const int64_t out_width = s.heads * s.head_dim, nl = s.batch * s.heads * s.seq;
    const auto qkv = RandomBf16(tokens * width, ++seed);
    const auto dout = RandomBf16(tokens * out_width, ++seed);
    Bf16* qkvd = Upload(qkv);
    bf16_->rope_forward(Gpu(), s, qkvd);
    const auto rotated = Download(qkvd, tokens * width);
    auto rr = Wide(qkv);
    cpu::RopeForward<double>(cpu_, s, rr.data());
    ExpectCloseBf16(what + " rope_forward", rotated, rr, kTol);

    Bf16 *out = Alloc<Bf16>(tokens * out_width), *dqkv = Alloc<Bf16>(tokens * width);
    float* lse = Alloc<float>(nl);
    const Bf16* doutd = Upload(dout);
    bf16_->attention_forward(Gpu(), s, out, lse, qkvd);
    bf16_->attention_backward(Gpu(), s, dqkv, doutd, out, lse, qkvd);
    const auto rot = Wide(rotated);
    std::vector<double> ref_out, ref_lse, ref_dqkv;
    AttentionForwardReference(s, rot, ref_out, ref_lse);
    AttentionBackwardReference(s, rot, Wide(dout), ref_dqkv);
    const auto got_out = Download(out, tokens * out_width);
    const auto got_lse = Download(lse, nl);
    const auto grad = Download(dqkv, tokens * width);
    ExpectClose(what + " lse", got_lse, ref_lse, kTol);
    if (RoundsProbabilities(s, qkvd, out)) {
      // cuDNN and the tensor-core kernels round P and dS to bf16 before their products: bounds
      // measured under the host emulation (kernels_tc_emulation_test) with about 2× margin.
      ExpectNormwise(what + " out (P rounded)", Widen(got_out), ref_out, 4e-3);
      ExpectNormwise(what + " dqkv (P rounded)", Widen(grad), ref_dqkv, 6e-3);
    } else {
      ExpectCloseBf16(what + " out", got_out, ref_out, kReduceTol);
      ExpectClose(what + " dqkv", Widen(grad), ref_dqkv, kChainTol);
    }

    bf16_->attention_forward(Gpu(), s, out, lse, qkvd);
    bf16_->attention_backward(Gpu(), s, dqkv, doutd, out, lse, qkvd);
    EXPECT_EQ(Bits(Download(out, tokens * out_width)), Bits(got_out)) << what << ": forward";
    EXPECT_EQ(Download(lse, nl), got_lse) << what << ": lse is not deterministic";
    EXPECT_EQ(Bits(Download(dqkv, tokens * width)), Bits(grad)) << what << ": backward";

    bf16_->rope_backward(Gpu(), s, dqkv);
    auto rg = Wide(grad);
    cpu::RopeBackward<double>(cpu_, s, rg.data());
    ExpectCloseBf16(what + " rope_backward", Download(dqkv, tokens * width), rg, kTol);
    // FLOPs as the fp32 ops count them: one rope forward and backward, two attention forwards
    // and two backwards (the CPU's full S×S window).
    const double S = static_cast<double>(s.seq), bh = static_cast<double>(s.batch * s.heads);
    const double rope = s.positions == Positions::kRotary
                            ? 2 * 6.0 * tokens * (s.heads + s.kv_heads) * (s.head_dim / 2)
                            : 0.0;
    const FlopCounter& f = *Gpu().flops;
    EXPECT_EQ(f.Get(FlopKind::kModel), 2 * (4.0 + 8.0) * bh * S * S * s.head_dim) << what;
    EXPECT_EQ(f.Get(FlopKind::kElementwise), 4 * 4.0 * bh * S * S / 2 + rope) << what;
    gpu_->Context().flops->Reset();
    cpu_flops_.Reset();
  }
}

TEST_F(CudaBf16OpsTest, PermuteAndCombine) {
  const int64_t t = 301, k = 2, e = 9, d = 96, p = t * k;
  const auto expert = RandomExperts(t, k, e, 580);
  std::vector<int64_t> offsets;
  std::vector<int32_t> slot_of, token_of;
  ReferencePlan(t, k, e, expert, offsets, slot_of, token_of);
  const auto x = RandomBf16(t * d, 581), dxs = RandomBf16(p * d, 582);
  const auto ys = RandomBf16(p * d, 583), dx0 = RandomBf16(t * d, 584);
  const auto gate = RandomFloats(t * k, 585), dy = RandomFloats(t * d, 586);
  const auto y0 = RandomFloats(t * d, 587);
  const int32_t *slot_d = Upload(slot_of), *token_d = Upload(token_of);
  const Bf16 *xd = Upload(x), *dxsd = Upload(dxs), *ys_d = Upload(ys);
  const float *gate_d = Upload(gate), *dy_d = Upload(dy);
  Bf16 *xs = Alloc<Bf16>(p * d), *dx = Upload(dx0), *dys = Alloc<Bf16>(p * d);
  float *y = Upload(y0), *dgate = Alloc<float>(t * k);
  bf16_->permute_forward(Gpu(), p, d, xs, xd, token_d);
  bf16_->permute_backward(Gpu(), t, k, d, dx, dxsd, slot_d);
  bf16_->combine_forward(Gpu(), t, k, d, y, ys_d, gate_d, slot_d);
  bf16_->combine_backward(Gpu(), t, k, d, dys, dgate, dy_d, ys_d, gate_d, slot_d);

  std::vector<Bf16> rxs(p * d);
  cpu::PermuteForward<Bf16>(cpu_, p, d, rxs.data(), x.data(), token_of.data());
  const auto got_xs = Download(xs, p * d);
  EXPECT_EQ(Bits(got_xs), Bits(rxs)) << "bf16 permute_forward is a gather of bf16 values";
  auto rdx = Wide(dx0), ry = ToDouble(y0);
  std::vector<double> rdys(p * d), rdgate(t * k);
  const auto ysr = Wide(ys), gater = ToDouble(gate);
  cpu::PermuteBackward<double>(cpu_, t, k, d, rdx.data(), Wide(dxs).data(), slot_of.data());
  cpu::CombineForward<double>(cpu_, t, k, d, ry.data(), ysr.data(), gater.data(), slot_of.data());
  cpu::CombineBackward<double>(cpu_, t, k, d, rdys.data(), rdgate.data(), ToDouble(dy).data(),
                               ysr.data(), gater.data(), slot_of.data());
  const auto got_dx = Download(dx, t * d), got_dys = Download(dys, p * d);
  const auto got_y = Download(y, t * d), got_dgate = Download(dgate, t * k);
  ExpectCloseBf16("bf16 permute_backward dx (+=)", got_dx, rdx, kTol);
  ExpectClose("bf16 combine_forward y (+=, fp32)", got_y, ry, kTol);
  ExpectCloseBf16("bf16 combine_backward dys", got_dys, rdys, kTol);
  ExpectClose("bf16 combine_backward dgate (fp32)", got_dgate, rdgate, kReduceTol);
  ExpectSameFlops("bf16 permute/combine");

  gpu_->FromHost(dx, dx0.data(), t * d * sizeof(Bf16));
  gpu_->FromHost(y, y0.data(), t * d * sizeof(float));
  bf16_->permute_backward(Gpu(), t, k, d, dx, dxsd, slot_d);
  bf16_->combine_forward(Gpu(), t, k, d, y, ys_d, gate_d, slot_d);
  bf16_->combine_backward(Gpu(), t, k, d, dys, dgate, dy_d, ys_d, gate_d, slot_d);
  EXPECT_EQ(Bits(Download(dx, t * d)), Bits(got_dx)) << "bf16 permute_backward";
  EXPECT_EQ(Download(y, t * d), got_y) << "bf16 combine_forward is not deterministic";
  EXPECT_EQ(Bits(Download(dys, p * d)), Bits(got_dys)) << "bf16 combine_backward dys";
  EXPECT_EQ(Download(dgate, t * k), got_dgate) << "bf16 combine_backward dgate";
}

// The experts' GEMMs in the bf16 mode: bf16 y and dx (one grouped call each), fp32 dW (+=).
TEST_F(CudaBf16OpsTest, GroupedMatmul) {
  uint64_t seed = 760;
  for (const GroupedCase& c : GroupedCases()) {
    const int64_t G = static_cast<int64_t>(c.offsets.size()) - 1, R = c.rows, K = c.in, N = c.out;
    const std::string what = "bf16 grouped_matmul " + c.name;
    const auto x = RandomBf16(R * K, ++seed), w = RandomBf16(G * N * K, ++seed);
    const auto dy = RandomBf16(R * N, ++seed), y0 = RandomBf16(R * N, ++seed);
    const auto dx0 = RandomBf16(R * K, ++seed);
    const auto dw0 = RandomFloats(G * N * K, ++seed);
    const GroupedMatmulShape s{.groups = G,
                               .in = K,
                               .out = N,
                               .offsets = Upload(c.offsets),
                               .host_offsets = c.offsets.data()};
    const Bf16 *xd = UploadPadded(x, c.pad), *wd = UploadPadded(w, c.pad);
    const Bf16* dyd = UploadPadded(dy, c.pad);
    Bf16 *y = UploadPadded(y0, c.pad), *dx = UploadPadded(dx0, c.pad);
    float* dw = UploadPadded(dw0, c.pad);
    bf16_->grouped_matmul_forward(Gpu(), s, y, xd, wd, FlopKind::kModel);
    bf16_->grouped_matmul_backward(Gpu(), s, dx, dw, dyd, xd, wd, FlopKind::kModel);
    const GroupedMatmulShape hs{.groups = G,
                                .in = K,
                                .out = N,
                                .offsets = c.offsets.data(),
                                .host_offsets = c.offsets.data()};
    auto ry = Wide(y0), rdx = Wide(dx0), rdw = ToDouble(dw0);
    const auto rx = Wide(x), rw = Wide(w);
    cpu::GroupedMatmulForward<double>(cpu_, hs, ry.data(), rx.data(), rw.data(), FlopKind::kModel);
    cpu::GroupedMatmulBackward<double>(cpu_, hs, rdx.data(), rdw.data(), Wide(dy).data(), rx.data(),
                                       rw.data(), FlopKind::kModel);
    const auto got_y = Download(y, R * N), got_dx = Download(dx, R * K);
    const auto got_dw = Download(dw, G * N * K);
    // Rows outside the groups keep their bf16 values, which the reference kept too (exactly).
    ExpectCloseBf16(what + " y", got_y, ry, kReduceTol);
    ExpectCloseBf16(what + " dx", got_dx, rdx, kReduceTol);
    ExpectClose(what + " dw (+=, fp32)", got_dw, rdw, kReduceTol);
    for (int64_t r = 0; r < R; ++r) {
      if (r >= c.offsets.front() && r < c.offsets.back()) continue;
      for (int64_t j = 0; j < N; ++j) {
        ASSERT_EQ(got_y[r * N + j].bits, y0[r * N + j].bits) << what << ": y row " << r;
      }
      for (int64_t j = 0; j < K; ++j) {
        ASSERT_EQ(got_dx[r * K + j].bits, dx0[r * K + j].bits) << what << ": dx row " << r;
      }
    }
    ExpectSameFlops(what);

    gpu_->FromHost(dw, dw0.data(), dw0.size() * sizeof(float));
    bf16_->grouped_matmul_forward(Gpu(), s, y, xd, wd, FlopKind::kModel);
    bf16_->grouped_matmul_backward(Gpu(), s, dx, dw, dyd, xd, wd, FlopKind::kModel);
    EXPECT_EQ(Bits(Download(y, R * N)), Bits(got_y)) << what << ": y differs on a second run";
    EXPECT_EQ(Bits(Download(dx, R * K)), Bits(got_dx)) << what << ": dx differs on a second run";
    EXPECT_EQ(Download(dw, G * N * K), got_dw) << what << ": dw differs on a second run";
    gpu_->Context().flops->Reset();
  }
}

}  // namespace
}  // namespace parity::kernels::testing
