// Keyed bootstrap draws and the t/F tails. The tails use the regularised incomplete beta function
// (continued fraction, modified Lentz), accurate to ~1e-12 for the degrees of freedom a sweep has
// (1 to a few hundred); no table, no dependency.
#include "core/analysis_stats.h"

#include <cmath>
#include <limits>

namespace parity::core::stats {
namespace {

// FNV-1a: a fixed, portable hash of the run id (std::hash differs between standard libraries).
uint64_t Fnv1a(std::string_view text) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

double BetaContinuedFraction(double a, double b, double x) {
  constexpr double kTiny = 1e-300;
  double c = 1, d = 1 - (a + b) * x / (a + 1);
  if (std::fabs(d) < kTiny) d = kTiny;
  d = 1 / d;
  double h = d;
  for (int m = 1; m <= 500; ++m) {
    const double m2 = 2.0 * m;
    double aa = m * (b - m) * x / ((a + m2 - 1) * (a + m2));
    d = 1 + aa * d;
    d = std::fabs(d) < kTiny ? 1 / kTiny : 1 / d;
    c = 1 + aa / c;
    if (std::fabs(c) < kTiny) c = kTiny;
    h *= d * c;
    aa = -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1));
    d = 1 + aa * d;
    d = std::fabs(d) < kTiny ? 1 / kTiny : 1 / d;
    c = 1 + aa / c;
    if (std::fabs(c) < kTiny) c = kTiny;
    const double step = d * c;
    h *= step;
    if (std::fabs(step - 1) < 1e-14) break;
  }
  return h;
}

// I_x(a, b), the regularised incomplete beta function.
double IncompleteBeta(double a, double b, double x) {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  const double log_front =
      std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) + a * std::log(x) + b * std::log1p(-x);
  const double front = std::exp(log_front);
  if (x < (a + 1) / (a + b + 2)) return front * BetaContinuedFraction(a, b, x) / a;
  return 1 - front * BetaContinuedFraction(b, a, 1 - x) / b;
}

double Variance(const std::vector<double>& v) {
  const double s = Spread(v);
  return s * s;
}

}  // namespace

double KeyedNormal(uint64_t seed, int replicate, std::string_view run_key) {
  Rng rng(seed ^ Fnv1a(run_key) ^ (static_cast<uint64_t>(replicate) * 0xd1b54a32d192ed03ULL));
  rng.Next();  // decorrelate nearby states
  const double u1 = (static_cast<double>(rng.Next() >> 11) + 0.5) / 9007199254740992.0;
  const double u2 = (static_cast<double>(rng.Next() >> 11) + 0.5) / 9007199254740992.0;
  return std::sqrt(-2 * std::log(u1)) * std::cos(2 * M_PI * u2);
}

double StudentTUpperTail(double t, double df) {
  if (std::isinf(t)) return t > 0 ? 0.0 : 1.0;
  const double two_sided = IncompleteBeta(df / 2, 0.5, df / (df + t * t));
  return t >= 0 ? two_sided / 2 : 1 - two_sided / 2;
}

double StudentTQuantile(double tail, double df) {
  double lo = 0, hi = 1e6;
  for (int i = 0; i < 200; ++i) {
    const double mid = (lo + hi) / 2;
    (StudentTUpperTail(mid, df) > tail ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

double FUpperTail(double f, double d1, double d2) {
  if (!(f > 0)) return 1.0;
  if (std::isinf(f)) return 0.0;
  return IncompleteBeta(d2 / 2, d1 / 2, d2 / (d2 + d1 * f));
}

std::optional<WelchTest> OneSidedWelch(const std::vector<double>& high,
                                       const std::vector<double>& low) {
  if (high.size() < 2 || low.size() < 2) return std::nullopt;
  const double vh = Variance(high) / static_cast<double>(high.size());
  const double vl = Variance(low) / static_cast<double>(low.size());
  WelchTest test;
  test.difference = Mean(high) - Mean(low);
  const double se = std::sqrt(vh + vl);
  if (se == 0) {
    test.t = test.difference > 0 ? std::numeric_limits<double>::infinity() : 0;
    test.df = static_cast<double>(high.size() + low.size() - 2);
    test.p_value = test.difference > 0 ? 0.0 : 1.0;
    return test;
  }
  test.t = test.difference / se;
  test.df = (vh + vl) * (vh + vl) /
            (vh * vh / static_cast<double>(high.size() - 1) +
             vl * vl / static_cast<double>(low.size() - 1));
  test.p_value = StudentTUpperTail(test.t, test.df);
  return test;
}

std::optional<double> TwoSidedWelchP(const std::vector<double>& a, const std::vector<double>& b) {
  const std::optional<WelchTest> test = OneSidedWelch(a, b);
  if (!test) return std::nullopt;
  if (std::isinf(test->t)) return 0.0;
  if (test->t == 0 && test->difference == 0) return 1.0;
  return std::min(1.0, 2 * StudentTUpperTail(std::fabs(test->t), test->df));
}

}  // namespace parity::core::stats
