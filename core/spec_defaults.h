// Every default a sweep spec field has, in one place: run_spec_defaults.h fills them in from these
// constants, for the planner (a planned RunSpec names every value) and for the engine's adapter
// (kernels/spec/, on any spec it reads, planned or not), and `parity spec reference` prints them
// from SpecDefaults() (docs/spec-reference.md), so none of the three can disagree. A field not
// listed has no default beyond "unset": 0 or empty means "solved by the planner" or "none", as its
// proto comment says.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace parity::core {

// ModelSpec: relative tolerance on N when param_tolerance is 0.
inline constexpr double kDefaultParamTolerance = 0.02;
// ModelSpec: the byte-level vocabulary when vocab_size is 0 (tokens).
inline constexpr uint32_t kDefaultVocabSize = 256;
// The planner's preferred G when a point names none: among shapes that reach the target r_a
// equally well, the one closest to this granularity wins (fine-grained experts, as in the paper).
inline constexpr double kDefaultGranularity = 8.0;
inline constexpr double kDefaultRopeTheta = 10000.0;
inline constexpr double kDefaultInitStd = 0.02;
inline constexpr double kDefaultNormEps = 1e-5;

// RouterSpec: λ with aux_loss balancing (0 otherwise), λ_z unless balance none, u for loss_free.
inline constexpr double kDefaultAuxLossCoef = 0.01;
inline constexpr double kDefaultZLossCoef = 0.001;
inline constexpr double kDefaultBiasUpdateRate = 0.001;

// TrainingSpec.
inline constexpr double kDefaultDecayFraction = 0.2;  // read by WSD only
inline constexpr double kDefaultMinLrRatio = 0.1;
inline constexpr double kDefaultAdamBeta1 = 0.9;
inline constexpr double kDefaultAdamBeta2 = 0.95;
inline constexpr double kDefaultAdamEpsilon = 1e-8;
inline constexpr double kDefaultWeightDecay = 0.1;
inline constexpr double kDefaultGradClip = 1.0;
inline constexpr uint32_t kDefaultLogEverySteps = 10;
inline constexpr uint32_t kDefaultEvalEverySteps = 100;
inline constexpr uint64_t kDefaultEvalTokens = 65536;
// A killed run loses at most one interval: a twentieth of the run by steps, 10 minutes by time.
inline constexpr uint64_t kDefaultCheckpointsPerRun = 20;
inline constexpr uint32_t kDefaultCheckpointEverySeconds = 600;

// DataSpec.
inline constexpr double kDefaultValidationFraction = 0.01;

// SweepSpec: attempts before a run is FAILED when max_attempts is 0 (the store applies it).
inline constexpr uint32_t kDefaultMaxAttempts = 3;

// One field's default as the reference prints it.
struct SpecDefault {
  std::string_view field;  // full proto name, e.g. "parity.v1.TrainingSpec.adam_beta1"
  std::string text;        // e.g. "0.9", "cosine", "5% of steps"
};

// Every listed default, in no particular order.
std::span<const SpecDefault> SpecDefaults();

// The default of the field with this full proto name; empty when it has none.
std::string SpecDefaultOf(std::string_view full_name);

}  // namespace parity::core
