// The engine's buffers, in the order kernels/model/transformer.cc allocates them. Each buffer holds
// at least one element (the engine's `alloc` does the same), which keeps FP32 exact for tiny
// models too.
#include "core/memory_estimate.h"

#include <algorithm>
#include <cstdio>

namespace parity::core {
namespace {

constexpr uint64_t kF32 = 4, kBf16 = 2, kI32 = 4, kI64 = 8;

// Sums buffers of n elements of a given width.
struct Tally {
  uint64_t bytes = 0;
  void Add(int64_t n, uint64_t width) {
    bytes += static_cast<uint64_t>(std::max<int64_t>(n, 1)) * width;
  }
};

int64_t CountParams(const MemoryShape& m) {
  const int64_t D = m.d_model, V = m.vocab;
  const int64_t qkv = (m.n_heads + 2 * m.n_kv_heads) * m.head_dim;
  int64_t n = V * D;  // embedding
  for (const bool moe : m.moe_layer) {
    n += 2 * D + qkv * D + m.n_heads * m.head_dim * D;  // norms, w_qkv, w_o
    if (!moe) {
      n += 3 * m.d_ffn * D;
    } else {
      n += m.n_experts * D + 3 * m.n_experts * m.d_expert * D + 3 * m.d_shared * D;
    }
  }
  n += D;  // final norm
  if (!m.tied_head) n += V * D;
  return n;
}

}  // namespace

MemoryEstimate EstimateTrainingMemory(const MemoryShape& m, int64_t micro_batch_sequences,
                                      MemoryPrecision precision) {
  const bool bf16 = precision == MemoryPrecision::kBf16;
  // Width of a tensor that BF16 keeps in bf16; fp32-only tensors use kF32 directly.
  const uint64_t low = bf16 ? kBf16 : kF32;
  const int64_t B = micro_batch_sequences, S = m.seq_len, T = B * S, D = m.d_model;
  const int64_t L = m.n_layers(), H = m.n_heads, V = m.vocab;
  const int64_t qkv = (m.n_heads + 2 * m.n_kv_heads) * m.head_dim;
  const int64_t att = m.n_heads * m.head_dim;

  MemoryEstimate e;
  e.params = CountParams(m);
  const uint64_t n = static_cast<uint64_t>(std::max<int64_t>(e.params, 1));
  e.weights = n * kF32;
  e.weight_copies = bf16 ? n * kBf16 : 0;
  e.gradients = n * kF32;
  int64_t moe_layers = 0;
  for (const bool moe : m.moe_layer) moe_layers += moe ? 1 : 0;
  // AdamW m and v, and the step's expert loads [MoE layers·E] the trainer sums for loss-free
  // balancing (kernels/train/session.cc; one element for a dense model).
  e.optimizer =
      2 * n * kF32 + static_cast<uint64_t>(std::max<int64_t>(moe_layers * m.n_experts, 1)) * kI64;

  Tally act;
  act.Add(T, kI32);                // tokens
  act.Add(T, kI32);                // targets
  act.Add((L + 1) * T * D, kF32);  // residual stream at each layer boundary
  int64_t max_ffn = 0, max_e = 1, max_p = 1, max_de = 1;
  bool any_moe = false;
  bool kind_counted[2] = {false, false};  // [dense, MoE], under recompute
  for (const bool moe : m.moe_layer) {
    if (m.recompute && kind_counted[moe ? 1 : 0]) {
      if (moe) act.Add(m.n_experts, kF32);  // its own loss-free balancing biases
      continue;
    }
    kind_counted[moe ? 1 : 0] = true;
    act.Add(T * D, low);       // h1
    act.Add(T, kF32);          // rstd1
    act.Add(T * qkv, low);     // qkv
    act.Add(B * H * S, kF32);  // attention log-sum-exp
    act.Add(T * att, low);     // att
    act.Add(T * D, kF32);      // x_mid (residual)
    act.Add(T * D, low);       // h2
    act.Add(T, kF32);          // rstd2
    const int64_t f = moe ? m.d_shared : m.d_ffn;
    if (f > 0) {
      act.Add(T * 2 * f, low);  // ab
      act.Add(T * f, low);      // g
      max_ffn = std::max(max_ffn, f);
    }
    if (moe) {
      any_moe = true;
      const int64_t E = m.n_experts, K = m.top_k, P = T * K, De = m.d_expert;
      act.Add(T * E, kF32);      // rlogits
      act.Add(T * E, kF32);      // rprobs
      act.Add(T, kF32);          // router lse
      act.Add(T * K, kF32);      // gate
      act.Add(P * D, low);       // xs
      act.Add(P * 2 * De, low);  // ab_e
      act.Add(P * De, low);      // g_e
      act.Add(P * D, low);       // ys
      act.Add(T * K, kI32);      // expert
      act.Add(T * K, kI32);      // slot_of
      act.Add(P, kI32);          // token_of
      act.Add(E, kI64);          // load
      act.Add(E + 1, kI64);      // the routing plan's offsets
      act.Add(E, kF32);          // loss-free balancing biases
      max_e = std::max(max_e, E), max_p = std::max(max_p, P), max_de = std::max(max_de, De);
    }
  }
  act.Add(T * D, low);         // hf
  act.Add(T, kF32);            // rstdf
  act.Add(T * V, kF32);        // logits
  act.Add(T, kF32);            // loss
  act.Add(2 * moe_layers, 8);  // each router's {aux, z} losses (doubles)
  e.activations = act.bytes;

  Tally scratch;
  scratch.Add(T * D, kF32);                                 // dresid
  scratch.Add(T * D, low);                                  // dh
  scratch.Add(T * D, low);                                  // dhf
  scratch.Add(T * qkv, low);                                // dqkv
  scratch.Add(T * att, low);                                // datt
  scratch.Add(T * 2 * std::max<int64_t>(max_ffn, 1), low);  // dab
  scratch.Add(T * std::max<int64_t>(max_ffn, 1), low);      // dg
  scratch.Add(T * V, kF32);                                 // dlogits
  if (any_moe) {
    scratch.Add(T * max_e, kF32);          // drlogits
    scratch.Add(T * m.top_k, kF32);        // dgate
    scratch.Add(max_p * D, low);           // dys
    scratch.Add(max_p * max_de, low);      // dg_e
    scratch.Add(max_p * 2 * max_de, low);  // dab_e
    scratch.Add(max_p * D, low);           // dxs
  }
  e.scratch = scratch.bytes;
  e.total = e.weights + e.weight_copies + e.gradients + e.optimizer + e.activations + e.scratch +
            e.workspace;
  return e;
}

std::string HumanBytes(uint64_t bytes) {
  static const char* const kUnits[] = {"B", "kB", "MB", "GB", "TB", "PB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 999.5 && unit < 5) {
    value /= 1000;
    ++unit;
  }
  char text[32];
  if (unit == 0) {
    std::snprintf(text, sizeof(text), "%llu B", static_cast<unsigned long long>(bytes));
  } else {
    std::snprintf(text, sizeof(text), "%.3g %s", value, kUnits[unit]);
  }
  return text;
}

std::string MemoryEstimate::Describe() const {
  std::string out = "weights " + HumanBytes(weights);
  if (weight_copies > 0) out += ", bf16 weight copies " + HumanBytes(weight_copies);
  out += ", gradients " + HumanBytes(gradients) + ", AdamW moments " + HumanBytes(optimizer) +
         ", activations " + HumanBytes(activations) + ", backward scratch " + HumanBytes(scratch) +
         ", workspace " + HumanBytes(workspace);
  return out;
}

}  // namespace parity::core
