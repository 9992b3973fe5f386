#include "kernels/model/config.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace parity::kernels {

parity::core::LayerPlacement ModelConfig::Placement() const {
  auto narrow = [](int64_t v) { return v < 0 ? 0u : static_cast<uint32_t>(v); };
  return {.layout = layout,
          .num_layers = narrow(n_layers),
          .interleave_every = narrow(interleave_every)};
}

bool ModelConfig::IsMoeLayer(int64_t layer) const {
  return layer >= 0 && parity::core::IsMoeLayer(Placement(), static_cast<uint32_t>(layer));
}

int64_t ModelConfig::SharedDim() const {
  if (d_shared >= 0) return d_shared;
  return parity::core::DefaultSharedExpertHidden(layout, static_cast<uint32_t>(top_k),
                                                 static_cast<uint32_t>(d_expert));
}

const char* LayoutName(MoeLayout layout) {
  switch (layout) {
    case MoeLayout::kDense:
      return "dense";
    case MoeLayout::kOneDenseShared:
      return "1dense+SE";
    case MoeLayout::kAllMoe:
      return "all-moe";
    case MoeLayout::kInterleaved:
      return "interleaved";
  }
  return "unknown";
}

const char* PrecisionName(Precision precision) {
  switch (precision) {
    case Precision::kFp32:
      return "fp32";
    case Precision::kBf16:
      return "bf16";
    case Precision::kUnspecified:
      break;
  }
  return "unspecified";
}

namespace {
absl::Status Bad(const char* field, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", why));
}
}  // namespace

absl::Status ValidateRunConfig(const RunConfig& c) {
  const ModelConfig& m = c.model;
  if (m.d_model <= 0) return Bad("model.d_model", "must be positive");
  if (!(m.init_std > 0)) return Bad("model.init_std", "must be positive");
  if (m.n_layers <= 0) return Bad("model.num_layers", "must be positive");
  if (m.n_heads <= 0 || m.d_model % m.n_heads != 0) {
    return Bad("model.num_heads", absl::StrCat("must be positive and divide d_model (", m.d_model,
                                               "), got ", m.n_heads));
  }
  if (m.n_kv_heads <= 0 || m.n_heads % m.n_kv_heads != 0) {
    return Bad("model.num_kv_heads", absl::StrCat("must be positive and divide n_heads (",
                                                  m.n_heads, "), got ", m.n_kv_heads));
  }
  if (m.positions == Positions::kRotary && m.head_dim() % 2 != 0) {
    return Bad("model.num_heads", "rotary positions need an even head dimension");
  }
  if (m.seq_len <= 1) return Bad("training.sequence_length", "must be at least 2");
  // Ids are int32 on the device; the embedding and head are V·D_m each.
  if (m.vocab_size < 2 || m.vocab_size > (int64_t{1} << 31) - 1) {
    return Bad("model.vocab_size", absl::StrCat("must be in [2, 2^31), got ", m.vocab_size));
  }
  if (m.rope_theta <= 0) return Bad("model.rope_theta", "must be positive");
  bool any_dense = false, any_moe = false;
  for (int64_t l = 0; l < m.n_layers; ++l) (m.IsMoeLayer(l) ? any_moe : any_dense) = true;
  if (m.layout == MoeLayout::kInterleaved && m.interleave_every <= 0) {
    return Bad("model.moe.interleave_every", "must be positive");
  }
  if (any_dense && m.d_ffn <= 0) return Bad("model.ffn_hidden", "dense layers need d_ffn > 0");
  if (m.layout != MoeLayout::kDense) {
    if (!any_moe) return Bad("model.moe.layout", "this layout leaves no MoE layer for n_layers");
    if (m.n_experts <= 0) return Bad("model.moe.num_experts", "must be positive for an MoE layout");
    if (m.top_k <= 0 || m.top_k > m.n_experts) {
      return Bad("model.moe.top_k",
                 absl::StrCat("must be in [1, n_experts=", m.n_experts, "], got ", m.top_k));
    }
    if (m.d_expert <= 0) return Bad("model.moe.expert_hidden", "must be positive");
    if (m.aux_loss_weight < 0) return Bad("model.moe.router.aux_loss_coef", "must be >= 0");
    if (m.z_loss_weight < 0) return Bad("model.moe.router.z_loss_coef", "must be >= 0");
    if (m.bias_update_rate < 0) return Bad("model.moe.router.bias_update_rate", "must be >= 0");
  }
  const OptimizerConfig& o = c.optimizer;
  if (!(o.lr > 0) || !std::isfinite(o.lr)) return Bad("training.learning_rate", "must be positive");
  if (o.min_lr < 0 || o.min_lr > o.lr)
    return Bad("training.min_lr_ratio", "must be in [0, 1] (floor as a fraction of the peak)");
  if (o.warmup_steps < 0) return Bad("training.warmup_steps", "must be >= 0");
  if (o.decay_fraction < 0 || o.decay_fraction > 1) {
    return Bad("training.decay_fraction", "must be in [0, 1]");
  }
  if (o.beta1 < 0 || o.beta1 >= 1) return Bad("training.adam_beta1", "must be in [0, 1)");
  if (o.beta2 < 0 || o.beta2 >= 1) return Bad("training.adam_beta2", "must be in [0, 1)");
  if (o.eps <= 0) return Bad("training.adam_epsilon", "must be positive");
  if (o.weight_decay < 0) return Bad("training.weight_decay", "must be >= 0");
  if (o.grad_clip < 0) return Bad("training.grad_clip", "must be >= 0");
  const TrainConfig& t = c.train;
  if (t.batch_size <= 0) return Bad("training.micro_batch_sequences", "must be positive");
  if (t.batch_sequences <= 0) return Bad("training.batch_tokens", "must be positive");
  if (t.steps <= 0) return Bad("training.steps", "must be positive");
  if (t.log_interval <= 0) return Bad("training.log_every_steps", "must be positive");
  if (t.eval_interval <= 0) return Bad("training.eval_every_steps", "must be positive");
  if (t.eval_tokens < m.seq_len) return Bad("training.eval_tokens", "must be at least seq_len");
  if (t.checkpoint_interval < 0) return Bad("training.checkpoint_every_steps", "must be >= 0");
  if (t.keep_checkpoints < 1) return Bad("training.keep_checkpoints", "must be at least 1");
  const DataConfig& d = c.data;
  if (d.corpus_path.empty()) return Bad("data.corpus", "is required");
  if (!(d.validation_fraction > 0 && d.validation_fraction < 1)) {
    return Bad("data.validation_fraction", "must be in (0, 1)");
  }
  if (d.unique_tokens < 0) return Bad("data.unique_tokens", "must be >= 0");
  if (d.unique_tokens > 0 && d.unique_tokens < m.seq_len) {
    return Bad("data.unique_tokens", "must be 0 (whole split) or at least seq_len");
  }
  return absl::OkStatus();
}

parity::core::Shape CountingShape(const ModelConfig& m) {
  parity::core::Shape s;
  s.d_model = static_cast<uint32_t>(m.d_model);
  s.num_heads = static_cast<uint32_t>(m.n_heads);
  s.num_kv_heads = static_cast<uint32_t>(m.n_kv_heads);
  s.head_dim = static_cast<uint32_t>(m.head_dim());
  s.ffn_hidden = static_cast<uint32_t>(m.d_ffn);
  s.moe_layers = parity::core::MoeLayerCount(m.Placement());
  s.dense_layers = static_cast<uint32_t>(m.n_layers) - s.moe_layers;
  if (s.moe_layers > 0) {
    s.num_experts = static_cast<uint32_t>(m.n_experts);
    s.top_k = static_cast<uint32_t>(m.top_k);
    s.expert_hidden = static_cast<uint32_t>(m.d_expert);
    s.shared_expert_hidden = static_cast<uint32_t>(m.SharedDim());
  }
  return s;
}

AnalyticCounts ComputeAnalyticCounts(const ModelConfig& m) {
  const parity::core::Shape shape = CountingShape(m);
  const parity::core::ParamCounts counts = parity::core::CountParams(shape);
  AnalyticCounts a;
  a.params = static_cast<double>(counts.params);
  a.active_params = static_cast<double>(counts.active_params);
  // Embedding (+ untied head): reported apart, never in N, N_a or M (docs/domain.md).
  a.vocab_params =
      static_cast<double>(m.vocab_size * m.d_model * (m.head == HeadTying::kTied ? 1 : 2));
  a.flops_per_token = 3 * parity::core::ForwardFlopsPerToken(shape, counts.active_params,
                                                             static_cast<uint32_t>(m.seq_len));
  return a;
}

}  // namespace parity::kernels
