// GPU parity of the dense, attention and optimizer ops: each runs on the CUDA device and on the
// CPU reference (cpu/ops_*.h in double, or the direct attention definition in
// attention_reference.h) on the same random fp32 inputs. fp32 results must be within 1e-5
// (normwise relative), reductions within 1e-4, FLOP counts identical, and the reductions must
// repeat bit for bit.
#include "kernels/cpu/ops_attention.h"
#include "kernels/cpu/ops_dense.h"
#include "kernels/cpu/ops_optim.h"
#include "kernels/cuda/tests/attention_reference.h"
#include "kernels/cuda/tests/cuda_test_util.h"

namespace parity::kernels::testing {
namespace {

constexpr double kTol = 1e-5;        // elementwise fp32 ops
constexpr double kReduceTol = 1e-4;  // ops that sum over tokens, keys or features

TEST_F(CudaOpsTest, DeviceMovesMemoryAndFillsTheTable) {
  EXPECT_EQ(gpu_->Name().substr(0, 5), "cuda:") << gpu_->Name();
  EXPECT_EQ(gpu_->OpsF64(), nullptr);
  for (int k = 0; k < static_cast<int>(OpKind::kCount); ++k) {
    EXPECT_TRUE(ops_->Supports(static_cast<OpKind>(k))) << "op " << k << " missing";
  }
  float* a = Alloc<float>(1000);
  EXPECT_EQ(Download(a, 1000), std::vector<float>(1000, 0.0f)) << "Allocate must zero memory";
  const auto x = RandomFloats(1000, 1);
  gpu_->FromHost(a, x.data(), x.size() * sizeof(float));
  float* b = Alloc<float>(1000);
  gpu_->Copy(b, a, 1000 * sizeof(float));
  EXPECT_EQ(Download(b, 1000), x);
  gpu_->Zero(b + 10, 20 * sizeof(float));
  auto y = Download(b, 1000);
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(y[i], i >= 10 && i < 30 ? 0.0f : x[i]) << i;
  std::vector<float> part(5);
  buffers_.back()->CopyToHost(part.data(), 40 * sizeof(float), 5 * sizeof(float));
  EXPECT_EQ(part, std::vector<float>(x.begin() + 40, x.begin() + 45));
  // Queued transfers through pinned host memory: valid after the synchronisation.
  auto pinned = gpu_->AllocateHost(1000 * sizeof(float));
  ASSERT_TRUE(pinned.ok()) << pinned.status();
  float* host = (*pinned)->as<float>();
  std::copy(x.begin(), x.end(), host);
  gpu_->FromHostAsync(b, host, 1000 * sizeof(float));
  gpu_->Zero(a, 1000 * sizeof(float));
  gpu_->Copy(a, b, 1000 * sizeof(float));
  gpu_->DefaultStream().Synchronize();
  std::fill(host, host + 1000, -1.0f);  // only now: the queued upload reads `host` until here
  gpu_->ToHostAsync(host, a, 1000 * sizeof(float));
  gpu_->DefaultStream().Synchronize();
  EXPECT_EQ(std::vector<float>(host, host + 1000), x) << "FromHostAsync, then ToHostAsync";
}

TEST_F(CudaOpsTest, Embedding) {
  const int64_t t = 700, d = 96, v = 256;
  std::vector<int32_t> tokens(t);
  Rng rng{.seed = 3};
  for (auto& x : tokens) x = static_cast<int32_t>(rng.Below(40));  // repeats on purpose
  const auto table = RandomFloats(v * d, 4), dout = RandomFloats(t * d, 5);
  const auto dtable0 = RandomFloats(v * d, 6);
  float* out = Alloc<float>(t * d);
  float* dtable = Upload(dtable0);
  const int32_t* dtok = Upload(tokens);
  ops_->embedding_forward(Gpu(), t, d, out, dtok, Upload(table));
  ops_->embedding_backward(Gpu(), t, d, v, dtable, Upload(dout), dtok);
  std::vector<float> ref_out(t * d);
  cpu::EmbeddingForward<float>(cpu_, t, d, ref_out.data(), tokens.data(), table.data());
  EXPECT_EQ(Download(out, t * d), ref_out) << "embedding_forward is a copy";
  auto ref_dtable = ToDouble(dtable0);
  cpu::EmbeddingBackward<double>(cpu_, t, d, v, ref_dtable.data(), ToDouble(dout).data(),
                                 tokens.data());
  ExpectClose("embedding_backward dtable", Download(dtable, v * d), ref_dtable, kReduceTol);
  ExpectSameFlops("embedding");
}

TEST_F(CudaOpsTest, RmsNorm) {
  const int64_t t = 333, d = 160;
  const auto x = RandomFloats(t * d, 7), w = RandomFloats(d, 8), g = RandomFloats(t * d, 9);
  const auto dx0 = RandomFloats(t * d, 10), dw0 = RandomFloats(d, 11);
  float *out = Alloc<float>(t * d), *rstd = Alloc<float>(t);
  float *dx = Upload(dx0), *dw = Upload(dw0);
  const float *xd = Upload(x), *wd = Upload(w), *gd = Upload(g);
  ops_->rmsnorm_forward(Gpu(), t, d, out, rstd, xd, wd);
  ops_->rmsnorm_backward(Gpu(), t, d, dx, dw, gd, xd, wd, rstd);
  std::vector<double> ref_out(t * d), ref_rstd(t), ref_dx = ToDouble(dx0), ref_dw = ToDouble(dw0);
  const auto xr = ToDouble(x), wr = ToDouble(w);
  cpu::RmsNormForward<double>(cpu_, t, d, ref_out.data(), ref_rstd.data(), xr.data(), wr.data());
  cpu::RmsNormBackward<double>(cpu_, t, d, ref_dx.data(), ref_dw.data(), ToDouble(g).data(),
                               xr.data(), wr.data(), ref_rstd.data());
  ExpectClose("rmsnorm_forward out", Download(out, t * d), ref_out, kTol);
  ExpectClose("rmsnorm_forward rstd", Download(rstd, t), ref_rstd, kTol);
  ExpectClose("rmsnorm_backward dx (+=)", Download(dx, t * d), ref_dx, kReduceTol);
  ExpectClose("rmsnorm_backward dw (+=)", Download(dw, d), ref_dw, kReduceTol);
  // The weight-gradient reduction repeats bit for bit.
  const auto first = Download(dw, d);
  gpu_->FromHost(dw, dw0.data(), d * sizeof(float));
  gpu_->FromHost(dx, dx0.data(), t * d * sizeof(float));
  ops_->rmsnorm_backward(Gpu(), t, d, dx, dw, gd, xd, wd, rstd);
  EXPECT_EQ(Download(dw, d), first) << "rmsnorm_backward dw is not deterministic";
  gpu_->Context().flops->Reset();
  cpu_flops_.Reset();
}

struct MatmulCase {
  MatmulShape shape;
  Accumulate acc;
  bool with_dx;
  int64_t offset;  // floats: exercises pointers that are not 16-byte aligned
};

TEST_F(CudaOpsTest, Matmul) {
  const MatmulCase cases[] = {{{256, 128, 384}, Accumulate::kNo, true, 0},
                              {{333, 97, 61}, Accumulate::kYes, true, 1},
                              {{5, 128, 256}, Accumulate::kNo, false, 3},
                              {{1024, 352, 128}, Accumulate::kYes, true, 0}};
  uint64_t seed = 20;
  for (const MatmulCase& c : cases) {
    const MatmulShape s = c.shape;
    const std::string what = "matmul " + std::to_string(s.rows) + "x" + std::to_string(s.in) + "x" +
                             std::to_string(s.out);
    auto pad = [&](std::vector<float> v) {
      v.insert(v.begin(), c.offset, 0.0f);
      return v;
    };
    const auto x = RandomFloats(s.rows * s.in, ++seed), w = RandomFloats(s.out * s.in, ++seed);
    const auto y0 = RandomFloats(s.rows * s.out, ++seed), dy = RandomFloats(s.rows * s.out, ++seed);
    const auto dx0 = RandomFloats(s.rows * s.in, ++seed), dw0 = RandomFloats(s.out * s.in, ++seed);
    const float* xd = Upload(pad(x)) + c.offset;
    const float* wd = Upload(pad(w)) + c.offset;
    float* yd = Upload(pad(y0)) + c.offset;
    float* dxd = Upload(pad(dx0)) + c.offset;
    float* dwd = Upload(pad(dw0)) + c.offset;
    ops_->matmul_forward(Gpu(), s, yd, xd, wd, c.acc, FlopKind::kModel);
    ops_->matmul_backward(Gpu(), s, c.with_dx ? dxd : nullptr, dwd, Upload(pad(dy)) + c.offset, xd,
                          wd, c.acc, FlopKind::kModel);
    auto ry = ToDouble(y0), rdx = ToDouble(dx0), rdw = ToDouble(dw0);
    const auto rx = ToDouble(x), rw = ToDouble(w);
    cpu::MatmulForward<double>(cpu_, s, ry.data(), rx.data(), rw.data(), c.acc, FlopKind::kModel);
    cpu::MatmulBackward<double>(cpu_, s, c.with_dx ? rdx.data() : nullptr, rdw.data(),
                                ToDouble(dy).data(), rx.data(), rw.data(), c.acc, FlopKind::kModel);
    ExpectClose(what + " y", Download(yd, s.rows * s.out), ry, kReduceTol);
    ExpectClose(what + " dx", Download(dxd, s.rows * s.in), rdx, kReduceTol);
    ExpectClose(what + " dw (+=)", Download(dwd, s.out * s.in), rdw, kReduceTol);
    ExpectSameFlops(what);
  }
}

TEST_F(CudaOpsTest, SwiGlu) {
  const int64_t t = 301, f = 176;
  const auto ab = RandomFloats(t * 2 * f, 30), dg = RandomFloats(t * f, 31);
  float *g = Alloc<float>(t * f), *dab = Alloc<float>(t * 2 * f);
  const float* abd = Upload(ab);
  ops_->swiglu_forward(Gpu(), t, f, g, abd);
  ops_->swiglu_backward(Gpu(), t, f, dab, Upload(dg), abd);
  std::vector<double> rg(t * f), rdab(t * 2 * f);
  const auto abr = ToDouble(ab);
  cpu::SwiGluForward<double>(cpu_, t, f, rg.data(), abr.data());
  cpu::SwiGluBackward<double>(cpu_, t, f, rdab.data(), ToDouble(dg).data(), abr.data());
  ExpectClose("swiglu_forward", Download(g, t * f), rg, kTol);
  ExpectClose("swiglu_backward", Download(dab, t * 2 * f), rdab, kTol);
  ExpectSameFlops("swiglu");
}

TEST_F(CudaOpsTest, CrossEntropy) {
  const int64_t t = 517, v = 256;
  const auto logits = RandomFloats(t * v, 40, 3.0);
  std::vector<int32_t> targets(t);
  Rng rng{.seed = 41};
  for (auto& x : targets) x = static_cast<int32_t>(rng.Below(v));
  const double scale = 1.0 / 777.0;
  float *loss = Alloc<float>(t), *dl = Alloc<float>(t * v);
  const float* ld = Upload(logits);
  const int32_t* td = Upload(targets);
  ops_->cross_entropy_forward(Gpu(), t, v, loss, ld, td);
  ops_->cross_entropy_backward(Gpu(), t, v, dl, ld, td, scale);
  std::vector<double> rl(t), rdl(t * v);
  const auto lr = ToDouble(logits);
  cpu::CrossEntropyForward<double>(cpu_, t, v, rl.data(), lr.data(), targets.data());
  cpu::CrossEntropyBackward<double>(cpu_, t, v, rdl.data(), lr.data(), targets.data(), scale);
  ExpectClose("cross_entropy_forward", Download(loss, t), rl, kReduceTol);
  ExpectClose("cross_entropy_backward", Download(dl, t * v), rdl, kTol);
  ExpectSameFlops("cross_entropy");
}

struct AttentionCase {
  AttentionShape shape;
  const char* name;
};

// Rotary positions (forward and backward) and attention against the direct definition.
TEST_F(CudaOpsTest, RopeAndAttention) {
  const AttentionCase cases[] = {
      {{2, 77, 4, 2, 32, Positions::kRotary, 10000.0}, "gqa dh32 rotary"},
      {{1, 130, 3, 1, 48, Positions::kAlibi, 10000.0}, "mqa dh48 alibi"},
      {{1, 64, 2, 2, 128, Positions::kRotary, 500000.0}, "mha dh128"},
      {{3, 33, 2, 1, 16, Positions::kAlibi, 10000.0}, "dh16 alibi"},
      {{1, 40, 2, 1, 200, Positions::kRotary, 10000.0}, "dh200"}};
  uint64_t seed = 50;
  for (const AttentionCase& c : cases) {
    const AttentionShape s = c.shape;
    const std::string what = std::string("attention ") + c.name;
    const int64_t tokens = s.batch * s.seq, width = (s.heads + 2 * s.kv_heads) * s.head_dim;
    const int64_t out_width = s.heads * s.head_dim;
    const auto qkv = RandomFloats(tokens * width, ++seed);
    const auto dout = RandomFloats(tokens * out_width, ++seed);
    // RoPE forward then backward on the device; the CPU applies the same rotation in double.
    float* qkvd = Upload(qkv);
    ops_->rope_forward(Gpu(), s, qkvd);
    const auto rotated = Download(qkvd, tokens * width);
    auto rr = ToDouble(qkv);
    cpu::RopeForward<double>(cpu_, s, rr.data());
    ExpectClose(what + " rope_forward", rotated, rr, kTol);

    float *out = Alloc<float>(tokens * out_width), *lse = Alloc<float>(s.batch * s.heads * s.seq);
    float* dqkv = Alloc<float>(tokens * width);
    const float* doutd = Upload(dout);
    ops_->attention_forward(Gpu(), s, out, lse, qkvd);
    ops_->attention_backward(Gpu(), s, dqkv, doutd, out, lse, qkvd);
    const auto rot_d = ToDouble(rotated);
    std::vector<double> ref_out, ref_lse, ref_dqkv;
    AttentionForwardReference(s, rot_d, ref_out, ref_lse);
    AttentionBackwardReference(s, rot_d, ToDouble(dout), ref_dqkv);
    ExpectClose(what + " out", Download(out, tokens * out_width), ref_out, kReduceTol);
    ExpectClose(what + " lse", Download(lse, s.batch * s.heads * s.seq), ref_lse, kTol);
    const auto grad = Download(dqkv, tokens * width);
    ExpectClose(what + " dqkv", grad, ref_dqkv, kReduceTol);
    // The backward has no atomics: a second run gives the same bits.
    ops_->attention_backward(Gpu(), s, dqkv, doutd, out, lse, qkvd);
    EXPECT_EQ(Download(dqkv, tokens * width), grad) << what << ": backward is not deterministic";

    ops_->rope_backward(Gpu(), s, dqkv);
    auto rg = ToDouble(grad);
    cpu::RopeBackward<double>(cpu_, s, rg.data());
    ExpectClose(what + " rope_backward", Download(dqkv, tokens * width), rg, kReduceTol);
    // FLOPs: the CPU's accounting (full S×S window, the papers' M) for one forward and the two
    // backwards above, rope as the CPU counts it.
    const double S = static_cast<double>(s.seq), bh = static_cast<double>(s.batch * s.heads);
    const double rope = s.positions == Positions::kRotary
                            ? 2 * 6.0 * tokens * (s.heads + s.kv_heads) * (s.head_dim / 2)
                            : 0.0;
    const FlopCounter& f = *Gpu().flops;
    EXPECT_EQ(f.Get(FlopKind::kModel), (4.0 + 8.0 + 8.0) * bh * S * S * s.head_dim) << what;
    EXPECT_EQ(f.Get(FlopKind::kElementwise), 3 * 4.0 * bh * S * S / 2 + rope) << what;
    gpu_->Context().flops->Reset();
    cpu_flops_.Reset();
  }
}

TEST_F(CudaOpsTest, SumSquaresAndAdamW) {
  const int64_t n = 1'000'003;
  const auto g = RandomFloats(n, 60), p0 = RandomFloats(n, 61), m0 = RandomFloats(n, 62, 0.1);
  auto v0 = RandomFloats(n, 63, 0.1);
  for (auto& x : v0) x = x * x;
  const float* gd = Upload(g);
  // The result arrives in (pinned) host memory in stream order: read after a synchronisation.
  auto pinned = gpu_->AllocateHost(2 * sizeof(double));
  ASSERT_TRUE(pinned.ok()) << pinned.status();
  double* sums = (*pinned)->as<double>();
  ops_->sum_squares(Gpu(), n, gd, &sums[0]);
  ops_->sum_squares(Gpu(), n, gd, &sums[1]);
  gpu_->DefaultStream().Synchronize();
  double ref = 0.0;
  cpu::SumSquares<double>(cpu_, n, ToDouble(g).data(), &ref);
  EXPECT_NEAR(sums[0], ref, 1e-10 * ref) << "sum_squares (both in double)";
  EXPECT_EQ(sums[1], sums[0]) << "sum_squares is not deterministic";
  double none = -1.0;
  ops_->sum_squares(Gpu(), 0, gd, &none);
  gpu_->DefaultStream().Synchronize();
  EXPECT_EQ(none, 0.0) << "the sum of no squares";

  float *p = Upload(p0), *m = Upload(m0), *v = Upload(v0);
  const AdamWArgs args{
      .lr = 3e-3, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1, .step = 7};
  for (WeightDecay decay : {WeightDecay::kApply, WeightDecay::kSkip}) {
    ops_->adamw_update(Gpu(), n, p, m, v, gd, 0.5, args, decay);
  }
  // The CPU in float: the kernel mirrors its operation order, so the bits should agree.
  auto rp = p0, rm = m0, rv = v0;
  for (WeightDecay decay : {WeightDecay::kApply, WeightDecay::kSkip}) {
    cpu::AdamWUpdate<float>(cpu_, n, rp.data(), rm.data(), rv.data(), g.data(), 0.5, args, decay);
  }
  ExpectClose("adamw p", Download(p, n), rp, kTol);
  ExpectClose("adamw m", Download(m, n), rm, kTol);
  ExpectClose("adamw v", Download(v, n), rv, kTol);
  const auto pd = Download(p, n);
  int64_t same = 0;
  for (int64_t i = 0; i < n; ++i) same += pd[i] == rp[i];
  RecordProperty("adamw_bit_identical_fraction", std::to_string(double(same) / n));
  EXPECT_GE(same, n * 999 / 1000) << "adamw: only " << same << " of " << n
                                  << " parameters match the CPU float update bit for bit";
  ExpectSameFlops("optimizer");
}

// The multi-tensor AdamW against one adamw_update launch per tensor on the GPU (the same kernel
// arithmetic: every bit equal) and against the CPU's multi-tensor op (as adamw_update is checked
// above), over a table with empty and one-element tensors, tensors longer than a chunk, mixed
// decay, an order that is not the offsets', and a tail no tensor covers. Called twice with the
// same table (the cached chunk table) and once with another (rebuilt).
TEST_F(CudaOpsTest, MultiTensorAdamW) {
  const int64_t sizes[] = {70'001, 0, 1, 32'768, 1, 4096, 0, 65'537, 5, 1000};
  std::vector<TensorSpan> table;
  int64_t n = 0;
  for (size_t i = 0; i < std::size(sizes); ++i) {
    table.push_back({.offset = n,
                     .size = sizes[i],
                     .decay = i % 3 == 1 ? WeightDecay::kSkip : WeightDecay::kApply});
    n += sizes[i];
  }
  std::swap(table[2], table[7]);
  const int64_t tail = 777;  // [n, n + tail): in no tensor
  const int64_t total = n + tail;
  const auto g = RandomFloats(total, 80), p0 = RandomFloats(total, 81);
  const auto m0 = RandomFloats(total, 82, 0.1);
  auto v0 = RandomFloats(total, 83, 0.1);
  for (auto& x : v0) x = x * x;
  const float* gd = Upload(g);
  float *p = Upload(p0), *m = Upload(m0), *v = Upload(v0);
  float *p1 = Upload(p0), *m1 = Upload(m0), *v1 = Upload(v0);
  auto rp = p0, rm = m0, rv = v0;
  const std::vector<TensorSpan> halves = {table.begin(), table.begin() + 5};
  for (int64_t step = 1; step <= 3; ++step) {
    const std::vector<TensorSpan>& t = step == 3 ? halves : table;
    const AdamWArgs args{
        .lr = 3e-3, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1, .step = step};
    const double clip = step == 2 ? 0.4 : 1.0;
    ops_->adamw_multi_tensor(Gpu(), static_cast<int64_t>(t.size()), t.data(), p, m, v, gd, clip,
                             args);
    for (const TensorSpan& s : t) {
      ops_->adamw_update(Gpu(), s.size, p1 + s.offset, m1 + s.offset, v1 + s.offset, gd + s.offset,
                         clip, args, s.decay);
    }
    cpu::AdamWMultiTensor<float>(cpu_, static_cast<int64_t>(t.size()), t.data(), rp.data(),
                                 rm.data(), rv.data(), g.data(), clip, args);
  }
  EXPECT_EQ(Download(p, total), Download(p1, total)) << "p: multi-tensor vs per tensor (cuda)";
  EXPECT_EQ(Download(m, total), Download(m1, total)) << "m: multi-tensor vs per tensor (cuda)";
  EXPECT_EQ(Download(v, total), Download(v1, total)) << "v: multi-tensor vs per tensor (cuda)";
  const auto pd = Download(p, total);
  EXPECT_EQ(std::vector<float>(pd.begin() + n, pd.end()),
            std::vector<float>(p0.begin() + n, p0.end()))
      << "elements in no tensor moved";
  ExpectClose("multi-tensor adamw p", pd, rp, kTol);
  ExpectClose("multi-tensor adamw m", Download(m, total), rm, kTol);
  ExpectClose("multi-tensor adamw v", Download(v, total), rv, kTol);
  int64_t same = 0;
  for (int64_t i = 0; i < total; ++i) same += pd[i] == rp[i];
  EXPECT_GE(same, total * 999 / 1000) << "multi-tensor adamw: only " << same << " of " << total
                                      << " parameters match the CPU float update bit for bit";
}

}  // namespace
}  // namespace parity::kernels::testing
