// Forward and backward of the transformer, op by op. Read Forward top to bottom, then Backward
// bottom to top: every forward call has its paired backward call in mirrored order.
#include "kernels/model/transformer.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "kernels/model/moe_experts.h"

namespace parity::kernels {

template <typename T>
struct Transformer<T>::Layer {
  bool moe = false;
  // Parameter offsets into the flat buffer (−1: absent in this layer).
  int64_t attn_norm = -1, w_qkv = -1, w_o = -1, ffn_norm = -1;
  int64_t w13 = -1, w2 = -1;                                          // dense SwiGLU
  int64_t router = -1, e_w13 = -1, e_w2 = -1, s_w13 = -1, s_w2 = -1;  // MoE
  // Saved activations.
  T* x_in = nullptr;     // [T,D] residual stream entering the layer
  T* h1 = nullptr;       // [T,D] attention RMSNorm output
  T* rstd1 = nullptr;    // [T]
  T* qkv = nullptr;      // [T,(H+2Hkv)·Dh] after rotary
  T* att_lse = nullptr;  // [B,H,S] attention log-sum-exp per query row
  T* att = nullptr;      // [T,H·Dh]
  T* x_mid = nullptr;    // [T,D] residual after attention
  T* h2 = nullptr;       // [T,D] FFN RMSNorm output
  T* rstd2 = nullptr;    // [T]
  T* x_out = nullptr;    // [T,D] residual leaving the layer (= next layer's x_in)
  T* ab = nullptr;       // [T,2F] dense (or [T,2Dse] shared expert) SwiGLU input
  T* g = nullptr;        // [T,F]  (or [T,Dse])
  // MoE activations.
  T* rlogits = nullptr;             // [T,E]
  T* rprobs = nullptr;              // [T,E]
  T* rlse = nullptr;                // [T] router log-sum-exp
  T* gate = nullptr;                // [T,K]
  T* xs = nullptr;                  // [P,D] tokens grouped by expert
  T* ab_e = nullptr;                // [P,2De]
  T* g_e = nullptr;                 // [P,De]
  T* ys = nullptr;                  // [P,D]
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

template <typename T>
struct Transformer<T>::Globals {
  int64_t wte = -1, final_norm = -1, head = -1;
  int32_t* tokens = nullptr;       // [T]
  int32_t* targets = nullptr;      // [T]
  T* resid = nullptr;              // [L+1,T,D] residual stream at each layer boundary
  T* hf = nullptr;                 // [T,D] final RMSNorm output
  T* rstdf = nullptr;              // [T]
  T* logits = nullptr;             // [T,V]
  T* loss = nullptr;               // [T]
  double* route_losses = nullptr;  // [2·MoE layers] {aux, z} of each MoE layer
  // Backward scratch, reused by every layer.
  T *dresid = nullptr, *dh = nullptr, *dhf = nullptr, *dqkv = nullptr, *datt = nullptr;
  T *dab = nullptr, *dg = nullptr, *dlogits = nullptr;
  T *drlogits = nullptr, *dgate = nullptr, *dys = nullptr, *dg_e = nullptr, *dab_e = nullptr,
    *dxs = nullptr;
  std::vector<T> host_loss;
  std::vector<double> host_route_losses;
};

template <typename T>
Transformer<T>::Transformer(const ModelConfig& config, Device& device, const OpTable<T>& ops,
                            int64_t max_batch)
    : config_(config),
      device_(device),
      ops_(ops),
      max_batch_(max_batch),
      g_(std::make_unique<Globals>()) {}

template <typename T>
Transformer<T>::~Transformer() = default;

template <typename T>
absl::StatusOr<std::unique_ptr<Transformer<T>>> Transformer<T>::Create(const ModelConfig& config,
                                                                       Device& device,
                                                                       int64_t max_batch) {
  const OpTable<T>* ops = OpsFor<T>(device);
  if (ops == nullptr) {
    return absl::UnimplementedError(absl::StrCat(std::string(device.Name()), ": no kernels for ",
                                                 sizeof(T) * 8, "-bit floats"));
  }
  for (int k = 0; k < static_cast<int>(OpKind::kCount); ++k) {
    if (!ops->Supports(static_cast<OpKind>(k))) {
      return absl::UnimplementedError(absl::StrCat(std::string(device.Name()), ": op ",
                                                   OpName(static_cast<OpKind>(k)), " missing"));
    }
  }
  if (max_batch <= 0) return absl::InvalidArgumentError("max_batch must be positive");
  std::unique_ptr<Transformer> model(new Transformer(config, device, *ops, max_batch));
  absl::Status status = model->Allocate();
  if (!status.ok()) return status;
  return model;
}

template <typename T>
absl::Status Transformer<T>::Allocate() {
  const ModelConfig& m = config_;
  const int64_t D = m.d_model, L = m.n_layers, Dh = m.head_dim();
  const int64_t qkv_width = (m.n_heads + 2 * m.n_kv_heads) * Dh;
  // 1. Parameter layout.
  auto add = [&](const std::string& name, int64_t size, WeightDecay decay) {
    tensors_.push_back({name, num_params_, size, decay});
    num_params_ += size;
    return tensors_.back().offset;
  };
  g_->wte = add("wte", m.vocab_size * D, WeightDecay::kApply);
  int64_t max_ffn = 0;
  for (int64_t l = 0; l < L; ++l) {
    auto layer = std::make_unique<Layer>();
    const std::string p = absl::StrCat("layer", l, ".");
    layer->moe = m.IsMoeLayer(l);
    layer->attn_norm = add(p + "attn_norm", D, WeightDecay::kSkip);
    layer->w_qkv = add(p + "w_qkv", qkv_width * D, WeightDecay::kApply);
    layer->w_o = add(p + "w_o", D * D, WeightDecay::kApply);
    layer->ffn_norm = add(p + "ffn_norm", D, WeightDecay::kSkip);
    if (!layer->moe) {
      layer->w13 = add(p + "w13", 2 * m.d_ffn * D, WeightDecay::kApply);
      layer->w2 = add(p + "w2", D * m.d_ffn, WeightDecay::kApply);
      max_ffn = std::max(max_ffn, m.d_ffn);
    } else {
      const int64_t E = m.n_experts, De = m.d_expert, Dse = m.SharedDim();
      layer->router = add(p + "router", E * D, WeightDecay::kApply);
      layer->e_w13 = add(p + "experts.w13", E * 2 * De * D, WeightDecay::kApply);
      layer->e_w2 = add(p + "experts.w2", E * D * De, WeightDecay::kApply);
      if (Dse > 0) {
        layer->s_w13 = add(p + "shared.w13", 2 * Dse * D, WeightDecay::kApply);
        layer->s_w2 = add(p + "shared.w2", D * Dse, WeightDecay::kApply);
        max_ffn = std::max(max_ffn, Dse);
      }
      layer->stats.load.assign(E, 0);
      layer->offsets.assign(E + 1, 0);
      moe_layers_.push_back(l);
    }
    layers_.push_back(std::move(layer));
  }
  g_->final_norm = add("final_norm", D, WeightDecay::kSkip);
  g_->head =
      m.head == HeadTying::kTied ? g_->wte : add("head", m.vocab_size * D, WeightDecay::kApply);

  // 2. Memory: every array is its own zeroed device buffer.
  absl::Status status;
  auto alloc = [&](auto* dummy, int64_t n) -> decltype(dummy) {
    using U = std::remove_pointer_t<decltype(dummy)>;
    if (!status.ok()) return nullptr;
    auto buffer = device_.Allocate(static_cast<size_t>(std::max<int64_t>(n, 1)) * sizeof(U));
    if (!buffer.ok()) {
      status = buffer.status();
      return nullptr;
    }
    U* p = (*buffer)->template as<U>();
    buffers_.push_back(*std::move(buffer));
    return p;
  };
  T* tp = nullptr;
  int32_t* ip = nullptr;
  int64_t* lp = nullptr;
  float* fp = nullptr;
  double* dp = nullptr;
  params_ = alloc(tp, num_params_);
  grads_ = alloc(tp, num_params_);
  const int64_t Tn = max_batch_ * m.seq_len, S = m.seq_len;
  g_->tokens = alloc(ip, Tn);
  g_->targets = alloc(ip, Tn);
  g_->resid = alloc(tp, (L + 1) * Tn * D);
  int64_t max_e = 1, max_p = 1, max_de = 1;
  for (int64_t l = 0; l < L; ++l) {
    Layer& y = *layers_[l];
    y.x_in = g_->resid + l * Tn * D;
    y.x_out = g_->resid + (l + 1) * Tn * D;
    y.h1 = alloc(tp, Tn * D);
    y.rstd1 = alloc(tp, Tn);
    y.qkv = alloc(tp, Tn * qkv_width);
    y.att_lse = alloc(tp, max_batch_ * m.n_heads * S);
    y.att = alloc(tp, Tn * D);
    y.x_mid = alloc(tp, Tn * D);
    y.h2 = alloc(tp, Tn * D);
    y.rstd2 = alloc(tp, Tn);
    const int64_t f = y.moe ? m.SharedDim() : m.d_ffn;
    if (f > 0) {
      y.ab = alloc(tp, Tn * 2 * f);
      y.g = alloc(tp, Tn * f);
    }
    if (y.moe) {
      const int64_t E = m.n_experts, K = m.top_k, P = Tn * K, De = m.d_expert;
      y.rlogits = alloc(tp, Tn * E);
      y.rprobs = alloc(tp, Tn * E);
      y.rlse = alloc(tp, Tn);
      y.gate = alloc(tp, Tn * K);
      y.xs = alloc(tp, P * D);
      y.ab_e = alloc(tp, P * 2 * De);
      y.g_e = alloc(tp, P * De);
      y.ys = alloc(tp, P * D);
      y.expert = alloc(ip, Tn * K);
      y.slot_of = alloc(ip, Tn * K);
      y.token_of = alloc(ip, P);
      y.load = alloc(lp, E);
      y.plan_offsets = alloc(lp, E + 1);
      y.bias = alloc(fp, E);
      max_e = std::max(max_e, E), max_p = std::max(max_p, P), max_de = std::max(max_de, De);
    }
  }
  g_->hf = alloc(tp, Tn * D);
  g_->rstdf = alloc(tp, Tn);
  g_->logits = alloc(tp, Tn * m.vocab_size);
  g_->loss = alloc(tp, Tn);
  const int64_t n_moe = static_cast<int64_t>(moe_layers_.size());
  g_->route_losses = alloc(dp, 2 * n_moe);
  for (int64_t i = 0; i < n_moe && status.ok(); ++i) {
    layers_[moe_layers_[i]]->losses = g_->route_losses + 2 * i;
  }
  g_->host_route_losses.resize(2 * n_moe);
  g_->dresid = alloc(tp, Tn * D);
  g_->dh = alloc(tp, Tn * D);
  g_->dhf = alloc(tp, Tn * D);
  g_->dqkv = alloc(tp, Tn * qkv_width);
  g_->datt = alloc(tp, Tn * D);
  g_->dab = alloc(tp, Tn * 2 * std::max<int64_t>(max_ffn, 1));
  g_->dg = alloc(tp, Tn * std::max<int64_t>(max_ffn, 1));
  g_->dlogits = alloc(tp, Tn * m.vocab_size);
  if (!moe_layers_.empty()) {
    g_->drlogits = alloc(tp, Tn * max_e);
    g_->dgate = alloc(tp, Tn * m.top_k);
    g_->dys = alloc(tp, max_p * D);
    g_->dg_e = alloc(tp, max_p * max_de);
    g_->dab_e = alloc(tp, max_p * 2 * max_de);
    g_->dxs = alloc(tp, max_p * D);
  }
  g_->host_loss.resize(Tn);
  return status;
}

template <typename T>
void Transformer<T>::InitParams(Rng& rng) {
  const double out_scale = 1.0 / std::sqrt(2.0 * config_.n_layers);
  std::vector<T> host(num_params_);
  for (const ParamTensor& t : tensors_) {
    const bool is_norm = t.decay == WeightDecay::kSkip;
    const bool residual_out = t.name.ends_with("w_o") || t.name.ends_with("w2");
    const double std = config_.init_std * (residual_out ? out_scale : 1.0);
    for (int64_t i = 0; i < t.size; ++i) {
      host[t.offset + i] = is_norm ? T(1) : static_cast<T>(std * rng.Normal());
    }
  }
  device_.FromHost(params_, host.data(), host.size() * sizeof(T));
}

template <typename T>
void Transformer<T>::ZeroGrads() {
  device_.Zero(grads_, static_cast<size_t>(num_params_) * sizeof(T));
}

template <typename T>
const RoutingStats& Transformer<T>::Routing(int64_t i) const {
  return layers_[moe_layers_[i]]->stats;
}
template <typename T>
float* Transformer<T>::BalanceBias(int64_t i) {
  return layers_[moe_layers_[i]]->bias;
}

template <typename T>
size_t Transformer<T>::AllocatedBytes() const {
  size_t bytes = 0;
  for (const auto& b : buffers_) bytes += b->bytes();
  return bytes;
}

template <typename T>
AttentionShape Transformer<T>::AttentionShapeFor(int64_t batch) const {
  const ModelConfig& m = config_;
  return {.batch = batch,
          .seq = m.seq_len,
          .heads = m.n_heads,
          .kv_heads = m.n_kv_heads,
          .head_dim = m.head_dim(),
          .positions = m.positions,
          .rope_theta = m.rope_theta};
}

template <typename T>
ForwardResult Transformer<T>::Forward(const int32_t* tokens, const int32_t* targets,
                                      int64_t batch) {
  const ModelConfig& m = config_;
  const OpContext& ctx = device_.Context();
  const int64_t S = m.seq_len, Tn = batch * S, D = m.d_model, Dh = m.head_dim();
  const int64_t qkv_width = (m.n_heads + 2 * m.n_kv_heads) * Dh;
  const AttentionShape as = AttentionShapeFor(batch);
  batch_ = batch;
  T* p = params_;
  device_.FromHost(g_->tokens, tokens, Tn * sizeof(int32_t));
  device_.FromHost(g_->targets, targets, Tn * sizeof(int32_t));
  ForwardResult result;

  ops_.embedding_forward(ctx, Tn, D, g_->resid, g_->tokens, p + g_->wte);
  for (auto& lp : layers_) {
    Layer& y = *lp;
    // Attention block: x_mid = x_in + attention(rmsnorm(x_in))·W_o^T
    ops_.rmsnorm_forward(ctx, Tn, D, y.h1, y.rstd1, y.x_in, p + y.attn_norm);
    ops_.matmul_forward(ctx, {Tn, D, qkv_width}, y.qkv, y.h1, p + y.w_qkv, Accumulate::kNo,
                        FlopKind::kModel);
    ops_.rope_forward(ctx, as, y.qkv);
    ops_.attention_forward(ctx, as, y.att, y.att_lse, y.qkv);
    device_.Copy(y.x_mid, y.x_in, Tn * D * sizeof(T));
    ops_.matmul_forward(ctx, {Tn, D, D}, y.x_mid, y.att, p + y.w_o, Accumulate::kYes,
                        FlopKind::kModel);
    // FFN block: x_out = x_mid + ffn(rmsnorm(x_mid))
    ops_.rmsnorm_forward(ctx, Tn, D, y.h2, y.rstd2, y.x_mid, p + y.ffn_norm);
    device_.Copy(y.x_out, y.x_mid, Tn * D * sizeof(T));
    if (!y.moe) {
      const int64_t F = m.d_ffn;
      ops_.matmul_forward(ctx, {Tn, D, 2 * F}, y.ab, y.h2, p + y.w13, Accumulate::kNo,
                          FlopKind::kModel);
      ops_.swiglu_forward(ctx, Tn, F, y.g, y.ab);
      ops_.matmul_forward(ctx, {Tn, F, D}, y.x_out, y.g, p + y.w2, Accumulate::kYes,
                          FlopKind::kModel);
    } else {
      MoeForward(y, Tn, y.x_out);
    }
  }
  ops_.rmsnorm_forward(ctx, Tn, D, g_->hf, g_->rstdf, g_->resid + m.n_layers * Tn * D,
                       p + g_->final_norm);
  ops_.matmul_forward(ctx, {Tn, D, m.vocab_size}, g_->logits, g_->hf, p + g_->head, Accumulate::kNo,
                      FlopKind::kVocab);
  ops_.cross_entropy_forward(ctx, Tn, m.vocab_size, g_->loss, g_->logits, g_->targets);
  // The micro-batch's one readback of losses: per-token cross-entropy and the routers' {aux, z}.
  device_.ToHost(g_->host_loss.data(), g_->loss, Tn * sizeof(T));
  double sum = 0.0;
  for (int64_t i = 0; i < Tn; ++i) sum += g_->host_loss[i];
  result.ce = sum / Tn;
  if (!moe_layers_.empty()) {
    device_.ToHost(g_->host_route_losses.data(), g_->route_losses,
                   g_->host_route_losses.size() * sizeof(double));
    for (size_t i = 0; i < moe_layers_.size(); ++i) {
      RoutingStats& stats = layers_[moe_layers_[i]]->stats;
      stats.aux_loss = g_->host_route_losses[2 * i];
      stats.z_loss = g_->host_route_losses[2 * i + 1];
      result.aux += stats.aux_loss;
      result.z += stats.z_loss;
    }
  }
  return result;
}

// route → permute → expert FFN (one GEMM pair per expert group) → combine, plus the shared expert.
// Adds the layer's output into y [T,D].
template <typename T>
void Transformer<T>::MoeForward(Layer& y, int64_t Tn, T* out) {
  const ModelConfig& m = config_;
  const OpContext& ctx = device_.Context();
  const int64_t D = m.d_model, E = m.n_experts, K = m.top_k, De = m.d_expert;
  T* p = params_;
  ops_.matmul_forward(ctx, {Tn, D, E}, y.rlogits, y.h2, p + y.router, Accumulate::kNo,
                      FlopKind::kModel);
  const RouteShape rs{.tokens = Tn,
                      .experts = E,
                      .top_k = K,
                      .renormalize = m.gate_norm == GateNorm::kRenormalize,
                      .aux_weight = m.aux_loss_weight,
                      .z_weight = m.z_loss_weight,
                      .grad_scale = 1.0};
  const bool use_bias = m.bias_update_rate > 0;
  ops_.route_forward(ctx, rs, y.rprobs, y.rlse, y.expert, y.gate, y.load, y.losses, y.rlogits,
                     use_bias ? y.bias : nullptr);
  ops_.routing_plan(ctx, Tn, K, E, y.plan_offsets, y.slot_of, y.token_of, y.expert);
  // The layer's one readback: the grouped GEMMs need each expert's row count on the host, and
  // the step's expert load is the same numbers.
  device_.ToHost(y.offsets.data(), y.plan_offsets, (E + 1) * sizeof(int64_t));
  for (int64_t e = 0; e < E; ++e) y.stats.load[e] = y.offsets[e + 1] - y.offsets[e];
  const ExpertShape es{.tokens = Tn, .top_k = K, .experts = E, .d_model = D, .d_expert = De};
  GroupedExpertsForward<T>(ops_, ctx, es, y.offsets, y.slot_of, y.token_of, y.gate, y.h2,
                           p + y.e_w13, p + y.e_w2, {y.xs, y.ab_e, y.g_e, y.ys}, out);
  const int64_t Dse = m.SharedDim();
  if (Dse > 0) {
    ops_.matmul_forward(ctx, {Tn, D, 2 * Dse}, y.ab, y.h2, p + y.s_w13, Accumulate::kNo,
                        FlopKind::kModel);
    ops_.swiglu_forward(ctx, Tn, Dse, y.g, y.ab);
    ops_.matmul_forward(ctx, {Tn, Dse, D}, out, y.g, p + y.s_w2, Accumulate::kYes,
                        FlopKind::kModel);
  }
}

template <typename T>
void Transformer<T>::Backward(double ce_scale, double aux_scale) {
  const ModelConfig& m = config_;
  const OpContext& ctx = device_.Context();
  const int64_t S = m.seq_len, Tn = batch_ * S, D = m.d_model, Dh = m.head_dim();
  const int64_t qkv_width = (m.n_heads + 2 * m.n_kv_heads) * Dh;
  const AttentionShape as = AttentionShapeFor(batch_);
  T* p = params_;
  T* dp = grads_;
  aux_scale_ = aux_scale;

  ops_.cross_entropy_backward(ctx, Tn, m.vocab_size, g_->dlogits, g_->logits, g_->targets,
                              ce_scale);
  ops_.matmul_backward(ctx, {Tn, D, m.vocab_size}, g_->dhf, dp + g_->head, g_->dlogits, g_->hf,
                       p + g_->head, Accumulate::kNo, FlopKind::kVocab);
  device_.Zero(g_->dresid, Tn * D * sizeof(T));
  ops_.rmsnorm_backward(ctx, Tn, D, g_->dresid, dp + g_->final_norm, g_->dhf,
                        g_->resid + m.n_layers * Tn * D, p + g_->final_norm, g_->rstdf);
  for (auto it = layers_.rbegin(); it != layers_.rend(); ++it) {
    Layer& y = **it;
    // FFN block (dresid is both the block's output gradient and, after, its input gradient).
    if (!y.moe) {
      const int64_t F = m.d_ffn;
      ops_.matmul_backward(ctx, {Tn, F, D}, g_->dg, dp + y.w2, g_->dresid, y.g, p + y.w2,
                           Accumulate::kNo, FlopKind::kModel);
      ops_.swiglu_backward(ctx, Tn, F, g_->dab, g_->dg, y.ab);
      ops_.matmul_backward(ctx, {Tn, D, 2 * F}, g_->dh, dp + y.w13, g_->dab, y.h2, p + y.w13,
                           Accumulate::kNo, FlopKind::kModel);
    } else {
      MoeBackward(y, Tn, g_->dresid, g_->dh);
    }
    ops_.rmsnorm_backward(ctx, Tn, D, g_->dresid, dp + y.ffn_norm, g_->dh, y.x_mid, p + y.ffn_norm,
                          y.rstd2);
    // Attention block.
    ops_.matmul_backward(ctx, {Tn, D, D}, g_->datt, dp + y.w_o, g_->dresid, y.att, p + y.w_o,
                         Accumulate::kNo, FlopKind::kModel);
    ops_.attention_backward(ctx, as, g_->dqkv, g_->datt, y.att, y.att_lse, y.qkv);
    ops_.rope_backward(ctx, as, g_->dqkv);
    ops_.matmul_backward(ctx, {Tn, D, qkv_width}, g_->dh, dp + y.w_qkv, g_->dqkv, y.h1, p + y.w_qkv,
                         Accumulate::kNo, FlopKind::kModel);
    ops_.rmsnorm_backward(ctx, Tn, D, g_->dresid, dp + y.attn_norm, g_->dh, y.x_in, p + y.attn_norm,
                          y.rstd1);
    if (grads_ready_) {             // layer parameters are laid out contiguously, attn_norm first
      const auto next = it.base();  // the layer above, or end()
      const int64_t end = next == layers_.end() ? g_->final_norm : (*next)->attn_norm;
      grads_ready_(y.attn_norm, end - y.attn_norm);
    }
  }
  ops_.embedding_backward(ctx, Tn, D, m.vocab_size, dp + g_->wte, g_->dresid, g_->tokens);
}

// dy [T,D] is the gradient of the layer output; writes (=) the gradient of h2 into dh [T,D].
template <typename T>
void Transformer<T>::MoeBackward(Layer& y, int64_t Tn, T* dy, T* dh) {
  const ModelConfig& m = config_;
  const OpContext& ctx = device_.Context();
  const int64_t D = m.d_model, E = m.n_experts, K = m.top_k, De = m.d_expert;
  T* p = params_;
  T* dp = grads_;
  const int64_t Dse = m.SharedDim();
  if (Dse > 0) {
    ops_.matmul_backward(ctx, {Tn, Dse, D}, g_->dg, dp + y.s_w2, dy, y.g, p + y.s_w2,
                         Accumulate::kNo, FlopKind::kModel);
    ops_.swiglu_backward(ctx, Tn, Dse, g_->dab, g_->dg, y.ab);
    ops_.matmul_backward(ctx, {Tn, D, 2 * Dse}, dh, dp + y.s_w13, g_->dab, y.h2, p + y.s_w13,
                         Accumulate::kNo, FlopKind::kModel);
  } else {
    device_.Zero(dh, Tn * D * sizeof(T));
  }
  const ExpertShape es{.tokens = Tn, .top_k = K, .experts = E, .d_model = D, .d_expert = De};
  GroupedExpertsBackward<T>(ops_, ctx, es, y.offsets, y.slot_of, y.gate, p + y.e_w13, p + y.e_w2,
                            {y.xs, y.ab_e, y.g_e, y.ys}, dy,
                            {g_->dys, g_->dg_e, g_->dab_e, g_->dxs}, g_->dgate, dh, dp + y.e_w13,
                            dp + y.e_w2);
  const RouteShape rs{.tokens = Tn,
                      .experts = E,
                      .top_k = K,
                      .renormalize = m.gate_norm == GateNorm::kRenormalize,
                      .aux_weight = m.aux_loss_weight,
                      .z_weight = m.z_loss_weight,
                      .grad_scale = aux_scale_};
  ops_.route_backward(ctx, rs, g_->drlogits, g_->dgate, y.rprobs, y.rlse, y.expert, y.load);
  ops_.matmul_backward(ctx, {Tn, D, E}, dh, dp + y.router, g_->drlogits, y.h2, p + y.router,
                       Accumulate::kYes, FlopKind::kModel);
}

template class Transformer<float>;
template class Transformer<double>;

}  // namespace parity::kernels
