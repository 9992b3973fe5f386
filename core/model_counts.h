// The counting rules of docs/domain.md (symbols in core/symbols.h) on plain integers: where MoE
// layers sit, the shared expert's default width, exact N and N_a, and M_fwd. This is the one copy
// of those rules: the planner (core/accounting.h, from a ModelSpec) and the engine
// (kernels/model/config.h, from its ModelConfig) both call it, so a planned run and the model the
// engine builds agree to the parameter. Library parity_accounting: no protobuf, no Abseil.
#pragma once

#include <cstdint>

namespace parity::core {

// Where a model's MoE layers sit (the proto's MoeLayout, or the engine's, without either type).
enum class MoeLayout { kDense, kOneDenseShared, kAllMoe, kInterleaved };

struct LayerPlacement {
  MoeLayout layout = MoeLayout::kDense;
  uint32_t num_layers = 0;        // L
  uint32_t interleave_every = 0;  // kInterleaved: layers k, 2k, ... (1-based) are MoE; 0 = none
};

// Whether 0-based layer `index` is an MoE layer: 1dense+SE → all but the first; all-moe → all;
// interleaved every k → layers k, 2k, ... counted from 1; dense (or k = 0) → none.
bool IsMoeLayer(const LayerPlacement& placement, uint32_t index);

// L_e, the number of indices in [0, L) for which IsMoeLayer holds.
uint32_t MoeLayerCount(const LayerPlacement& placement);

// D_se when a model leaves it unset: K·D_e for 1dense+SE, none otherwise.
uint32_t DefaultSharedExpertHidden(MoeLayout layout, uint32_t top_k, uint32_t expert_hidden);

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

// Attention 2·D_m·(H·D_h) + 2·D_m·(H_kv·D_h) per layer; dense SwiGLU 3·D_m·D_ffn; MoE layer router
// D_m·E + routed 3·D_m·D_e·E + shared 3·D_m·D_se, of which the router, K routed experts and the
// shared expert are activated. Norm weights and the vocabulary are excluded.
ParamCounts CountParams(const Shape& shape);

// M_fwd = 2·N_a + 4·D_m·S·L (FLOPs/token); the training FLOPs per token M are 3·M_fwd.
double ForwardFlopsPerToken(const Shape& shape, uint64_t active_params, uint32_t sequence_length);

}  // namespace parity::core
