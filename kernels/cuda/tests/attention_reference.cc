#include "kernels/cuda/tests/attention_reference.h"

#include <algorithm>
#include <cmath>

namespace parity::kernels::testing {
namespace {

struct Geometry {
  int64_t S, H, Hkv, Dh, ld, ldo, group;
  double scale;
  explicit Geometry(const AttentionShape& s)
      : S(s.seq),
        H(s.heads),
        Hkv(s.kv_heads),
        Dh(s.head_dim),
        ld((s.heads + 2 * s.kv_heads) * s.head_dim),
        ldo(s.heads * s.head_dim),
        group(s.heads / s.kv_heads),
        scale(1.0 / std::sqrt(static_cast<double>(s.head_dim))) {}
  int64_t Q(int64_t b, int64_t i, int64_t h) const { return (b * S + i) * ld + h * Dh; }
  int64_t K(int64_t b, int64_t j, int64_t g) const { return (b * S + j) * ld + (H + g) * Dh; }
  int64_t V(int64_t b, int64_t j, int64_t g) const { return (b * S + j) * ld + (H + Hkv + g) * Dh; }
  int64_t O(int64_t b, int64_t i, int64_t h) const { return (b * S + i) * ldo + h * Dh; }
};

// Probabilities p[0..i] of query row i of head h, and the row's log-sum-exp.
double RowProbs(const AttentionShape& s, const Geometry& g, const std::vector<double>& qkv,
                int64_t b, int64_t h, int64_t i, std::vector<double>& p) {
  const int64_t kv = h / g.group;
  const double slope = s.positions == Positions::kAlibi
                           ? std::pow(2.0, -8.0 * static_cast<double>(h + 1) / g.H)
                           : 0.0;
  p.assign(i + 1, 0.0);
  double mx = -INFINITY;
  for (int64_t j = 0; j <= i; ++j) {
    double dot = 0.0;
    for (int64_t d = 0; d < g.Dh; ++d) dot += qkv[g.Q(b, i, h) + d] * qkv[g.K(b, j, kv) + d];
    p[j] = dot * g.scale - slope * static_cast<double>(i - j);
    mx = std::max(mx, p[j]);
  }
  double sum = 0.0;
  for (double& x : p) sum += (x = std::exp(x - mx));
  for (double& x : p) x /= sum;
  return mx + std::log(sum);
}

}  // namespace

void AttentionForwardReference(const AttentionShape& s, const std::vector<double>& qkv,
                               std::vector<double>& out, std::vector<double>& lse) {
  const Geometry g(s);
  out.assign(s.batch * g.S * g.ldo, 0.0);
  lse.assign(s.batch * g.H * g.S, 0.0);
  std::vector<double> p;
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < g.H; ++h) {
      for (int64_t i = 0; i < g.S; ++i) {
        lse[(b * g.H + h) * g.S + i] = RowProbs(s, g, qkv, b, h, i, p);
        for (int64_t j = 0; j <= i; ++j) {
          for (int64_t d = 0; d < g.Dh; ++d) {
            out[g.O(b, i, h) + d] += p[j] * qkv[g.V(b, j, h / g.group) + d];
          }
        }
      }
    }
  }
}

void AttentionBackwardReference(const AttentionShape& s, const std::vector<double>& qkv,
                                const std::vector<double>& dout, std::vector<double>& dqkv) {
  const Geometry g(s);
  dqkv.assign(qkv.size(), 0.0);
  std::vector<double> p, dp;
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < g.H; ++h) {
      const int64_t kv = h / g.group;
      for (int64_t i = 0; i < g.S; ++i) {
        RowProbs(s, g, qkv, b, h, i, p);
        dp.assign(i + 1, 0.0);
        double delta = 0.0;
        for (int64_t j = 0; j <= i; ++j) {
          for (int64_t d = 0; d < g.Dh; ++d) {
            dp[j] += dout[g.O(b, i, h) + d] * qkv[g.V(b, j, kv) + d];
          }
          delta += p[j] * dp[j];
        }
        for (int64_t j = 0; j <= i; ++j) {
          const double ds = p[j] * (dp[j] - delta) * g.scale;
          for (int64_t d = 0; d < g.Dh; ++d) {
            dqkv[g.Q(b, i, h) + d] += ds * qkv[g.K(b, j, kv) + d];
            dqkv[g.K(b, j, kv) + d] += ds * qkv[g.Q(b, i, h) + d];
            dqkv[g.V(b, j, kv) + d] += p[j] * dout[g.O(b, i, h) + d];
          }
        }
      }
    }
  }
}

}  // namespace parity::kernels::testing
