// The transformer's per-layer parameter offsets and saved activations, and its whole-model arrays
// (internal to model/: shared by transformer.cc, which runs them, and transformer_memory.cc,
// which allocates them). Each array is in the precision core/memory_estimate.h counts it in:
// T (master: fp32, or fp64 in gradient checks) or A (activations: T, or bf16 in the bf16 mode).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/model/transformer.h"

namespace parity::kernels {

template <typename T, typename A>
struct Transformer<T, A>::Layer {
  bool moe = false;
  // Parameter offsets into the flat buffer (−1: absent in this layer).
  int64_t attn_norm = -1, w_qkv = -1, w_o = -1, ffn_norm = -1;
  int64_t w13 = -1, w2 = -1;                                          // dense SwiGLU
  int64_t router = -1, e_w13 = -1, e_w2 = -1, s_w13 = -1, s_w2 = -1;  // MoE
  // Saved activations.
  T* x_in = nullptr;     // [T,D] residual stream entering the layer
  A* h1 = nullptr;       // [T,D] attention RMSNorm output
  T* rstd1 = nullptr;    // [T]
  A* qkv = nullptr;      // [T,(H+2Hkv)·Dh] after rotary
  T* att_lse = nullptr;  // [B,H,S] attention log-sum-exp per query row
  A* att = nullptr;      // [T,H·Dh]
  T* x_mid = nullptr;    // [T,D] residual after attention
  A* h2 = nullptr;       // [T,D] FFN RMSNorm output
  T* rstd2 = nullptr;    // [T]
  T* x_out = nullptr;    // [T,D] residual leaving the layer (= next layer's x_in)
  A* ab = nullptr;       // [T,2F] dense (or [T,2Dse] shared expert) SwiGLU input
  A* g = nullptr;        // [T,F]  (or [T,Dse])
  // MoE activations.
  T* rlogits = nullptr;             // [T,E]
  T* rprobs = nullptr;              // [T,E]
  T* rlse = nullptr;                // [T] router log-sum-exp
  T* gate = nullptr;                // [T,K]
  A* xs = nullptr;                  // [P,D] tokens grouped by expert
  A* ab_e = nullptr;                // [P,2De]
  A* g_e = nullptr;                 // [P,De]
  A* ys = nullptr;                  // [P,D]
  int32_t* expert = nullptr;        // [T,K]
  int32_t* slot_of = nullptr;       // [T,K]
  int32_t* token_of = nullptr;      // [P]
  int64_t* load = nullptr;          // [E]
  int64_t* plan_offsets = nullptr;  // [E+1] the routing plan's group boundaries
  float* bias = nullptr;            // [E] loss-free balancing biases (selection only)
  double* losses = nullptr;         // [2] {aux, z}: a slice of Globals::route_losses
  std::vector<int64_t> offsets;     // [E+1] host copy of plan_offsets, for the GEMM shapes
  RoutingStats stats;
};

template <typename T, typename A>
struct Transformer<T, A>::Globals {
  int64_t wte = -1, final_norm = -1, head = -1;
  int32_t* tokens = nullptr;       // [T]
  int32_t* targets = nullptr;      // [T]
  T* resid = nullptr;              // [L+1,T,D] residual stream at each layer boundary
  A* hf = nullptr;                 // [T,D] final RMSNorm output
  T* rstdf = nullptr;              // [T]
  T* logits = nullptr;             // [T,V]
  T* loss = nullptr;               // [T]
  double* route_losses = nullptr;  // [2·MoE layers] {aux, z} of each MoE layer
  // Backward scratch, reused by every layer: the residual's gradient and the router's are T, the
  // gradients of activations A.
  T* dresid = nullptr;
  A *dh = nullptr, *dhf = nullptr, *dqkv = nullptr, *datt = nullptr, *dab = nullptr, *dg = nullptr;
  T* dlogits = nullptr;
  T *drlogits = nullptr, *dgate = nullptr;
  A *dys = nullptr, *dg_e = nullptr, *dab_e = nullptr, *dxs = nullptr;
  std::vector<T> host_loss;               // ForwardAndWait's losses [T]
  std::vector<double> host_route_losses;  // and {aux, z} [2·MoE layers]
};

}  // namespace parity::kernels
