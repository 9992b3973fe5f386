// GPU parity of the MoE ops: route (expert choice and slot counts identical to the CPU float
// reference, values within tolerance), the routing plan (identical to a stable counting sort),
// the loss-free bias update (bit-identical to the trainer's formula), permute and combine, and the
// experts' grouped matmul (the CPU op in double; rows outside the groups untouched; repeatable).
#include "kernels/cpu/ops_grouped.h"
#include "kernels/cpu/ops_moe.h"
#include "kernels/cuda/tests/cuda_test_util.h"

namespace parity::kernels::testing {
namespace {

constexpr double kTol = 1e-5;
constexpr double kReduceTol = 1e-4;

struct RouteCase {
  RouteShape shape;
  bool bias;
};

TEST_F(CudaOpsTest, Route) {
  const RouteCase cases[] = {{{300, 16, 2, false, 0.01, 0.001, 0.5}, true},
                             {{1000, 64, 8, true, 0.02, 0.001, 0.25}, false},
                             {{257, 40, 3, true, 0.01, 0.0, 1.0}, true},
                             {{90, 1000, 4, false, 0.01, 0.001, 1.0}, true}};
  uint64_t seed = 100;
  for (const RouteCase& c : cases) {
    const RouteShape s = c.shape;
    const int64_t T = s.tokens, E = s.experts, K = s.top_k;
    const std::string what =
        "route T" + std::to_string(T) + " E" + std::to_string(E) + " K" + std::to_string(K);
    const auto logits = RandomFloats(T * E, ++seed, 2.0);
    const auto bias = RandomFloats(E, ++seed, 0.05);
    float *probs = Alloc<float>(T * E), *lse = Alloc<float>(T), *gate = Alloc<float>(T * K);
    int32_t* expert = Alloc<int32_t>(T * K);
    int64_t* load = Alloc<int64_t>(E);
    double* losses = Alloc<double>(2);
    const float* logits_d = Upload(logits);
    ops_->route_forward(Gpu(), s, probs, lse, expert, gate, load, losses, logits_d,
                        c.bias ? Upload(bias) : nullptr);
    std::vector<float> rp(T * E), rl(T), rg(T * K);
    std::vector<int32_t> re(T * K);
    std::vector<int64_t> rload(E);
    double rloss[2];
    cpu::RouteForward<float>(cpu_, s, rp.data(), rl.data(), re.data(), rg.data(), rload.data(),
                             rloss, logits.data(), c.bias ? bias.data() : nullptr);
    const auto gpu_expert = Download(expert, T * K);
    const auto gpu_load = Download(load, E);
    EXPECT_EQ(gpu_expert, re) << what << ": chosen experts differ from the CPU's";
    EXPECT_EQ(gpu_load, rload) << what << ": slot counts differ";
    const auto gpu_probs = Download(probs, T * E), gpu_lse = Download(lse, T);
    ExpectClose(what + " probs", gpu_probs, rp, kTol);
    ExpectClose(what + " lse", gpu_lse, rl, kTol);
    ExpectClose(what + " gate", Download(gate, T * K), rg, kTol);
    const auto gl = Download(losses, 2);
    EXPECT_NEAR(gl[0], rloss[0], kReduceTol * std::abs(rloss[0]) + 1e-12) << what << " aux loss";
    EXPECT_NEAR(gl[1], rloss[1], kReduceTol * std::abs(rloss[1]) + 1e-12) << what << " z loss";

    // Backward from the device's own forward outputs; the CPU in double on the same inputs.
    const auto dgate = RandomFloats(T * K, ++seed);
    float* dlogits = Alloc<float>(T * E);
    ops_->route_backward(Gpu(), s, dlogits, Upload(dgate), probs, lse, expert, load);
    std::vector<double> rdl(T * E);
    cpu::RouteBackward<double>(cpu_, s, rdl.data(), ToDouble(dgate).data(),
                               ToDouble(gpu_probs).data(), ToDouble(gpu_lse).data(),
                               gpu_expert.data(), gpu_load.data());
    ExpectClose(what + " dlogits", Download(dlogits, T * E), rdl, kReduceTol);
    ExpectSameFlops(what);
  }
}

TEST_F(CudaOpsTest, RoutingPlanIsAStableCountingSort) {
  const int64_t shapes[][3] = {{3001, 3, 37}, {5000, 8, 1024}, {100, 1, 1}, {700, 2, 16}};
  uint64_t seed = 200;
  for (const auto& sh : shapes) {
    const int64_t t = sh[0], k = sh[1], e = sh[2];
    const std::string what =
        "routing_plan T" + std::to_string(t) + " K" + std::to_string(k) + " E" + std::to_string(e);
    const auto expert = RandomExperts(t, k, e, ++seed);
    int64_t* offsets = Alloc<int64_t>(e + 1);
    int32_t *slot_of = Alloc<int32_t>(t * k), *token_of = Alloc<int32_t>(t * k);
    ops_->routing_plan(Gpu(), t, k, e, offsets, slot_of, token_of, Upload(expert));
    std::vector<int64_t> ro;
    std::vector<int32_t> rs, rt;
    ReferencePlan(t, k, e, expert, ro, rs, rt);
    EXPECT_EQ(Download(offsets, e + 1), ro) << what << ": offsets";
    EXPECT_EQ(Download(slot_of, t * k), rs) << what << ": slot_of";
    EXPECT_EQ(Download(token_of, t * k), rt) << what << ": token_of";
  }
}

TEST_F(CudaOpsTest, BiasUpdateMatchesTheTrainersFormula) {
  const int64_t e = 40;
  std::vector<int64_t> load(e);
  Rng rng{.seed = 300};
  for (auto& x : load) x = static_cast<int64_t>(rng.Below(200));
  load[3] = 0;
  int64_t total = 0;
  for (int64_t x : load) total += x;
  load[7] = total / e;  // near or at the mean: sign 0 leaves the bias unchanged when equal
  const auto bias0 = RandomFloats(e, 301, 0.1);
  float* bias = Upload(bias0);
  const double rate = 1e-3;
  ops_->bias_update(Gpu(), e, bias, Upload(load), rate);
  auto ref = bias0;
  double mean = 0;
  for (int64_t l : load) mean += l;
  mean /= e;
  for (int64_t i = 0; i < e; ++i) {
    const double d = mean - load[i];
    ref[i] += static_cast<float>(rate * ((d > 0) - (d < 0)));
  }
  EXPECT_EQ(Download(bias, e), ref) << "bias_update";
}

TEST_F(CudaOpsTest, PermuteAndCombine) {
  const int64_t t = 301, k = 2, e = 9, d = 96, p = t * k;
  const auto expert = RandomExperts(t, k, e, 400);
  std::vector<int64_t> offsets;
  std::vector<int32_t> slot_of, token_of;
  ReferencePlan(t, k, e, expert, offsets, slot_of, token_of);
  const auto x = RandomFloats(t * d, 401), dxs = RandomFloats(p * d, 402);
  const auto ys = RandomFloats(p * d, 403), gate = RandomFloats(t * k, 404);
  const auto dy = RandomFloats(t * d, 405), dx0 = RandomFloats(t * d, 406);
  const auto y0 = RandomFloats(t * d, 407);
  const int32_t *slot_d = Upload(slot_of), *token_d = Upload(token_of);
  float *xs = Alloc<float>(p * d), *dx = Upload(dx0), *y = Upload(y0);
  float *dys = Alloc<float>(p * d), *dgate = Alloc<float>(t * k);
  const float *ys_d = Upload(ys), *gate_d = Upload(gate);
  ops_->permute_forward(Gpu(), p, d, xs, Upload(x), token_d);
  ops_->permute_backward(Gpu(), t, k, d, dx, Upload(dxs), slot_d);
  ops_->combine_forward(Gpu(), t, k, d, y, ys_d, gate_d, slot_d);
  ops_->combine_backward(Gpu(), t, k, d, dys, dgate, Upload(dy), ys_d, gate_d, slot_d);

  std::vector<float> rxs(p * d);
  cpu::PermuteForward<float>(cpu_, p, d, rxs.data(), x.data(), token_of.data());
  EXPECT_EQ(Download(xs, p * d), rxs) << "permute_forward is a gather";
  auto rdx = ToDouble(dx0), ry = ToDouble(y0);
  std::vector<double> rdys(p * d), rdgate(t * k);
  const auto ysr = ToDouble(ys), gater = ToDouble(gate);
  cpu::PermuteBackward<double>(cpu_, t, k, d, rdx.data(), ToDouble(dxs).data(), slot_of.data());
  cpu::CombineForward<double>(cpu_, t, k, d, ry.data(), ysr.data(), gater.data(), slot_of.data());
  cpu::CombineBackward<double>(cpu_, t, k, d, rdys.data(), rdgate.data(), ToDouble(dy).data(),
                               ysr.data(), gater.data(), slot_of.data());
  ExpectClose("permute_backward dx (+=)", Download(dx, t * d), rdx, kTol);
  ExpectClose("combine_forward y (+=)", Download(y, t * d), ry, kTol);
  ExpectClose("combine_backward dys", Download(dys, p * d), rdys, kTol);
  ExpectClose("combine_backward dgate", Download(dgate, t * k), rdgate, kReduceTol);
  ExpectSameFlops("permute/combine");
}

// Rows of `got` outside the groups, exactly as before the op.
void ExpectRowsOutsideUntouched(const std::string& what, const GroupedCase& c, int64_t width,
                                const std::vector<float>& got, const std::vector<float>& before) {
  const int64_t first = c.offsets.front(), last = c.offsets.back();
  for (int64_t r = 0; r < c.rows; ++r) {
    if (r >= first && r < last) continue;
    for (int64_t j = 0; j < width; ++j) {
      ASSERT_EQ(got[r * width + j], before[r * width + j])
          << what << ": row " << r << " lies in no group and changed";
    }
  }
}

TEST_F(CudaOpsTest, GroupedMatmulMatchesThePerGroupReference) {
  uint64_t seed = 710;
  for (const GroupedCase& c : GroupedCases()) {
    const int64_t G = static_cast<int64_t>(c.offsets.size()) - 1, R = c.rows, K = c.in, N = c.out;
    const std::string what = "grouped_matmul " + c.name;
    const auto x = RandomFloats(R * K, ++seed), w = RandomFloats(G * N * K, ++seed);
    const auto dy = RandomFloats(R * N, ++seed), y0 = RandomFloats(R * N, ++seed);
    const auto dx0 = RandomFloats(R * K, ++seed), dw0 = RandomFloats(G * N * K, ++seed);
    const GroupedMatmulShape s{.groups = G,
                               .in = K,
                               .out = N,
                               .offsets = Upload(c.offsets),
                               .host_offsets = c.offsets.data()};
    const float *xd = UploadPadded(x, c.pad), *wd = UploadPadded(w, c.pad);
    const float* dyd = UploadPadded(dy, c.pad);
    float *y = UploadPadded(y0, c.pad), *dx = UploadPadded(dx0, c.pad);
    float* dw = UploadPadded(dw0, c.pad);
    ops_->grouped_matmul_forward(Gpu(), s, y, xd, wd, FlopKind::kModel);
    ops_->grouped_matmul_backward(Gpu(), s, dx, dw, dyd, xd, wd, FlopKind::kModel);
    const GroupedMatmulShape hs{.groups = G,
                                .in = K,
                                .out = N,
                                .offsets = c.offsets.data(),
                                .host_offsets = c.offsets.data()};
    auto ry = ToDouble(y0), rdx = ToDouble(dx0), rdw = ToDouble(dw0);
    const auto rx = ToDouble(x), rw = ToDouble(w);
    cpu::GroupedMatmulForward<double>(cpu_, hs, ry.data(), rx.data(), rw.data(), FlopKind::kModel);
    cpu::GroupedMatmulBackward<double>(cpu_, hs, rdx.data(), rdw.data(), ToDouble(dy).data(),
                                       rx.data(), rw.data(), FlopKind::kModel);
    const auto got_y = Download(y, R * N), got_dx = Download(dx, R * K);
    const auto got_dw = Download(dw, G * N * K);
    ExpectClose(what + " y", got_y, ry, kReduceTol);
    ExpectClose(what + " dx", got_dx, rdx, kReduceTol);
    ExpectClose(what + " dw (+=)", got_dw, rdw, kReduceTol);
    ExpectRowsOutsideUntouched(what + " y", c, N, got_y, y0);
    ExpectRowsOutsideUntouched(what + " dx", c, K, got_dx, dx0);
    ExpectSameFlops(what);

    gpu_->FromHost(dw, dw0.data(), dw0.size() * sizeof(float));
    ops_->grouped_matmul_forward(Gpu(), s, y, xd, wd, FlopKind::kModel);
    ops_->grouped_matmul_backward(Gpu(), s, dx, dw, dyd, xd, wd, FlopKind::kModel);
    EXPECT_EQ(Download(y, R * N), got_y) << what << ": y differs on a second run";
    EXPECT_EQ(Download(dx, R * K), got_dx) << what << ": dx differs on a second run";
    EXPECT_EQ(Download(dw, G * N * K), got_dw) << what << ": dw differs on a second run";
    gpu_->Context().flops->Reset();
  }
}

}  // namespace
}  // namespace parity::kernels::testing
