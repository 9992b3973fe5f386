// Exact N/C/D accounting of a resolved model (DESIGN.md §1, symbols in core/symbols.h).
// Parameters: attention 2·D_m·(H·D_h) + 2·D_m·(H_kv·D_h) per layer; dense SwiGLU 3·D_m·D_ffn;
// MoE layer router D_m·E + routed 3·D_m·D_e·E + shared 3·D_m·D_se, of which the router, K routed
// experts and the shared expert are activated. FLOPs: M_fwd = 2·N_a + 4·D_m·S·L, M = 3·M_fwd.
// Token fields (D, D̂, epochs, C) are filled by the planner through SetTokens.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "parity/v1/accounting.pb.h"
#include "parity/v1/model.pb.h"

namespace parity::core {

// The integers that determine a model's counts; a plain struct so the shape solver can score
// thousands of candidates without building protos.
struct Shape {
  uint32_t d_model = 0;               // D_m
  uint32_t num_heads = 0;             // H
  uint32_t num_kv_heads = 0;          // H_kv
  uint32_t head_dim = 0;              // D_h
  uint32_t ffn_hidden = 0;            // D_ffn of the dense layers (unused when L_d = 0)
  uint32_t dense_layers = 0;          // L_d
  uint32_t moe_layers = 0;            // L_e
  uint32_t num_experts = 0;           // E
  uint32_t top_k = 0;                 // K
  uint32_t expert_hidden = 0;         // D_e
  uint32_t shared_expert_hidden = 0;  // D_se
};

// Parameter counts of a Shape (parameters). params and active_params include the router.
struct ParamCounts {
  uint64_t attention = 0;
  uint64_t ffn = 0;  // dense FFNs, routed and shared experts
  uint64_t router = 0;
  uint64_t params = 0;         // N
  uint64_t active_params = 0;  // N_a
};

ParamCounts CountParams(const Shape& shape);

// M_fwd = 2·N_a + 4·D_m·S·L (FLOPs/token).
double ForwardFlopsPerToken(const Shape& shape, uint64_t active_params, uint32_t sequence_length);

// L_e for a layout: 1dense+SE → L−1, all-moe → L, interleaved every k → floor(L/k); dense → 0.
uint32_t MoeLayerCount(const parity::v1::ModelSpec& model);

// Whether 0-based layer `index` of `model` is an MoE layer (the engine builds its stack with this).
bool IsMoeLayer(const parity::v1::ModelSpec& model, uint32_t index);

// The Shape of a resolved ModelSpec; InvalidArgument when an integer the counts need is unset or
// inconsistent (D_m ≠ H·D_h, K > E, ...).
absl::StatusOr<Shape> ShapeOf(const parity::v1::ModelSpec& resolved_model);

// N, N_a, r_a, M_fwd, M, G, μ, β, α, ζ, γ, A and the per-part counts of a resolved model.
// Token fields stay 0 until SetTokens.
absl::StatusOr<parity::v1::Accounting> ComputeAccounting(
    const parity::v1::ModelSpec& resolved_model, uint32_t sequence_length);

// Sets D, D̂, epochs = D/D̂ and C = M·D.
void SetTokens(uint64_t tokens, uint64_t unique_tokens, parity::v1::Accounting& accounting);

}  // namespace parity::core
