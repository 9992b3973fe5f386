// A ModelSpec's accounting: its Shape and placement for the shared counting rules
// (model_counts.h), then the ratios and per-part counts of the Accounting message.
#include "core/accounting.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "core/symbols.h"

namespace parity::core {

using parity::v1::Accounting;
using parity::v1::ModelSpec;

LayerPlacement PlacementOf(const ModelSpec& model) {
  LayerPlacement p{.num_layers = model.num_layers(),
                   .interleave_every = model.moe().interleave_every()};
  if (model.architecture() != parity::v1::ARCHITECTURE_MOE) return p;
  switch (model.moe().layout()) {
    case parity::v1::MOE_LAYOUT_ONE_DENSE_SHARED_EXPERT:
      p.layout = MoeLayout::kOneDenseShared;
      break;
    case parity::v1::MOE_LAYOUT_ALL_MOE:
      p.layout = MoeLayout::kAllMoe;
      break;
    case parity::v1::MOE_LAYOUT_INTERLEAVED:
      p.layout = MoeLayout::kInterleaved;
      break;
    default:
      break;  // no MoE layer; ShapeOf refuses an MoE model without one
  }
  return p;
}

uint32_t MoeLayerCount(const ModelSpec& model) { return MoeLayerCount(PlacementOf(model)); }

bool IsMoeLayer(const ModelSpec& model, uint32_t index) {
  return IsMoeLayer(PlacementOf(model), index);
}

absl::StatusOr<Shape> ShapeOf(const ModelSpec& m) {
  auto invalid = [](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat("resolved model: ", std::string(what)));
  };
  if (m.d_model() == 0 || m.num_layers() == 0 || m.num_heads() == 0) {
    return invalid("d_model, num_layers and num_heads must all be set");
  }
  // An unset D_h is D_m/H, as the planner derives it and the engine reads it.
  const uint32_t head_dim = m.head_dim() != 0 ? m.head_dim() : m.d_model() / m.num_heads();
  if (uint64_t{m.num_heads()} * head_dim != m.d_model()) {
    return invalid(absl::StrCat("num_heads ", m.num_heads(), " × head_dim ", head_dim,
                                " != d_model ", m.d_model()));
  }
  Shape s;
  s.d_model = m.d_model();
  s.num_heads = m.num_heads();
  s.num_kv_heads = m.num_kv_heads() == 0 ? m.num_heads() : m.num_kv_heads();
  s.head_dim = head_dim;
  s.ffn_hidden = m.ffn_hidden();
  if (s.num_kv_heads > s.num_heads || s.num_heads % s.num_kv_heads != 0) {
    return invalid(
        absl::StrCat("num_kv_heads ", s.num_kv_heads, " must divide num_heads ", s.num_heads));
  }
  s.moe_layers = MoeLayerCount(m);
  s.dense_layers = m.num_layers() - s.moe_layers;
  if (s.dense_layers > 0 && s.ffn_hidden == 0) return invalid("ffn_hidden must be set");
  if (m.architecture() == parity::v1::ARCHITECTURE_MOE) {
    if (s.moe_layers == 0) return invalid("an MoE model needs at least one MoE layer");
    const auto& moe = m.moe();
    if (moe.num_experts() == 0 || moe.top_k() == 0 || moe.expert_hidden() == 0) {
      return invalid("moe.num_experts, moe.top_k and moe.expert_hidden must be set");
    }
    if (moe.top_k() > moe.num_experts()) {
      return invalid(
          absl::StrCat("moe.top_k ", moe.top_k(), " exceeds num_experts ", moe.num_experts()));
    }
    s.num_experts = moe.num_experts();
    s.top_k = moe.top_k();
    s.expert_hidden = moe.expert_hidden();
    s.shared_expert_hidden =
        moe.shared_expert_hidden() != 0
            ? moe.shared_expert_hidden()
            : DefaultSharedExpertHidden(PlacementOf(m).layout, s.top_k, s.expert_hidden);
  } else if (m.architecture() != parity::v1::ARCHITECTURE_DENSE) {
    return invalid("architecture must be DENSE or MOE");
  }
  return s;
}

absl::StatusOr<Accounting> ComputeAccounting(const ModelSpec& model, uint32_t sequence_length) {
  if (sequence_length == 0) return absl::InvalidArgumentError("sequence_length must be > 0");
  PARITY_ASSIGN_OR_RETURN(const Shape s, ShapeOf(model));
  const ParamCounts c = CountParams(s);
  const double d_m = s.d_model;
  Accounting a;
  a.set_params(c.params);
  a.set_active_params(c.active_params);
  a.set_activation_rate(double(c.active_params) / double(c.params));
  a.set_forward_flops_per_token(ForwardFlopsPerToken(s, c.active_params, sequence_length));
  a.set_flops_per_token(3.0 * a.forward_flops_per_token());
  a.set_ffn_ratio(s.dense_layers > 0 ? s.ffn_hidden / d_m : 0.0);
  a.set_aspect_ratio(d_m / model.num_layers());
  a.set_sequence_ratio(sequence_length / d_m);
  const uint64_t vocab = model.vocab_size() == 0 ? kDefaultVocabSize : model.vocab_size();
  a.set_vocab_params(vocab * s.d_model * (model.tie_embeddings() ? 1 : 2));
  a.set_router_params(c.router);
  a.set_attention_params(c.attention);
  a.set_ffn_params(c.ffn);
  a.set_dense_layers(s.dense_layers);
  a.set_moe_layers(s.moe_layers);
  if (s.moe_layers > 0) {
    const double d_e = s.expert_hidden;
    a.set_granularity(2.0 * d_m / d_e);
    a.set_total_ffn_ratio((s.shared_expert_hidden + double(s.num_experts) * d_e) / d_m);
    a.set_active_ffn_ratio((s.shared_expert_hidden + double(s.top_k) * d_e) / d_m);
    // The shared expert counts as D_se/D_e always-on experts (1dense+SE: K of them).
    const double shared = s.shared_expert_hidden / d_e;
    a.set_expert_activation_ratio((s.top_k + shared) / (s.num_experts + shared));
  }
  return a;
}

void SetTokens(uint64_t tokens, uint64_t unique_tokens, Accounting& a) {
  a.set_tokens(tokens);
  a.set_unique_tokens(unique_tokens);
  a.set_epochs(unique_tokens == 0 ? 0.0 : double(tokens) / double(unique_tokens));
  a.set_compute_flops(a.flops_per_token() * double(tokens));
}

}  // namespace parity::core
