#include "kernels/spec/run_spec_adapter.h"

#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/run_spec_defaults.h"
#include "core/status_macros.h"
#include "kernels/cpu/ops_dense.h"
#include "parity/v1/sweep.pb.h"

namespace parity::kernels {
namespace {

absl::Status Bad(const char* field, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", why));
}

// The MoE part of a model (defaults filled) into `mc`.
absl::Status MoeFromSpec(const parity::v1::MoeSpec& moe, ModelConfig& mc) {
  switch (moe.layout()) {
    case parity::v1::MOE_LAYOUT_ONE_DENSE_SHARED_EXPERT:
      mc.layout = MoeLayout::kOneDenseShared;
      break;
    case parity::v1::MOE_LAYOUT_ALL_MOE:
      mc.layout = MoeLayout::kAllMoe;
      break;
    case parity::v1::MOE_LAYOUT_INTERLEAVED:
      mc.layout = MoeLayout::kInterleaved;
      break;
    default:
      return Bad("model.moe.layout", "required for an MOE architecture");
  }
  mc.interleave_every = moe.interleave_every();
  mc.n_experts = moe.num_experts();
  mc.top_k = moe.top_k();
  mc.d_expert = moe.expert_hidden();
  mc.d_shared = moe.shared_expert_hidden() == 0 && mc.layout == MoeLayout::kOneDenseShared
                    ? -1
                    : static_cast<int64_t>(moe.shared_expert_hidden());
  const auto& r = moe.router();
  mc.gate_norm = r.renormalize_gates() ? GateNorm::kRenormalize : GateNorm::kRaw;
  // The coefficients are core's for the balance (aux λ only with aux_loss, λ_z unless none);
  // u is read only where loss-free balancing uses it.
  const bool loss_free = r.balance() == parity::v1::BALANCE_METHOD_LOSS_FREE;
  mc.aux_loss_weight = r.aux_loss_coef();
  mc.z_loss_weight = r.z_loss_coef();
  mc.bias_update_rate = loss_free ? r.bias_update_rate() : 0.0;
  if (loss_free && mc.bias_update_rate <= 0) {
    return Bad("model.moe.router.bias_update_rate", "must be positive for LOSS_FREE");
  }
  return absl::OkStatus();
}

// Model `m` (defaults filled) into `mc`, all but seq_len (the training's).
absl::Status ModelFromSpec(const parity::v1::ModelSpec& m, ModelConfig& mc) {
  // The byte vocabulary by default; the dataset's tokenizer must agree (checked when it is opened).
  mc.vocab_size = static_cast<int64_t>(m.vocab_size());
  mc.d_model = m.d_model();
  mc.n_layers = m.num_layers();
  mc.n_heads = m.num_heads();
  mc.n_kv_heads = m.num_kv_heads();
  if (m.head_dim() != 0 && m.num_heads() != 0 && m.head_dim() * m.num_heads() != m.d_model()) {
    return Bad("model.head_dim", absl::StrCat("must equal d_model/num_heads = ",
                                              m.d_model() / m.num_heads(), ", got ", m.head_dim()));
  }
  if (m.attention() == parity::v1::ATTENTION_KIND_MULTI_HEAD && mc.n_kv_heads != mc.n_heads) {
    return Bad("model.num_kv_heads", "must equal num_heads for MULTI_HEAD attention");
  }
  if (m.attention() == parity::v1::ATTENTION_KIND_GROUPED_QUERY && mc.n_kv_heads >= mc.n_heads) {
    return Bad("model.num_kv_heads", "must be below num_heads for GROUPED_QUERY attention");
  }
  mc.positions = m.position_encoding() == parity::v1::POSITION_ENCODING_ALIBI ? Positions::kAlibi
                                                                              : Positions::kRotary;
  mc.d_ffn = m.ffn_hidden();
  mc.head = m.tie_embeddings() ? HeadTying::kTied : HeadTying::kUntied;
  mc.rope_theta = m.rope_theta();
  mc.init_std = m.init_std();
  if (std::abs(m.norm_eps() - cpu::kRmsNormEps) > 1e-12) {
    return Bad("model.norm_eps", absl::StrCat("the engine's RMSNorm uses ", cpu::kRmsNormEps,
                                              " only, got ", m.norm_eps()));
  }
  switch (m.architecture()) {
    case parity::v1::ARCHITECTURE_DENSE:
      mc.layout = MoeLayout::kDense;
      return absl::OkStatus();
    case parity::v1::ARCHITECTURE_MOE:
      return MoeFromSpec(m.moe(), mc);
    default:
      return Bad("model.architecture", "must be DENSE or MOE");
  }
}

// Training `t` (defaults filled) into the optimizer, the loop's cadence, S and the precision.
absl::Status TrainingFromSpec(const parity::v1::TrainingSpec& t, RunConfig& c) {
  OptimizerConfig& o = c.optimizer;
  TrainConfig& tc = c.train;
  c.model.seq_len = t.sequence_length();
  if (c.model.seq_len <= 1) return Bad("training.sequence_length", "must be at least 2");
  if (t.rule() == parity::v1::HYPERPARAMETER_RULE_STEP_LAW && t.learning_rate() == 0) {
    return Bad("training.learning_rate", "a RunSpec must be resolved by the planner (STEP_LAW)");
  }
  o.lr = t.learning_rate();
  if (t.batch_tokens() == 0 || t.batch_tokens() % c.model.seq_len != 0) {
    return Bad("training.batch_tokens", absl::StrCat("must be a positive multiple of "
                                                     "sequence_length (",
                                                     c.model.seq_len, ")"));
  }
  const int64_t sequences = t.batch_tokens() / c.model.seq_len;
  // A cap: each rank's share is cut into micro-batches of at most this many (micro_batches.h).
  const int64_t micro = t.micro_batch_sequences() == 0 ? sequences : t.micro_batch_sequences();
  tc.batch_size = std::min(micro, sequences);
  tc.batch_sequences = sequences;
  tc.steps = static_cast<int64_t>(t.steps());
  switch (t.schedule()) {
    case parity::v1::LR_SCHEDULE_COSINE:
      o.schedule = Schedule::kCosine;
      break;
    case parity::v1::LR_SCHEDULE_WSD:
      o.schedule = Schedule::kWarmupStableDecay;
      break;
    case parity::v1::LR_SCHEDULE_CONSTANT:
      o.schedule = Schedule::kConstant;
      break;
    default:
      return Bad("training.schedule", absl::StrCat("unknown value ", t.schedule()));
  }
  o.warmup_steps = static_cast<int64_t>(t.warmup_steps());
  if (t.min_lr_ratio() < 0 || t.min_lr_ratio() > 1) {
    return Bad("training.min_lr_ratio", "must be in [0, 1]");
  }
  o.min_lr = t.min_lr_ratio() * o.lr;
  o.decay_fraction = t.decay_fraction();
  o.beta1 = t.adam_beta1();
  o.beta2 = t.adam_beta2();
  o.eps = t.adam_epsilon();
  o.weight_decay = t.weight_decay();
  o.grad_clip = t.grad_clip();
  tc.seed = t.seed();
  tc.log_interval = t.log_every_steps();
  tc.eval_interval = t.eval_every_steps();
  tc.eval_tokens = static_cast<int64_t>(t.eval_tokens());
  tc.checkpoint_interval = t.checkpoint_every_steps();
  tc.checkpoint_seconds = t.checkpoint_every_seconds();
  tc.recompute_activations = t.recompute_activations();
  switch (t.precision()) {
    case parity::v1::PRECISION_UNSPECIFIED:
      c.precision = Precision::kUnspecified;
      break;
    case parity::v1::PRECISION_FP32:
      c.precision = Precision::kFp32;
      break;
    case parity::v1::PRECISION_BF16:
      c.precision = Precision::kBf16;
      break;
    default:
      return Bad("training.precision", absl::StrCat("unknown value ", t.precision()));
  }
  return absl::OkStatus();
}

// Data `d` (defaults filled) into `dc`; D̂ from the accounting, else from the reuse mode.
absl::Status DataFromSpec(const parity::v1::RunSpec& spec, DataConfig& dc) {
  const auto& d = spec.data();
  const auto& t = spec.training();
  // A path here: the worker writes the dataset directory or raw file it resolved the spec's
  // dataset name to (inside its --corpus-dir, worker/dataset_resolver.h); a developer running
  // parity-train by hand gives one. dataset_digest is the worker's to check, not the engine's.
  dc.corpus_path = d.corpus();
  dc.eval_sets.assign(d.eval_sets().begin(), d.eval_sets().end());
  dc.validation_fraction = d.validation_fraction();
  const int64_t consumed = static_cast<int64_t>(t.steps() * t.batch_tokens());
  if (spec.accounting().unique_tokens() > 0) {
    dc.unique_tokens = static_cast<int64_t>(spec.accounting().unique_tokens());
  } else {
    switch (d.reuse()) {
      case parity::v1::REUSE_MODE_UNIQUE:
        dc.unique_tokens = consumed;
        break;
      case parity::v1::REUSE_MODE_STRICT:
        if (d.unique_tokens() == 0) {
          return Bad("data.unique_tokens", "STRICT reuse needs D̂ resolved by the planner");
        }
        dc.unique_tokens = static_cast<int64_t>(d.unique_tokens());
        break;
      case parity::v1::REUSE_MODE_LOOSE:
        if (!(d.epochs() > 0)) return Bad("data.epochs", "LOOSE reuse needs epochs > 0");
        dc.unique_tokens = static_cast<int64_t>(std::llround(consumed / d.epochs()));
        break;
      default:
        dc.unique_tokens = d.unique_tokens();  // 0 = the whole training split
    }
  }
  // The unique windows are a seeded sample of the whole training split, not its first D̂ tokens:
  // corpora are ordered by source (the KJV by book), so a prefix trains on one part of the text
  // and validates on another (bench/engine/RESULTS.md, "Training-curve parity").
  dc.subset = SubsetMode::kSeeded;
  return absl::OkStatus();
}

// `given` with every unset field that has a default filled by core, as the planner fills it.
parity::v1::RunSpec WithDefaults(const parity::v1::RunSpec& given) {
  parity::v1::RunSpec spec = given;
  core::FillModelDefaults(*spec.mutable_model());
  core::FillTrainingDefaults(*spec.mutable_training());
  core::FillDataDefaults(*spec.mutable_data());
  return spec;
}

}  // namespace

absl::StatusOr<ParsedRunSpec> RunConfigFromRunSpec(const parity::v1::RunSpec& given) {
  // Every default is core's (core/run_spec_defaults.h), the code the planner fills a planned spec
  // with, so a hand-written spec trains as the planner would have written it out; none is
  // restated here.
  const parity::v1::RunSpec spec = WithDefaults(given);
  ParsedRunSpec out;
  RunConfig& c = out.config;
  c.run_id = spec.name();
  PARITY_RETURN_IF_ERROR(ModelFromSpec(spec.model(), c.model));
  PARITY_RETURN_IF_ERROR(TrainingFromSpec(spec.training(), c));
  PARITY_RETURN_IF_ERROR(DataFromSpec(spec, c.data));
  const auto& t = spec.training();
  out.threads = static_cast<int>(t.threads() != 0 ? t.threads() : spec.resources().cpu_threads());
  out.gpus = static_cast<int>(spec.resources().gpus());
  PARITY_RETURN_IF_ERROR(ValidateRunConfig(c));
  return out;
}

absl::StatusOr<ParsedRunSpec> RunConfigFromRunSpecJson(const std::string& json) {
  parity::v1::RunSpec spec;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  const auto status = google::protobuf::util::JsonStringToMessage(json, &spec, options);
  if (!status.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("run spec JSON: ", std::string(status.message())));
  }
  return RunConfigFromRunSpec(spec);
}

}  // namespace parity::kernels
