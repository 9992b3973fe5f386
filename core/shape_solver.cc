// Integer shape search. Candidates are scored with the exact counts of core/accounting.h, so the
// N a solver promises is the N the planner reports. The searches are small (a few thousand
// candidates per grid point) and each candidate is a handful of integer operations.
#include "core/shape_solver.h"

#include <cmath>
#include <limits>
#include <optional>
#include <tuple>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "core/accounting.h"
#include "core/grid.h"
#include "core/run_spec_defaults.h"
#include "core/symbols.h"

namespace parity::core {
namespace {

using parity::v1::ModelSpec;

// The multiple of `multiple` nearest `value`, at least `multiple` and at most 2^30 (a width no
// model has; past it a cast to uint32_t would be undefined, and a NaN too).
uint32_t RoundToMultiple(double value, uint32_t multiple) {
  const double rounded = std::round(value / multiple) * multiple;
  constexpr double kMax = double(1u << 30);
  if (!(rounded >= multiple)) return multiple;
  return static_cast<uint32_t>(std::min(rounded, std::floor(kMax / multiple) * multiple));
}

// The model's defaults (run_spec_defaults.h, which the engine's adapter applies too), then what a
// solved shape implies: the attention kind from its heads, and the sweep-side N tolerance.
void FillSolvedModelDefaults(ModelSpec& m) {
  FillModelDefaults(m);
  m.set_attention(m.num_kv_heads() == m.num_heads() ? parity::v1::ATTENTION_KIND_MULTI_HEAD
                                                    : parity::v1::ATTENTION_KIND_GROUPED_QUERY);
  if (m.param_tolerance() == 0) m.set_param_tolerance(kDefaultParamTolerance);
}

double RelativeError(double value, double target) { return std::fabs(value / target - 1.0); }

std::string Params(double n) { return CompactNumber(n); }

}  // namespace

double ParamTolerance(const ModelSpec& spec) {
  return spec.param_tolerance() > 0 ? spec.param_tolerance() : kDefaultParamTolerance;
}

absl::StatusOr<ModelSpec> ResolveBackbone(const ModelSpec& spec) {
  ModelSpec m = spec;
  m.set_architecture(parity::v1::ARCHITECTURE_MOE);
  if (m.d_model() == 0 || m.num_layers() == 0) {
    return absl::InvalidArgumentError("the MoE backbone needs d_model and num_layers");
  }
  if (m.num_heads() > 0) {
    m.set_head_dim(m.d_model() / m.num_heads());
  } else if (m.head_dim() > 0) {
    m.set_num_heads(m.d_model() / m.head_dim());
  }
  if (m.num_heads() == 0 || m.num_heads() * m.head_dim() != m.d_model()) {
    return absl::InvalidArgumentError("the MoE backbone's heads do not divide d_model");
  }
  if (m.num_kv_heads() == 0) m.set_num_kv_heads(m.num_heads());
  if (m.ffn_hidden() == 0 && m.ffn_ratio() > 0) {
    m.set_ffn_hidden(RoundToMultiple(m.ffn_ratio() * m.d_model(), kFfnHiddenMultiple));
  }
  if (m.ffn_hidden() > 0) m.set_ffn_ratio(double(m.ffn_hidden()) / m.d_model());
  m.set_aspect_ratio(double(m.d_model()) / m.num_layers());
  FillSolvedModelDefaults(m);  // the router's too: m is an MoE
  return m;
}

uint64_t BackboneTargetParams(const ModelSpec& b) {
  if (b.target_params() > 0) return b.target_params();
  const double mu = b.moe().total_ffn_ratio();
  if (mu <= 0) return 0;
  Shape s;
  s.d_model = b.d_model();
  s.num_heads = b.num_heads();
  s.num_kv_heads = b.num_kv_heads();
  s.head_dim = b.head_dim();
  s.ffn_hidden = b.ffn_hidden();
  s.moe_layers = MoeLayerCount(b);
  s.dense_layers = b.num_layers() - s.moe_layers;
  const double d_m = b.d_model();
  return CountParams(s).params +
         static_cast<uint64_t>(std::llround(3.0 * d_m * mu * d_m * s.moe_layers));
}

absl::StatusOr<ModelSpec> SolveMoePoint(const ModelSpec& backbone,
                                        const parity::v1::MoePoint& point, uint64_t target_params) {
  const uint32_t d_m = backbone.d_model();
  const auto& moe = backbone.moe();
  const bool one_dense_se = moe.layout() == parity::v1::MOE_LAYOUT_ONE_DENSE_SHARED_EXPERT;
  const double tolerance = ParamTolerance(backbone);
  const double target_ra = point.target_activation_rate();
  const double mu = moe.total_ffn_ratio();
  double target_g = point.granularity() > 0 ? point.granularity() : moe.granularity();
  // A point that pins K beside a target r_a varies r_a through E and D_e (K held fixed across
  // the points, so r_a is not confounded with top-K): the backbone's granularity is then only a
  // preference among shapes of equal r_a, not a constraint. The point's own granularity still
  // fixes D_e.
  const bool k_pinned = point.top_k() > 0 && target_ra > 0;
  const bool g_fixed = point.expert_hidden() == 0 &&
                       (point.granularity() > 0 || (moe.granularity() > 0 && !k_pinned));
  if (target_g <= 0) target_g = kDefaultGranularity;

  Shape base;
  base.d_model = d_m;
  base.num_heads = backbone.num_heads();
  base.num_kv_heads = backbone.num_kv_heads();
  base.head_dim = backbone.head_dim();
  base.ffn_hidden = backbone.ffn_hidden();
  base.moe_layers = MoeLayerCount(backbone);
  base.dense_layers = backbone.num_layers() - base.moe_layers;
  if (base.moe_layers == 0) return absl::InvalidArgumentError("the backbone has no MoE layer");

  // D_e candidates: fixed, the multiple of 32 nearest the wanted G, or every multiple up to 4·D_m.
  uint32_t de_lo = kExpertHiddenMultiple,
           de_hi = std::max<uint32_t>(4 * d_m, kExpertHiddenMultiple);
  if (point.expert_hidden() > 0) {
    de_lo = de_hi = point.expert_hidden();
  } else if (g_fixed) {
    de_lo = de_hi = RoundToMultiple(2.0 * d_m / target_g, kExpertHiddenMultiple);
  }
  const uint32_t k_lo = point.top_k() > 0 ? point.top_k() : 1;
  const uint32_t k_hi = point.top_k() > 0 ? point.top_k() : 256;

  struct Candidate {
    Shape shape;
    ParamCounts counts;
    double ra_error = 0, g_distance = 0, n_error = 0;
  };
  // Visits every candidate whose N is within tolerance; `visit` returns false to stop the K loop.
  auto for_each = [&](auto&& visit) {
    for (uint32_t d_e = de_lo; d_e <= de_hi; d_e += kExpertHiddenMultiple) {
      for (uint32_t k = k_lo; k <= k_hi; ++k) {
        Shape s = base;
        s.expert_hidden = d_e;
        s.top_k = k;
        s.shared_expert_hidden = one_dense_se ? k * d_e : moe.shared_expert_hidden();
        uint32_t e_candidates[2] = {point.num_experts(), point.num_experts()};
        if (point.num_experts() == 0) {
          double e_real;
          if (target_params > 0) {
            s.num_experts = 0;
            const double without_experts = double(CountParams(s).params);
            e_real = (double(target_params) - without_experts) /
                     (double(s.moe_layers) * d_m * (1.0 + 3.0 * d_e));
          } else {
            e_real = (mu * d_m - s.shared_expert_hidden) / d_e;
          }
          if (e_real < k) break;  // larger K only shrinks E further under 1dense+SE
          // No E that large (nor a NaN) fits a uint32: casting it would be undefined.
          if (!(e_real < double(std::numeric_limits<uint32_t>::max()))) continue;
          e_candidates[0] = static_cast<uint32_t>(std::floor(e_real));
          e_candidates[1] = static_cast<uint32_t>(std::ceil(e_real));
        }
        bool keep_going = true;
        for (int i = 0; i < (e_candidates[0] == e_candidates[1] ? 1 : 2); ++i) {
          s.num_experts = e_candidates[i];
          if (s.num_experts < k || s.num_experts == 0) continue;
          Candidate c{s, CountParams(s)};
          if (target_params > 0) {
            c.n_error = RelativeError(double(c.counts.params), double(target_params));
            if (c.n_error > tolerance) continue;
          }
          const double ra = double(c.counts.active_params) / double(c.counts.params);
          c.ra_error = target_ra > 0 ? RelativeError(ra, target_ra) : 0.0;
          // Bucketed so that near-equal granularities (D_e 480 vs 512) let N error decide.
          c.g_distance = std::floor(std::fabs(std::log2(2.0 * d_m / d_e / target_g)) / 0.25);
          keep_going = visit(c) && keep_going;
          if (target_ra > 0 && ra > target_ra * 2) keep_going = false;  // r_a grows with K
        }
        if (!keep_going) break;
      }
    }
  };

  double best_ra_error = std::numeric_limits<double>::infinity();
  for_each([&](const Candidate& c) {
    best_ra_error = std::min(best_ra_error, c.ra_error);
    return true;
  });
  if (!std::isfinite(best_ra_error) && point.num_experts() > 0 && point.top_k() > 0 &&
      point.expert_hidden() > 0) {
    // Fully explicit: say what the triple gives so the researcher can adjust it.
    Shape s = base;
    s.num_experts = point.num_experts();
    s.top_k = point.top_k();
    s.expert_hidden = point.expert_hidden();
    s.shared_expert_hidden = one_dense_se ? s.top_k * s.expert_hidden : moe.shared_expert_hidden();
    const double n = double(CountParams(s).params);
    return absl::InvalidArgumentError(absl::StrFormat(
        "(E=%d, K=%d, D_e=%d) gives N = %s, %.1f%% from the target %s (tolerance %g%%)",
        s.num_experts, s.top_k, s.expert_hidden, Params(n), (n / target_params - 1) * 100,
        Params(double(target_params)), tolerance * 100));
  }
  if (!std::isfinite(best_ra_error)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("no (E, K, D_e) with D_e a multiple of %d brings N within %g%% of %s",
                        kExpertHiddenMultiple, tolerance * 100,
                        target_params > 0 ? Params(double(target_params)) : "the backbone's μ"));
  }
  std::optional<Candidate> best;
  const double cutoff = best_ra_error + kActivationRateSlack;
  for_each([&](const Candidate& c) {
    if (c.ra_error > cutoff) return true;
    if (!best || std::tie(c.g_distance, c.n_error) < std::tie(best->g_distance, best->n_error)) {
      best = c;
    }
    return true;
  });
  const Shape& s = best->shape;
  const double ra = double(best->counts.active_params) / double(best->counts.params);
  if (target_ra > 0 && best_ra_error > kActivationRateTolerance) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "target r_a %g is out of reach: the closest is %.4f (E=%d, K=%d, D_e=%d), %.0f%% away "
        "(limit %.0f%%)",
        target_ra, ra, s.num_experts, s.top_k, s.expert_hidden, best_ra_error * 100,
        kActivationRateTolerance * 100));
  }
  ModelSpec m = backbone;
  auto* out = m.mutable_moe();
  out->set_num_experts(s.num_experts);
  out->set_top_k(s.top_k);
  out->set_expert_hidden(s.expert_hidden);
  out->set_shared_expert_hidden(s.shared_expert_hidden);
  out->set_total_ffn_ratio((s.shared_expert_hidden + double(s.num_experts) * s.expert_hidden) /
                           d_m);
  out->set_target_activation_rate(target_ra);
  out->set_granularity(2.0 * d_m / s.expert_hidden);
  m.set_target_params(target_params);
  m.set_param_tolerance(tolerance);
  return m;
}

absl::StatusOr<ModelSpec> SolveDense(const ModelSpec& spec, const ModelSpec* backbone,
                                     uint64_t target_params) {
  ModelSpec m = spec;
  m.set_architecture(parity::v1::ARCHITECTURE_DENSE);
  m.clear_moe();
  const double tolerance = ParamTolerance(spec);
  uint32_t head_dim = spec.head_dim();
  if (head_dim == 0 && spec.num_heads() > 0 && spec.d_model() > 0) {
    head_dim = spec.d_model() / spec.num_heads();
  }
  if (head_dim == 0) head_dim = backbone != nullptr ? backbone->head_dim() : 64;
  double alpha = spec.ffn_ratio();
  if (alpha <= 0 && backbone != nullptr) alpha = backbone->ffn_ratio();
  if (alpha <= 0) alpha = 8.0 / 3.0;
  double zeta = spec.aspect_ratio();
  if (zeta <= 0 && backbone != nullptr) zeta = backbone->aspect_ratio();
  if (zeta <= 0) zeta = 128.0;

  auto shape_for = [&](uint32_t d_m, uint32_t layers) {
    Shape s;
    s.d_model = d_m;
    s.head_dim = head_dim;
    s.num_heads = d_m / head_dim;
    s.num_kv_heads = spec.num_kv_heads() > 0 ? spec.num_kv_heads() : s.num_heads;
    s.ffn_hidden = spec.ffn_hidden() > 0 ? spec.ffn_hidden()
                                         : RoundToMultiple(alpha * d_m, kFfnHiddenMultiple);
    s.dense_layers = layers;
    return s;
  };

  Shape best;
  if (spec.d_model() > 0 && spec.num_layers() > 0) {
    best = shape_for(spec.d_model(), spec.num_layers());
  } else {
    if (target_params == 0) {
      return absl::InvalidArgumentError("set d_model and num_layers, or target_params");
    }
    double best_score = std::numeric_limits<double>::infinity();
    const uint32_t d_lo = spec.d_model() > 0 ? spec.d_model() : head_dim;
    const uint32_t d_hi = spec.d_model() > 0 ? spec.d_model() : 32768;
    for (uint32_t d_m = d_lo; d_m <= d_hi; d_m += head_dim) {
      Shape one = shape_for(d_m, 1);
      if (one.num_kv_heads == 0 || one.num_heads % one.num_kv_heads != 0) continue;
      const double per_layer = double(CountParams(one).params);
      const double l_real = double(target_params) / per_layer;
      for (double l : {std::floor(l_real), std::ceil(l_real)}) {
        if (spec.num_layers() > 0) l = spec.num_layers();
        if (l < 1 || l > 1024) continue;
        const Shape s = shape_for(d_m, static_cast<uint32_t>(l));
        const double n_error = RelativeError(double(CountParams(s).params), double(target_params));
        if (n_error > tolerance) continue;
        const double score = std::fabs(std::log(d_m / l / zeta)) + n_error;
        if (score < best_score) {
          best_score = score;
          best = s;
        }
      }
    }
    if (!std::isfinite(best_score)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "no dense shape (D_m a multiple of head_dim %d) brings N within %g%% of %s", head_dim,
          tolerance * 100, Params(double(target_params))));
    }
  }
  m.set_d_model(best.d_model);
  m.set_num_layers(best.dense_layers);
  m.set_head_dim(best.head_dim);
  m.set_num_heads(best.num_heads);
  m.set_num_kv_heads(best.num_kv_heads);
  m.set_ffn_hidden(best.ffn_hidden);
  m.set_ffn_ratio(double(best.ffn_hidden) / best.d_model);
  m.set_aspect_ratio(double(best.d_model) / best.dense_layers);
  m.set_target_params(target_params);
  FillSolvedModelDefaults(m);
  return m;
}

}  // namespace parity::core
