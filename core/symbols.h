// The paper symbols of docs/domain.md, named once. Every formula in core/ uses these names so a
// reader can check the code against the paper line by line. Counts exclude norm weights; the
// vocabulary parameters (embedding, output head) are kept out of N, N_a and M.
//
//   D_m        model width (d_model)
//   L          layers, L = L_d + L_e (dense-FFN layers + MoE layers)
//   H, H_kv    attention heads and key/value heads; D_h head dim, D_m = H·D_h
//   S          training sequence length
//   D_ffn      dense SwiGLU hidden size; α = D_ffn/D_m
//   E, K       routed experts per MoE layer; experts chosen per token
//   D_e, D_se  hidden size of one routed expert; of the shared expert (0 = none)
//   μ          (D_se + E·D_e)/D_m, total FFN-to-width ratio of an MoE layer
//   β          (D_se + K·D_e)/D_m, activated FFN-to-width ratio of an MoE layer
//   ζ, γ       D_m/L (aspect ratio); S/D_m (sequence-to-width ratio)
//   G          2·D_m/D_e, expert granularity
//   N, N_a     non-embedding parameters; activated parameters; r_a = N_a/N
//   M_fwd, M   forward FLOPs per token 2·N_a + 4·D_m·S·L; training FLOPs per token 3·M_fwd
//   C, D, D̂    training compute C = M·D; tokens consumed; unique tokens (epochs = D/D̂)
//   A          activated/total experts, shared expert counted in units of D_e (EL law input)
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/spec_defaults.h"  // the spec defaults (kDefault...) live there

namespace parity::core {

// D_e is planned as a multiple of this (units): matmul tiles and the paper's shapes use it.
inline constexpr uint32_t kExpertHiddenMultiple = 32;
// D_ffn is rounded to a multiple of this (units) when derived from α.
inline constexpr uint32_t kFfnHiddenMultiple = 32;
// A planned r_a further than this (relative) from its target is a violation, not a silent miss.
inline constexpr double kActivationRateTolerance = 0.10;
// r_a errors within this (relative) of the best one count as equally good; G breaks the tie.
inline constexpr double kActivationRateSlack = 0.01;
// A sweep may not expand to more runs than this (protects the scheduler and its database).
inline constexpr int kMaxRunsPerSweep = 10000;
// Each MoE point is a shape search (~0.1–5 ms); this bounds the planning time of one request.
inline constexpr int kMaxMoePoints = 1000;
// Sizes of what a spec carries into the database and onto every run (core/validation.cc): any
// text field, the description, the labels (count, value size), attempts and |priority|.
inline constexpr size_t kMaxSpecTextBytes = 1024;
inline constexpr size_t kMaxDescriptionBytes = 4096;
inline constexpr int kMaxLabels = 32;
inline constexpr size_t kMaxLabelValueBytes = 256;
inline constexpr uint32_t kMaxAttempts = 100;
inline constexpr int32_t kMaxPriorityMagnitude = 1000000;

// Step Law (Li et al. 2025): η = 1.79·N^-0.713·D^0.307, B = 0.58·D^0.571 tokens.
inline constexpr double kStepLawLrCoef = 1.79;
inline constexpr double kStepLawLrParamsExp = -0.713;
inline constexpr double kStepLawLrTokensExp = 0.307;
inline constexpr double kStepLawBatchCoef = 0.58;
inline constexpr double kStepLawBatchTokensExp = 0.571;

// Warmup when none is given: clip(1% of steps, 200, 2000), never more than 10% of the steps so a
// few-hundred-step micro run still spends most of its steps at its learning rate.
inline constexpr double kWarmupFraction = 0.01;
inline constexpr uint64_t kWarmupMinSteps = 200;
inline constexpr uint64_t kWarmupMaxSteps = 2000;
inline constexpr double kWarmupCapFraction = 0.10;

}  // namespace parity::core
