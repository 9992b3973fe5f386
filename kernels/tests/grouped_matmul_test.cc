// The grouped matmul op on the CPU (fp64, fp32 and the bf16 emulation) against per-group double
// references, including empty groups, rows outside the groups and a single group; the MoE layer
// built on it against the per-expert op chain it replaced, bit for bit with the same FLOP counts;
// and the layer's op-call count, which no longer grows with the number of experts.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/backend/device.h"
#include "kernels/backend/op_table_bf16.h"
#include "kernels/cpu/ops_grouped.h"
#include "kernels/model/moe_experts.h"
#include "kernels/tests/test_util.h"

namespace parity::kernels {
namespace {

using testing::RandomVector;

template <typename T>
std::vector<T> Cast(const std::vector<double>& v) {
  return std::vector<T>(v.begin(), v.end());
}

std::vector<Bf16> RoundBf16(const std::vector<double>& v) {
  std::vector<Bf16> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = ToBf16(static_cast<float>(v[i]));
  return out;
}

double Wide(double x) { return x; }
double Wide(float x) { return x; }
double Wide(Bf16 x) { return ToFloat(x); }

template <typename T>
std::vector<double> WideAll(const std::vector<T>& v) {
  std::vector<double> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = Wide(v[i]);
  return out;
}

template <typename T>
std::vector<uint64_t> BitsOf(const std::vector<T>& v) {
  std::vector<uint64_t> out(v.size(), 0);
  for (size_t i = 0; i < v.size(); ++i) std::memcpy(&out[i], &v[i], sizeof(T));
  return out;
}

struct Case {
  std::string name;
  std::vector<int64_t> offsets;  // [G+1]
  int64_t rows;                  // rows of x/y (≥ offsets[G])
};

// Three layouts: empty groups first, in the middle and last, with rows before and after the
// groups that must stay untouched; one group (over 64 rows, so its GEMM splits across the pool);
// only empty groups.
std::vector<Case> Cases() {
  return {{"empty groups, rows outside", {2, 2, 9, 9, 80, 80}, 85},
          {"one group", {0, 70}, 70},
          {"all groups empty", {3, 3, 3, 3}, 6}};
}

// The definition, in double, per group: y_g = x_g·W_g^T, dx_g = dy_g·W_g, dW_g += dy_g^T·x_g.
struct Reference {
  std::vector<double> y, dx, dw;
};
Reference GroupedReference(const Case& c, int64_t K, int64_t N, const std::vector<double>& x,
                           const std::vector<double>& w, const std::vector<double>& dy,
                           std::vector<double> y, std::vector<double> dx, std::vector<double> dw) {
  const int64_t G = static_cast<int64_t>(c.offsets.size()) - 1;
  for (int64_t g = 0; g < G; ++g) {
    const double* wg = w.data() + g * N * K;
    for (int64_t r = c.offsets[g]; r < c.offsets[g + 1]; ++r) {
      for (int64_t j = 0; j < N; ++j) {
        double acc = 0;
        for (int64_t i = 0; i < K; ++i) acc += x[r * K + i] * wg[j * K + i];
        y[r * N + j] = acc;
      }
      for (int64_t i = 0; i < K; ++i) {
        double acc = 0;
        for (int64_t j = 0; j < N; ++j) acc += dy[r * N + j] * wg[j * K + i];
        dx[r * K + i] = acc;
      }
      for (int64_t j = 0; j < N; ++j) {
        for (int64_t i = 0; i < K; ++i) dw[g * N * K + j * K + i] += dy[r * N + j] * x[r * K + i];
      }
    }
  }
  return {std::move(y), std::move(dx), std::move(dw)};
}

// Rows inside the groups within tol·max|ref| (plus a relative `ulp` for outputs stored rounded);
// rows outside them exactly as they were.
void ExpectRows(const std::string& what, const Case& c, int64_t width,
                const std::vector<double>& got, const std::vector<double>& want,
                const std::vector<double>& before, double tol, double ulp) {
  double scale = 0;
  for (double v : want) scale = std::max(scale, std::abs(v));
  const int64_t G = static_cast<int64_t>(c.offsets.size()) - 1;
  for (int64_t r = 0; r < c.rows; ++r) {
    const bool inside = r >= c.offsets[0] && r < c.offsets[G];
    for (int64_t j = 0; j < width; ++j) {
      const size_t i = static_cast<size_t>(r * width + j);
      if (inside) {
        ASSERT_LE(std::abs(got[i] - want[i]), tol * scale + ulp * std::abs(want[i]))
            << what << " (" << c.name << "): row " << r << " col " << j << " got " << got[i]
            << ", want " << want[i];
      } else {
        ASSERT_EQ(got[i], before[i])
            << what << " (" << c.name << "): row " << r << " lies in no group and must not change";
      }
    }
  }
}

// Runs `ops`' grouped matmul on every case. A is the array type (double, float or Bf16), W the
// weight-gradient type; inputs are rounded to A first so the reference sees the same values.
template <typename A, typename W, typename Ops>
void CheckAgainstReference(const Ops& ops, FlopCounter& flops, const OpContext& ctx, double tol,
                           double ulp) {
  const int64_t K = 7, N = 5;
  uint64_t seed = 10;
  for (const Case& c : Cases()) {
    const int64_t G = static_cast<int64_t>(c.offsets.size()) - 1, R = c.rows;
    const int64_t rows = c.offsets[G] - c.offsets[0];
    auto round = [](const std::vector<double>& v) {
      if constexpr (std::is_same_v<A, Bf16>) {
        return RoundBf16(v);
      } else {
        return Cast<A>(v);
      }
    };
    const auto x = round(RandomVector(R * K, ++seed)), w = round(RandomVector(G * N * K, ++seed));
    const auto dy = round(RandomVector(R * N, ++seed));
    auto y = round(RandomVector(R * N, ++seed)), dx = round(RandomVector(R * K, ++seed));
    auto dw = Cast<W>(RandomVector(G * N * K, ++seed));
    const auto y0 = WideAll(y), dx0 = WideAll(dx), dw0 = WideAll(dw);
    const GroupedMatmulShape s{.groups = G,
                               .in = K,
                               .out = N,
                               .offsets = c.offsets.data(),
                               .host_offsets = c.offsets.data()};
    flops.Reset();
    ops.grouped_matmul_forward(ctx, s, y.data(), x.data(), w.data(), FlopKind::kModel);
    EXPECT_EQ(flops.Get(FlopKind::kModel), 2.0 * rows * N * K) << "forward FLOPs, " << c.name;
    flops.Reset();
    ops.grouped_matmul_backward(ctx, s, dx.data(), dw.data(), dy.data(), x.data(), w.data(),
                                FlopKind::kModel);
    EXPECT_EQ(flops.Get(FlopKind::kModel), 4.0 * rows * N * K) << "backward FLOPs, " << c.name;
    const Reference ref =
        GroupedReference(c, K, N, WideAll(x), WideAll(w), WideAll(dy), y0, dx0, dw0);
    ExpectRows("y", c, N, WideAll(y), ref.y, y0, tol, ulp);
    ExpectRows("dx", c, K, WideAll(dx), ref.dx, dx0, tol, ulp);
    const Case weights{c.name, {0, G * N}, G * N};  // every weight row accumulates
    ExpectRows("dW (+=)", weights, K, WideAll(dw), ref.dw, dw0, tol, 0.0);
  }
}

TEST(GroupedMatmulTest, Fp64MatchesThePerGroupDefinition) {
  auto device = MakeCpuDevice({.threads = 3});
  CheckAgainstReference<double, double>(*device->OpsF64(), *device->Context().flops,
                                        device->Context(), 1e-13, 0.0);
}

TEST(GroupedMatmulTest, Fp32MatchesThePerGroupDefinition) {
  auto device = MakeCpuDevice({.threads = 3});
  CheckAgainstReference<float, float>(*device->OpsF32(), *device->Context().flops,
                                      device->Context(), 1e-5, 0.0);
}

// bf16 y and dx are rounded once from the fp32 result: half an ulp (bf16 keeps 8 significant
// bits), at most 2^-8 of the value, on top of the fp32 math's error; dW stays fp32.
TEST(GroupedMatmulTest, Bf16EmulationMatchesThePerGroupDefinition) {
  auto device = MakeCpuDevice({.threads = 3});
  CheckAgainstReference<Bf16, float>(*device->OpsBf16(), *device->Context().flops,
                                     device->Context(), 1e-5, 0x1.0p-8);
}

// ---- the MoE layer against the per-expert chain it replaced ---------------------------------

// The layer as it was before the grouped op: per expert matmul → SwiGLU → matmul forward; the
// backward's per-expert chains on cpu::ForEachGroupParallel's partition (the code that partition
// came from), FLOPs counted on the calling thread.
template <typename Ops, typename T, typename A>
void PerExpertForward(const Ops& ops, const OpContext& ctx, const ExpertShape& s,
                      const std::vector<int64_t>& offsets, const int32_t* slot_of,
                      const int32_t* token_of, const T* gate, const A* x, const A* w13, const A* w2,
                      const ExpertActivations<A>& a, T* out) {
  const int64_t D = s.d_model, De = s.d_expert;
  ops.permute_forward(ctx, s.tokens * s.top_k, D, a.xs, x, token_of);
  for (int64_t e = 0; e < s.experts; ++e) {
    const int64_t o = offsets[e], n = offsets[e + 1] - offsets[e];
    if (n == 0) continue;
    ops.matmul_forward(ctx, {n, D, 2 * De}, a.ab + o * 2 * De, a.xs + o * D, w13 + e * 2 * De * D,
                       Accumulate::kNo, FlopKind::kModel);
    ops.swiglu_forward(ctx, n, De, a.g + o * De, a.ab + o * 2 * De);
    ops.matmul_forward(ctx, {n, De, D}, a.ys + o * D, a.g + o * De, w2 + e * D * De,
                       Accumulate::kNo, FlopKind::kModel);
  }
  ops.combine_forward(ctx, s.tokens, s.top_k, D, out, a.ys, gate, slot_of);
}

template <typename Ops, typename T, typename A>
void PerExpertBackward(const Ops& ops, const OpContext& ctx, const ExpertShape& s,
                       const std::vector<int64_t>& offsets, const int32_t* slot_of, const T* gate,
                       const A* w13, const A* w2, const ExpertActivations<A>& a, const T* dout,
                       const ExpertScratch<A>& sc, T* dgate, A* dx, T* dw13, T* dw2) {
  const int64_t D = s.d_model, De = s.d_expert;
  ops.combine_backward(ctx, s.tokens, s.top_k, D, sc.dys, dgate, dout, a.ys, gate, slot_of);
  cpu::ForEachGroupParallel(
      ctx, offsets.data(), s.experts, [&](const OpContext& c, int64_t e, int64_t o, int64_t n) {
        ops.matmul_backward(c, {n, De, D}, sc.dg + o * De, dw2 + e * D * De, sc.dys + o * D,
                            a.g + o * De, w2 + e * D * De, Accumulate::kNo, FlopKind::kModel);
        ops.swiglu_backward(c, n, De, sc.dab + o * 2 * De, sc.dg + o * De, a.ab + o * 2 * De);
        ops.matmul_backward(c, {n, D, 2 * De}, sc.dxs + o * D, dw13 + e * 2 * De * D,
                            sc.dab + o * 2 * De, a.xs + o * D, w13 + e * 2 * De * D,
                            Accumulate::kNo, FlopKind::kModel);
      });
  const int64_t P = s.tokens * s.top_k;
  ctx.Count(FlopKind::kModel, 12.0 * P * D * De);
  ctx.Count(FlopKind::kElementwise, 10.0 * P * De);
  ops.permute_backward(ctx, s.tokens, s.top_k, D, dx, sc.dxs, slot_of);
}

// Everything one forward and backward of the layer writes, in the table's types.
template <typename T, typename A>
struct LayerRun {
  std::vector<A> xs, ab, g, ys, dys, dg, dab, dxs, dx;
  std::vector<T> out, dgate, dw13, dw2;
  FlopCounter flops;
};

template <typename T, typename A, typename Ops>
LayerRun<T, A> RunLayer(const Ops& ops, Device& device, bool grouped) {
  const ExpertShape s{.tokens = 200, .top_k = 2, .experts = 6, .d_model = 16, .d_expert = 12};
  const int64_t T_ = s.tokens, K = s.top_k, E = s.experts, D = s.d_model, De = s.d_expert;
  const int64_t P = T_ * K;
  // Expert 3 stays empty; the others get about 80 rows, more than a 64-row GEMM chunk.
  std::vector<int32_t> expert(P);
  for (int64_t t = 0; t < T_; ++t) {
    expert[t * K] = static_cast<int32_t>((t * 7) % 5 + ((t * 7) % 5 >= 3));
    expert[t * K + 1] = static_cast<int32_t>(expert[t * K] == 5 ? 0 : 5);
  }
  std::vector<int64_t> offsets(E + 1);
  std::vector<int32_t> slot_of(P), token_of(P);
  const OpContext& ctx = device.Context();
  ops.routing_plan(ctx, T_, K, E, offsets.data(), slot_of.data(), token_of.data(), expert.data());
  auto as_a = [](const std::vector<double>& v) {
    if constexpr (std::is_same_v<A, Bf16>) {
      return RoundBf16(v);
    } else {
      return Cast<A>(v);
    }
  };
  const auto x = as_a(RandomVector(T_ * D, 1)), w13 = as_a(RandomVector(E * 2 * De * D, 2, 0.3));
  const auto w2 = as_a(RandomVector(E * D * De, 3, 0.3));
  const auto gate = Cast<T>(RandomVector(P, 4)), dout = Cast<T>(RandomVector(T_ * D, 5));
  LayerRun<T, A> r;
  r.xs.resize(P * D), r.ab.resize(P * 2 * De), r.g.resize(P * De), r.ys.resize(P * D);
  r.dys.resize(P * D), r.dg.resize(P * De), r.dab.resize(P * 2 * De), r.dxs.resize(P * D);
  r.dx = as_a(RandomVector(T_ * D, 6));
  r.out = Cast<T>(RandomVector(T_ * D, 7)), r.dgate.resize(P);
  r.dw13 = Cast<T>(RandomVector(E * 2 * De * D, 8)), r.dw2 = Cast<T>(RandomVector(E * D * De, 9));
  const ExpertActivations<A> a{r.xs.data(), r.ab.data(), r.g.data(), r.ys.data()};
  const ExpertScratch<A> sc{r.dys.data(), r.dg.data(), r.dab.data(), r.dxs.data()};
  FlopCounter& counter = *ctx.flops;
  counter.Reset();
  if (grouped) {
    GroupedExpertsForward(ops, ctx, s, offsets.data(), offsets, slot_of.data(), token_of.data(),
                          gate.data(), x.data(), w13.data(), w2.data(), a, r.out.data());
    GroupedExpertsBackward(ops, ctx, s, offsets.data(), offsets, slot_of.data(), gate.data(),
                           w13.data(), w2.data(), a, dout.data(), sc, r.dgate.data(), r.dx.data(),
                           r.dw13.data(), r.dw2.data());
  } else {
    PerExpertForward(ops, ctx, s, offsets, slot_of.data(), token_of.data(), gate.data(), x.data(),
                     w13.data(), w2.data(), a, r.out.data());
    PerExpertBackward(ops, ctx, s, offsets, slot_of.data(), gate.data(), w13.data(), w2.data(), a,
                      dout.data(), sc, r.dgate.data(), r.dx.data(), r.dw13.data(), r.dw2.data());
  }
  r.flops = counter;
  return r;
}

template <typename T, typename A>
void ExpectSameBits(const LayerRun<T, A>& got, const LayerRun<T, A>& want) {
  const auto same = [](const auto& a, const auto& b, const char* what) {
    EXPECT_EQ(BitsOf(a), BitsOf(b)) << what << " differs from the per-expert chain's bits";
  };
  same(got.xs, want.xs, "xs");
  same(got.ab, want.ab, "ab (w13 GEMM)");
  same(got.g, want.g, "g (SwiGLU)");
  same(got.ys, want.ys, "ys (w2 GEMM)");
  same(got.out, want.out, "out");
  same(got.dys, want.dys, "dys");
  same(got.dg, want.dg, "dg (w2 backward)");
  same(got.dab, want.dab, "dab (SwiGLU backward)");
  same(got.dxs, want.dxs, "dxs (w13 backward)");
  same(got.dx, want.dx, "dx");
  same(got.dgate, want.dgate, "dgate");
  same(got.dw13, want.dw13, "dw13");
  same(got.dw2, want.dw2, "dw2");
  for (int k = 0; k < kNumFlopKinds; ++k) {
    EXPECT_EQ(got.flops.flops[k], want.flops.flops[k]) << "FLOP bucket " << k;
  }
}

TEST(GroupedExpertsTest, Fp32LayerHasThePerExpertChainsBits) {
  auto device = MakeCpuDevice({.threads = 3});
  const OpTable<float>& ops = *device->OpsF32();
  ExpectSameBits(RunLayer<float, float>(ops, *device, true),
                 RunLayer<float, float>(ops, *device, false));
}

TEST(GroupedExpertsTest, Bf16LayerHasThePerExpertChainsBits) {
  auto device = MakeCpuDevice({.threads = 3});
  const Bf16OpTable& ops = *device->OpsBf16();
  ExpectSameBits(RunLayer<float, Bf16>(ops, *device, true),
                 RunLayer<float, Bf16>(ops, *device, false));
}

// ---- op calls per layer ------------------------------------------------------------------------

// A table entry that counts its calls before forwarding to the real one.
template <typename F>
struct Counted;
template <typename R, typename... Args>
struct Counted<R (*)(Args...)> {
  R (*fn)(Args...);
  int* calls;
  R operator()(Args... args) const {
    ++*calls;
    return fn(args...);
  }
};

// The entries the expert layer uses, each counted.
struct CountingOps {
  using Table = OpTable<double>;
  explicit CountingOps(const Table& t, int* calls)
      : permute_forward{t.permute_forward, calls},
        permute_backward{t.permute_backward, calls},
        grouped_matmul_forward{t.grouped_matmul_forward, calls},
        grouped_matmul_backward{t.grouped_matmul_backward, calls},
        swiglu_forward{t.swiglu_forward, calls},
        swiglu_backward{t.swiglu_backward, calls},
        combine_forward{t.combine_forward, calls},
        combine_backward{t.combine_backward, calls} {}
  Counted<decltype(Table::permute_forward)> permute_forward;
  Counted<decltype(Table::permute_backward)> permute_backward;
  Counted<decltype(Table::grouped_matmul_forward)> grouped_matmul_forward;
  Counted<decltype(Table::grouped_matmul_backward)> grouped_matmul_backward;
  Counted<decltype(Table::swiglu_forward)> swiglu_forward;
  Counted<decltype(Table::swiglu_backward)> swiglu_backward;
  Counted<decltype(Table::combine_forward)> combine_forward;
  Counted<decltype(Table::combine_backward)> combine_backward;
};

// Five op calls forward and five backward, for 2 experts as for 64: a GPU launches a fixed number
// of kernels per layer instead of about three per expert.
TEST(GroupedExpertsTest, OpCallsPerLayerDoNotGrowWithExperts) {
  auto device = MakeCpuDevice({.threads = 2});
  const OpContext& ctx = device->Context();
  for (const int64_t E : {2, 64}) {
    const ExpertShape s{.tokens = 128, .top_k = 2, .experts = E, .d_model = 4, .d_expert = 3};
    const int64_t T = s.tokens, K = s.top_k, D = s.d_model, De = s.d_expert, P = T * K;
    std::vector<int32_t> expert(P);
    for (int64_t i = 0; i < P; ++i) expert[i] = static_cast<int32_t>(i % E);  // K distinct
    std::vector<int64_t> offsets(E + 1);
    std::vector<int32_t> slot_of(P), token_of(P);
    device->OpsF64()->routing_plan(ctx, T, K, E, offsets.data(), slot_of.data(), token_of.data(),
                                   expert.data());
    ASSERT_EQ(offsets[1] - offsets[0], P / E) << "every expert gets rows";
    const auto x = RandomVector(T * D, 1), w13 = RandomVector(E * 2 * De * D, 2);
    const auto w2 = RandomVector(E * D * De, 3), gate = RandomVector(P, 4);
    const auto dout = RandomVector(T * D, 5);
    std::vector<double> xs(P * D), ab(P * 2 * De), g(P * De), ys(P * D), out(T * D);
    std::vector<double> dys(P * D), dg(P * De), dab(P * 2 * De), dxs(P * D), dx(T * D);
    std::vector<double> dgate(P), dw13(w13.size()), dw2(w2.size());
    const ExpertActivations<double> a{xs.data(), ab.data(), g.data(), ys.data()};
    int calls = 0;
    const CountingOps ops(*device->OpsF64(), &calls);
    GroupedExpertsForward(ops, ctx, s, offsets.data(), offsets, slot_of.data(), token_of.data(),
                          gate.data(), x.data(), w13.data(), w2.data(), a, out.data());
    EXPECT_EQ(calls, 5) << "forward op calls with " << E << " experts";
    calls = 0;
    GroupedExpertsBackward(ops, ctx, s, offsets.data(), offsets, slot_of.data(), gate.data(),
                           w13.data(), w2.data(), a, dout.data(),
                           {dys.data(), dg.data(), dab.data(), dxs.data()}, dgate.data(), dx.data(),
                           dw13.data(), dw2.data());
    EXPECT_EQ(calls, 5) << "backward op calls with " << E << " experts";
  }
}

}  // namespace
}  // namespace parity::kernels
