// The published joint law for efficiency leverage (Tian et al. 2025, "Towards Greater Leverage:
// Scaling Laws for Efficient Mixture-of-Experts Language Models"), used as a prior beside each
// planned MoE run — a prediction to compare measurements against, not a truth:
//   EL(A, G, C) = Â^(α + γ·(log₂G)² + β·log₂G),  α = a + d·log₁₀C,
//   1/Â = 1/(A + (1/A_start − 1/A_max)^-1) + 1/A_max.
// A = activated/total experts (shared expert included), G = 2·D_m/D_e, C = training FLOPs.
#pragma once

namespace parity::core {

// The fitted constants of the law.
struct ElLawParams {
  double a = 1.23;
  double d = -0.0761;
  double gamma = 0.0167;
  double beta = -0.117;
  double a_start = 0.0163;
  double a_max = 5.28e16;
};

// Â, the saturating transform of the activation ratio A.
double SaturatedActivationRatio(double a, const ElLawParams& p = {});

// Predicted EL for activation ratio A in (0, 1], granularity G > 0 and compute C > 0 (FLOPs).
// Returns 0 for out-of-domain inputs (so dense rows and unset values show as "no prediction").
double PredictedEfficiencyLeverage(double activation_ratio, double granularity, double compute,
                                   const ElLawParams& p = {});

}  // namespace parity::core
