// The printed defaults, each written from the constant that run_spec_defaults.cc fills in (or, for
// an enum, from the value it sets), so the reference shows what a plan and the engine do.
#include "core/spec_defaults.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/spec_names.h"
#include "core/symbols.h"
#include "parity/v1/sweep.pb.h"

namespace parity::core {
namespace {

std::string Num(double value) { return absl::StrFormat("%g", value); }

template <typename Enum>
std::string Yaml(const google::protobuf::EnumDescriptor* type, Enum value) {
  return EnumYamlName(*type, static_cast<int>(value));
}

std::vector<SpecDefault> MakeDefaults() {
  namespace v1 = parity::v1;
  std::vector<SpecDefault> out = {
      {"parity.v1.ModelSpec.param_tolerance", Num(kDefaultParamTolerance)},
      {"parity.v1.ModelSpec.vocab_size", absl::StrCat(kDefaultVocabSize)},
      {"parity.v1.ModelSpec.rope_theta", Num(kDefaultRopeTheta)},
      {"parity.v1.ModelSpec.init_std", Num(kDefaultInitStd)},
      {"parity.v1.ModelSpec.norm_eps", Num(kDefaultNormEps)},
      {"parity.v1.ModelSpec.num_kv_heads", "num_heads"},
      {"parity.v1.ModelSpec.position_encoding",
       Yaml(v1::PositionEncoding_descriptor(), v1::POSITION_ENCODING_ROTARY)},
      {"parity.v1.ModelSpec.attention", "from num_kv_heads"},
      {"parity.v1.MoeSpec.granularity",
       absl::StrCat("closest to ", Num(kDefaultGranularity), " among equally good shapes")},
      {"parity.v1.MoePoint.granularity",
       absl::StrCat("closest to ", Num(kDefaultGranularity), " among equally good shapes")},
      {"parity.v1.RouterSpec.balance",
       Yaml(v1::BalanceMethod_descriptor(), v1::BALANCE_METHOD_AUX_LOSS)},
      {"parity.v1.RouterSpec.aux_loss_coef",
       absl::StrCat(Num(kDefaultAuxLossCoef), " with aux_loss balancing, else 0")},
      {"parity.v1.RouterSpec.z_loss_coef",
       absl::StrCat(Num(kDefaultZLossCoef), ", 0 with balance none")},
      {"parity.v1.RouterSpec.bias_update_rate",
       absl::StrCat(Num(kDefaultBiasUpdateRate), " (read by loss_free only)")},
      {"parity.v1.TrainingSpec.rule",
       Yaml(v1::HyperparameterRule_descriptor(), v1::HYPERPARAMETER_RULE_EXPLICIT)},
      {"parity.v1.TrainingSpec.schedule",
       Yaml(v1::LrSchedule_descriptor(), v1::LR_SCHEDULE_COSINE)},
      {"parity.v1.TrainingSpec.warmup_steps",
       absl::StrFormat("clip(round(%g%% of steps), %d, %d), at most %g%% of steps",
                       kWarmupFraction * 100, kWarmupMinSteps, kWarmupMaxSteps,
                       kWarmupCapFraction * 100)},
      {"parity.v1.TrainingSpec.decay_fraction", Num(kDefaultDecayFraction)},
      {"parity.v1.TrainingSpec.min_lr_ratio", Num(kDefaultMinLrRatio)},
      {"parity.v1.TrainingSpec.adam_beta1", Num(kDefaultAdamBeta1)},
      {"parity.v1.TrainingSpec.adam_beta2", Num(kDefaultAdamBeta2)},
      {"parity.v1.TrainingSpec.adam_epsilon", Num(kDefaultAdamEpsilon)},
      {"parity.v1.TrainingSpec.weight_decay", Num(kDefaultWeightDecay)},
      {"parity.v1.TrainingSpec.grad_clip", Num(kDefaultGradClip)},
      {"parity.v1.TrainingSpec.steps", "round(D / batch_tokens), set by the planner"},
      {"parity.v1.TrainingSpec.log_every_steps", absl::StrCat(kDefaultLogEverySteps)},
      {"parity.v1.TrainingSpec.eval_every_steps", absl::StrCat(kDefaultEvalEverySteps)},
      {"parity.v1.TrainingSpec.eval_tokens", absl::StrCat(kDefaultEvalTokens)},
      {"parity.v1.TrainingSpec.checkpoint_every_steps",
       absl::StrCat("1/", kDefaultCheckpointsPerRun, " of steps")},
      {"parity.v1.TrainingSpec.checkpoint_every_seconds",
       absl::StrCat(kDefaultCheckpointEverySeconds)},
      {"parity.v1.DataSpec.validation_fraction", Num(kDefaultValidationFraction)},
      {"parity.v1.DataSpec.reuse", Yaml(v1::ReuseMode_descriptor(), v1::REUSE_MODE_UNIQUE)},
      {"parity.v1.DataVariant.reuse", "SweepSpec.data's"},
      {"parity.v1.SweepSpec.max_attempts", absl::StrCat(kDefaultMaxAttempts)},
      {"parity.v1.ResourceRequest.ranks", "gpus when gpus > 1 (one rank per GPU), else 1"},
      // As the engine resolves it (kernels/train/session.cc) and the planner sizes it
      // (gpu_sizing.cc PrecisionOf).
      {"parity.v1.TrainingSpec.precision", "bf16 when gpus > 0, else fp32"},
  };
  return out;
}

}  // namespace

std::span<const SpecDefault> SpecDefaults() {
  static const std::vector<SpecDefault>* const defaults =
      new std::vector<SpecDefault>(MakeDefaults());
  return *defaults;
}

std::string SpecDefaultOf(std::string_view full_name) {
  for (const SpecDefault& d : SpecDefaults()) {
    if (d.field == full_name) return d.text;
  }
  return {};
}

}  // namespace parity::core
