// Solving integer model shapes: the MoE backbone's fixed part, one MoE grid point's (E, K, D_e),
// and the dense model. Each solver hits its target N within the tolerance or fails with a reason;
// it never returns a different model silently. Achieved values are in the returned ModelSpec
// (and in the Accounting the planner computes from it).
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "parity/v1/model.pb.h"
#include "parity/v1/sweep.pb.h"

namespace parity::core {

// The backbone with heads, key/value heads, D_ffn, defaults (RoPE θ, init, norm ε, vocabulary,
// router coefficients) and architecture set; E, K, D_e left for SolveMoePoint.
absl::StatusOr<parity::v1::ModelSpec> ResolveBackbone(const parity::v1::ModelSpec& spec);

// Target N of a resolved backbone: target_params if set, else the N of its μ
// (attention + dense FFNs + L_e·3·D_m·μ·D_m; the router, D_m·E per layer, is left out because
// E is not yet known). 0 when neither is set.
uint64_t BackboneTargetParams(const parity::v1::ModelSpec& backbone);

// The relative tolerance on N of a model spec (param_tolerance, default 2%).
double ParamTolerance(const parity::v1::ModelSpec& spec);

// Solves E, K, D_e (D_e a multiple of 32, K ≤ E) for `point` on `backbone` so that N is within
// the tolerance of `target_params` (when > 0) and r_a is as close to the point's target as the
// integers allow; ties prefer the point's (or the backbone's, or the default) granularity. A
// point that pins top_k beside a target r_a keeps K and solves E and D_e (the backbone's
// granularity is then a preference, not a constraint).
// InvalidArgument with a human reason when nothing fits.
absl::StatusOr<parity::v1::ModelSpec> SolveMoePoint(const parity::v1::ModelSpec& backbone,
                                                    const parity::v1::MoePoint& point,
                                                    uint64_t target_params);

// Resolves the dense model: an explicit D_m and L, or the shape whose N is within the tolerance
// of `target_params` with ζ = D_m/L closest to the spec's aspect_ratio. `backbone` (may be null)
// supplies head_dim, α and ζ when the dense spec leaves them unset.
absl::StatusOr<parity::v1::ModelSpec> SolveDense(const parity::v1::ModelSpec& spec,
                                                 const parity::v1::ModelSpec* backbone,
                                                 uint64_t target_params);

}  // namespace parity::core
