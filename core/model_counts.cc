// Parameter counting and layer placement. Everything is integer arithmetic on uint64, so N and
// N_a are exact and two runs with the same shape always agree to the parameter.
#include "core/model_counts.h"

namespace parity::core {

bool IsMoeLayer(const LayerPlacement& p, uint32_t index) {
  if (index >= p.num_layers) return false;
  switch (p.layout) {
    case MoeLayout::kDense:
      return false;
    case MoeLayout::kOneDenseShared:
      return index > 0;
    case MoeLayout::kAllMoe:
      return true;
    case MoeLayout::kInterleaved:
      return p.interleave_every > 0 && (index + 1) % p.interleave_every == 0;
  }
  return false;
}

uint32_t MoeLayerCount(const LayerPlacement& p) {
  switch (p.layout) {
    case MoeLayout::kDense:
      return 0;
    case MoeLayout::kOneDenseShared:
      return p.num_layers > 0 ? p.num_layers - 1 : 0;
    case MoeLayout::kAllMoe:
      return p.num_layers;
    case MoeLayout::kInterleaved:
      return p.interleave_every == 0 ? 0 : p.num_layers / p.interleave_every;
  }
  return 0;
}

uint32_t DefaultSharedExpertHidden(MoeLayout layout, uint32_t top_k, uint32_t expert_hidden) {
  return layout == MoeLayout::kOneDenseShared ? top_k * expert_hidden : 0;
}

ParamCounts CountParams(const Shape& s) {
  const uint64_t d_m = s.d_model;
  const uint64_t layers = uint64_t{s.dense_layers} + s.moe_layers;
  ParamCounts c;
  // Q and O project D_m ↔ H·D_h; K and V project D_m → H_kv·D_h.
  c.attention =
      layers * (2 * d_m * s.num_heads * s.head_dim + 2 * d_m * s.num_kv_heads * s.head_dim);
  const uint64_t dense_ffn = s.dense_layers * 3 * d_m * s.ffn_hidden;
  const uint64_t routed = s.moe_layers * 3 * d_m * uint64_t{s.expert_hidden} * s.num_experts;
  const uint64_t active_routed = s.moe_layers * 3 * d_m * uint64_t{s.expert_hidden} * s.top_k;
  const uint64_t shared = s.moe_layers * 3 * d_m * uint64_t{s.shared_expert_hidden};
  c.router = s.moe_layers * d_m * s.num_experts;
  c.ffn = dense_ffn + routed + shared;
  c.params = c.attention + c.ffn + c.router;
  c.active_params = c.attention + dense_ffn + active_routed + shared + c.router;
  return c;
}

double ForwardFlopsPerToken(const Shape& s, uint64_t active_params, uint32_t sequence_length) {
  const double layers = double(s.dense_layers) + double(s.moe_layers);
  // 2 FLOPs per multiply-add over the activated weights, plus QK^T and the weighted sum of V over
  // a full window of S (the literature's convention, not the causal half).
  return 2.0 * double(active_params) + 4.0 * double(s.d_model) * sequence_length * layers;
}

}  // namespace parity::core
