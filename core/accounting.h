// Exact N/C/D accounting of a resolved ModelSpec (docs/domain.md, symbols in core/symbols.h). The
// counting rules themselves (layer placement, N, N_a, M_fwd) are model_counts.h's, shared with the
// engine; this file turns a ModelSpec into their inputs and their results into an Accounting.
// Token fields (D, D̂, epochs, C) are filled by the planner through SetTokens.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "core/model_counts.h"
#include "parity/v1/accounting.pb.h"
#include "parity/v1/model.pb.h"

namespace parity::core {

// The model's layout, L and interleave period as the counting rules of model_counts.h take them.
LayerPlacement PlacementOf(const parity::v1::ModelSpec& model);

// L_e for a layout: 1dense+SE → L−1, all-moe → L, interleaved every k → floor(L/k); dense → 0.
uint32_t MoeLayerCount(const parity::v1::ModelSpec& model);

// Whether 0-based layer `index` of `model` is an MoE layer (the engine builds its stack with this).
bool IsMoeLayer(const parity::v1::ModelSpec& model, uint32_t index);

// The Shape of a resolved ModelSpec; InvalidArgument when an integer the counts need is unset or
// inconsistent (D_m ≠ H·D_h, K > E, ...). An unset D_se takes DefaultSharedExpertHidden.
absl::StatusOr<Shape> ShapeOf(const parity::v1::ModelSpec& resolved_model);

// N, N_a, r_a, M_fwd, M, G, μ, β, α, ζ, γ, A and the per-part counts of a resolved model.
// Token fields stay 0 until SetTokens.
absl::StatusOr<parity::v1::Accounting> ComputeAccounting(
    const parity::v1::ModelSpec& resolved_model, uint32_t sequence_length);

// Sets D, D̂, epochs = D/D̂ and C = M·D.
void SetTokens(uint64_t tokens, uint64_t unique_tokens, parity::v1::Accounting& accounting);

}  // namespace parity::core
