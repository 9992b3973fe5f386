// Forward and backward of the transformer, op by op. Read Forward top to bottom, then Backward
// bottom to top: every forward call has its paired backward call in mirrored order. Arrays are T
// (master precision) or A (activations) as transformer_state.h declares them; the matmul helpers
// pick the table entry for the precision of y or dy.
#include "kernels/model/transformer.h"

#include <chrono>
#include <cmath>

#include "core/status_macros.h"
#include "kernels/model/moe_experts.h"
#include "kernels/model/transformer_state.h"

namespace parity::kernels {

template <typename T, typename A>
template <typename F>
void Transformer<T, A>::Timed(OpBucket bucket, F&& call) {
  if (profile_ == nullptr) {
    call();
    return;
  }
  // Drain what is queued first, so that the op's time is its own.
  Stream& stream = device_.DefaultStream();
  stream.Synchronize();
  const auto t0 = std::chrono::steady_clock::now();
  call();
  stream.Synchronize();
  profile_->Add(bucket,
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}

template <typename T, typename A>
template <typename Y>
void Transformer<T, A>::MatmulForward(const MatmulShape& s, Y* y, const A* x, const A* w,
                                      Accumulate acc, FlopKind kind) {
  const OpContext& ctx = device_.Context();
  Timed(OpBucket::kGemm, [&] {
    if constexpr (std::is_same_v<Y, A>) {
      ops_.matmul_forward(ctx, s, y, x, w, acc, kind);
    } else {
      ops_.matmul_forward_f32(ctx, s, y, x, w, acc, kind);
    }
  });
}

template <typename T, typename A>
template <typename DY>
void Transformer<T, A>::MatmulBackward(const MatmulShape& s, A* dx, T* dw, const DY* dy, const A* x,
                                       const A* w, Accumulate acc, FlopKind kind) {
  const OpContext& ctx = device_.Context();
  Timed(OpBucket::kGemm, [&] {
    if constexpr (std::is_same_v<DY, A>) {
      ops_.matmul_backward(ctx, s, dx, dw, dy, x, w, acc, kind);
    } else {
      ops_.matmul_backward_f32(ctx, s, dx, dw, dy, x, w, acc, kind);
    }
  });
}

template <typename T, typename A>
AttentionShape Transformer<T, A>::AttentionShapeFor(int64_t batch) const {
  const ModelConfig& m = config_;
  return {.batch = batch,
          .seq = m.seq_len,
          .heads = m.n_heads,
          .kv_heads = m.n_kv_heads,
          .head_dim = m.head_dim(),
          .positions = m.positions,
          .rope_theta = m.rope_theta};
}

template <typename T, typename A>
void Transformer<T, A>::LayerForward(Layer& y, int64_t Tn, const AttentionShape& as) {
  const ModelConfig& m = config_;
  const OpContext& ctx = device_.Context();
  const int64_t D = m.d_model, qkv_width = (m.n_heads + 2 * m.n_kv_heads) * m.head_dim();
  const T* p = params_;
  const A* w = weights_;
  // Attention block: x_mid = x_in + attention(rmsnorm(x_in))·W_o^T
  ops_.rmsnorm_forward(ctx, Tn, D, y.h1, y.rstd1, y.x_in, p + y.attn_norm);
  MatmulForward({Tn, D, qkv_width}, y.qkv, y.h1, w + y.w_qkv, Accumulate::kNo, FlopKind::kModel);
  Timed(OpBucket::kAttention, [&] {
    ops_.rope_forward(ctx, as, y.qkv);
    ops_.attention_forward(ctx, as, y.att, y.att_lse, y.qkv);
  });
  device_.Copy(y.x_mid, y.x_in, Tn * D * sizeof(T));
  MatmulForward({Tn, D, D}, y.x_mid, y.att, w + y.w_o, Accumulate::kYes, FlopKind::kModel);
  // FFN block: x_out = x_mid + ffn(rmsnorm(x_mid))
  ops_.rmsnorm_forward(ctx, Tn, D, y.h2, y.rstd2, y.x_mid, p + y.ffn_norm);
  device_.Copy(y.x_out, y.x_mid, Tn * D * sizeof(T));
  if (!y.moe) {
    const int64_t F = m.d_ffn;
    MatmulForward({Tn, D, 2 * F}, y.ab, y.h2, w + y.w13, Accumulate::kNo, FlopKind::kModel);
    ops_.swiglu_forward(ctx, Tn, F, y.g, y.ab);
    MatmulForward({Tn, F, D}, y.x_out, y.g, w + y.w2, Accumulate::kYes, FlopKind::kModel);
  } else {
    MoeForward(y, Tn, y.x_out);
  }
}

// Under activation checkpointing only the layer's input survived the forward (the residual
// stream); the ops run again on it, so the activations are the forward's bits.
template <typename T, typename A>
void Transformer<T, A>::RecomputeLayer(Layer& y, int64_t Tn, const AttentionShape& as) {
  OpContext& ctx = device_.Context();
  FlopCounter* counted = ctx.flops;
  FlopCounter again;
  ctx.flops = &again;
  LayerForward(y, Tn, as);
  ctx.flops = counted;
  if (counted != nullptr) counted->Add(FlopKind::kRecompute, again.Total());
}

template <typename T, typename A>
void Transformer<T, A>::Forward(const MicroBatch<T>& mb) {
  batch_ = mb.batch;
  RefreshWeights();
  QueueInputs(mb);
  ForwardOps(mb.batch);
  QueueLosses(mb);
}

// Queued uploads: the previous micro-batch's Backward, which reads these arrays, is ahead of them
// on the stream.
template <typename T, typename A>
void Transformer<T, A>::QueueInputs(const MicroBatch<T>& mb) {
  const int64_t Tn = mb.batch * config_.seq_len;
  device_.FromHostAsync(g_->tokens, mb.tokens, Tn * sizeof(int32_t));
  device_.FromHostAsync(g_->targets, mb.targets, Tn * sizeof(int32_t));
}

template <typename T, typename A>
void Transformer<T, A>::ForwardOps(int64_t batch) {
  const ModelConfig& m = config_;
  const OpContext& ctx = device_.Context();
  const int64_t S = m.seq_len, Tn = batch * S, D = m.d_model;
  const AttentionShape as = AttentionShapeFor(batch);
  const T* p = params_;   // norm weights and the embedding: read in master precision
  const A* w = weights_;  // every GEMM's weights
  ops_.embedding_forward(ctx, Tn, D, g_->resid, g_->tokens, p + g_->wte);
  for (auto& lp : layers_) LayerForward(*lp, Tn, as);
  ops_.rmsnorm_forward(ctx, Tn, D, g_->hf, g_->rstdf, FinalResidual(), p + g_->final_norm);
  MatmulForward({Tn, D, m.vocab_size}, g_->logits, g_->hf, w + g_->head, Accumulate::kNo,
                FlopKind::kVocab);
  ops_.cross_entropy_forward(ctx, Tn, m.vocab_size, g_->loss, g_->logits, g_->targets);
}

// The losses go back queued, not waited for: per-token cross-entropy and the routers' {aux, z}.
template <typename T, typename A>
void Transformer<T, A>::QueueLosses(const MicroBatch<T>& mb) {
  device_.ToHostAsync(mb.token_loss, g_->loss, mb.batch * config_.seq_len * sizeof(T));
  if (!moe_layers_.empty()) {
    device_.ToHostAsync(mb.route_losses, g_->route_losses, 2 * moe_layers_.size() * sizeof(double));
  }
}

template <typename T, typename A>
absl::Status Transformer<T, A>::TrainMicroBatch(const MicroBatch<T>& mb, double ce_scale,
                                                double aux_scale) {
  // Replay needs a micro-batch that is device work only: an MoE layer reads its routing plan on
  // the host, a hook or a profile runs host code between ops.
  if (!graph_replay_ || !moe_layers_.empty() || grads_ready_ || profile_ != nullptr) {
    Forward(mb);
    Backward(ce_scale, aux_scale);
    return absl::OkStatus();
  }
  batch_ = mb.batch;
  RefreshWeights();  // only after an optimizer step: outside the recording
  QueueInputs(mb);
  PARITY_RETURN_IF_ERROR(ReplayMicroBatch(mb.batch, ce_scale, aux_scale));
  QueueLosses(mb);
  return absl::OkStatus();
}

template <typename T, typename A>
int64_t Transformer<T, A>::RecordedGraphs() const {
  int64_t n = 0;
  for (const auto& [key, r] : recorded_) n += r.graph != nullptr;
  return n;
}

template <typename T, typename A>
absl::Status Transformer<T, A>::ReplayMicroBatch(int64_t batch, double ce_scale, double aux_scale) {
  OpContext& ctx = device_.Context();
  Recorded& r = recorded_[{batch, ce_scale, aux_scale}];
  if (!r.warmed) {
    // The first run of a shape as usual: it counts the FLOPs every replay adds, and keeps the ops'
    // one-time setup (kernel attributes, GEMM plans) out of the recording.
    const FlopCounter before = ctx.flops != nullptr ? *ctx.flops : FlopCounter{};
    ForwardOps(batch);
    Backward(ce_scale, aux_scale);
    for (int k = 0; k < kNumFlopKinds && ctx.flops != nullptr; ++k) {
      r.flops.flops[k] = ctx.flops->flops[k] - before.flops[k];
    }
    r.warmed = true;
    return absl::OkStatus();
  }
  // A CPU replay runs the ops again and a recording runs their host side: neither counts.
  FlopCounter* counted = ctx.flops;
  FlopCounter discarded;
  ctx.flops = &discarded;
  absl::Status status;
  if (r.graph == nullptr) {
    absl::StatusOr<std::unique_ptr<Graph>> graph =
        device_.Record([this, batch, ce_scale, aux_scale] {
          batch_ = batch;
          ForwardOps(batch);
          Backward(ce_scale, aux_scale);
        });
    if (graph.ok()) r.graph = *std::move(graph);
    status = graph.status();
  }
  if (status.ok()) status = r.graph->Launch();
  ctx.flops = counted;
  PARITY_RETURN_IF_ERROR(status);
  for (int k = 0; k < kNumFlopKinds && counted != nullptr; ++k) {
    counted->flops[k] += r.flops.flops[k];
  }
  return absl::OkStatus();
}

template <typename T, typename A>
ForwardResult Transformer<T, A>::ForwardAndWait(const int32_t* tokens, const int32_t* targets,
                                                int64_t batch) {
  const MicroBatch<T> mb{.tokens = tokens,
                         .targets = targets,
                         .batch = batch,
                         .token_loss = g_->host_loss.data(),
                         .route_losses = g_->host_route_losses.data()};
  Forward(mb);
  device_.DefaultStream().Synchronize();
  return SumLosses(mb.token_loss, batch * config_.seq_len, mb.route_losses, NumMoeLayers());
}

// route → permute → expert FFN (two grouped GEMMs over the expert groups) → combine, plus the
// shared expert. Adds the layer's output into y [T,D].
template <typename T, typename A>
void Transformer<T, A>::MoeForward(Layer& y, int64_t Tn, T* out) {
  const ModelConfig& m = config_;
  const OpContext& ctx = device_.Context();
  const int64_t D = m.d_model, E = m.n_experts, K = m.top_k, De = m.d_expert;
  const A* w = weights_;
  MatmulForward({Tn, D, E}, y.rlogits, y.h2, w + y.router, Accumulate::kNo, FlopKind::kModel);
  const RouteShape rs{.tokens = Tn,
                      .experts = E,
                      .top_k = K,
                      .renormalize = m.gate_norm == GateNorm::kRenormalize,
                      .aux_weight = m.aux_loss_weight,
                      .z_weight = m.z_loss_weight,
                      .grad_scale = 1.0};
  const bool use_bias = m.bias_update_rate > 0;
  Timed(OpBucket::kMoeRouting, [&] {
    ops_.route_forward(ctx, rs, y.rprobs, y.rlse, y.expert, y.gate, y.load, y.losses, y.rlogits,
                       use_bias ? y.bias : nullptr);
    ops_.routing_plan(ctx, Tn, K, E, y.plan_offsets, y.slot_of, y.token_of, y.expert);
    // The layer's one readback: the grouped GEMMs need each expert's row count on the host, and
    // the step's expert load is the same numbers.
    device_.ToHost(y.offsets.data(), y.plan_offsets, (E + 1) * sizeof(int64_t));
  });
  for (int64_t e = 0; e < E; ++e) y.stats.load[e] = y.offsets[e + 1] - y.offsets[e];
  const ExpertShape es{.tokens = Tn, .top_k = K, .experts = E, .d_model = D, .d_expert = De};
  Timed(OpBucket::kMoeExperts, [&] {
    GroupedExpertsForward(ops_, ctx, es, y.plan_offsets, y.offsets, y.slot_of, y.token_of, y.gate,
                          y.h2, w + y.e_w13, w + y.e_w2, {y.xs, y.ab_e, y.g_e, y.ys}, out);
  });
  const int64_t Dse = m.SharedDim();
  if (Dse > 0) {
    MatmulForward({Tn, D, 2 * Dse}, y.ab, y.h2, w + y.s_w13, Accumulate::kNo, FlopKind::kModel);
    ops_.swiglu_forward(ctx, Tn, Dse, y.g, y.ab);
    MatmulForward({Tn, Dse, D}, out, y.g, w + y.s_w2, Accumulate::kYes, FlopKind::kModel);
  }
}

template <typename T, typename A>
void Transformer<T, A>::Backward(double ce_scale, double aux_scale) {
  const ModelConfig& m = config_;
  const OpContext& ctx = device_.Context();
  const int64_t S = m.seq_len, Tn = batch_ * S, D = m.d_model, Dh = m.head_dim();
  const int64_t qkv_width = (m.n_heads + 2 * m.n_kv_heads) * Dh;
  const AttentionShape as = AttentionShapeFor(batch_);
  const T* p = params_;
  const A* w = weights_;
  T* dw = grads_;
  aux_scale_ = aux_scale;

  ops_.cross_entropy_backward(ctx, Tn, m.vocab_size, g_->dlogits, g_->logits, g_->targets,
                              ce_scale);
  MatmulBackward({Tn, D, m.vocab_size}, g_->dhf, dw + g_->head, g_->dlogits, g_->hf, w + g_->head,
                 Accumulate::kNo, FlopKind::kVocab);
  device_.Zero(g_->dresid, Tn * D * sizeof(T));
  ops_.rmsnorm_backward(ctx, Tn, D, g_->dresid, dw + g_->final_norm, g_->dhf, FinalResidual(),
                        p + g_->final_norm, g_->rstdf);
  for (auto it = layers_.rbegin(); it != layers_.rend(); ++it) {
    Layer& y = **it;
    // The top layer's activations are still the forward's: no layer ran after it.
    if (recompute_ && it != layers_.rbegin()) RecomputeLayer(y, Tn, as);
    // FFN block (dresid is both the block's output gradient and, after, its input gradient).
    if (!y.moe) {
      const int64_t F = m.d_ffn;
      MatmulBackward({Tn, F, D}, g_->dg, dw + y.w2, g_->dresid, y.g, w + y.w2, Accumulate::kNo,
                     FlopKind::kModel);
      ops_.swiglu_backward(ctx, Tn, F, g_->dab, g_->dg, y.ab);
      MatmulBackward({Tn, D, 2 * F}, g_->dh, dw + y.w13, g_->dab, y.h2, w + y.w13, Accumulate::kNo,
                     FlopKind::kModel);
    } else {
      MoeBackward(y, Tn, g_->dresid, g_->dh);
    }
    ops_.rmsnorm_backward(ctx, Tn, D, g_->dresid, dw + y.ffn_norm, g_->dh, y.x_mid, p + y.ffn_norm,
                          y.rstd2);
    // Attention block.
    MatmulBackward({Tn, D, D}, g_->datt, dw + y.w_o, g_->dresid, y.att, w + y.w_o, Accumulate::kNo,
                   FlopKind::kModel);
    Timed(OpBucket::kAttention, [&] {
      ops_.attention_backward(ctx, as, g_->dqkv, g_->datt, y.att, y.att_lse, y.qkv);
      ops_.rope_backward(ctx, as, g_->dqkv);
    });
    MatmulBackward({Tn, D, qkv_width}, g_->dh, dw + y.w_qkv, g_->dqkv, y.h1, w + y.w_qkv,
                   Accumulate::kNo, FlopKind::kModel);
    ops_.rmsnorm_backward(ctx, Tn, D, g_->dresid, dw + y.attn_norm, g_->dh, y.x_in, p + y.attn_norm,
                          y.rstd1);
    if (grads_ready_) {             // layer parameters are laid out contiguously, attn_norm first
      const auto next = it.base();  // the layer above, or end()
      const int64_t end = next == layers_.end() ? g_->final_norm : (*next)->attn_norm;
      grads_ready_(y.attn_norm, end - y.attn_norm);
    }
  }
  ops_.embedding_backward(ctx, Tn, D, m.vocab_size, dw + g_->wte, g_->dresid, g_->tokens);
}

// dy [T,D] is the gradient of the layer output; writes (=) the gradient of h2 into dh [T,D].
template <typename T, typename A>
void Transformer<T, A>::MoeBackward(Layer& y, int64_t Tn, T* dy, A* dh) {
  const ModelConfig& m = config_;
  const OpContext& ctx = device_.Context();
  const int64_t D = m.d_model, E = m.n_experts, K = m.top_k, De = m.d_expert;
  const A* w = weights_;
  T* dw = grads_;
  const int64_t Dse = m.SharedDim();
  if (Dse > 0) {
    MatmulBackward({Tn, Dse, D}, g_->dg, dw + y.s_w2, dy, y.g, w + y.s_w2, Accumulate::kNo,
                   FlopKind::kModel);
    ops_.swiglu_backward(ctx, Tn, Dse, g_->dab, g_->dg, y.ab);
    MatmulBackward({Tn, D, 2 * Dse}, dh, dw + y.s_w13, g_->dab, y.h2, w + y.s_w13, Accumulate::kNo,
                   FlopKind::kModel);
  } else {
    device_.Zero(dh, Tn * D * sizeof(A));
  }
  const ExpertShape es{.tokens = Tn, .top_k = K, .experts = E, .d_model = D, .d_expert = De};
  Timed(OpBucket::kMoeExperts, [&] {
    GroupedExpertsBackward(ops_, ctx, es, y.plan_offsets, y.offsets, y.slot_of, y.gate, w + y.e_w13,
                           w + y.e_w2, {y.xs, y.ab_e, y.g_e, y.ys}, dy,
                           {g_->dys, g_->dg_e, g_->dab_e, g_->dxs}, g_->dgate, dh, dw + y.e_w13,
                           dw + y.e_w2);
  });
  const RouteShape rs{.tokens = Tn,
                      .experts = E,
                      .top_k = K,
                      .renormalize = m.gate_norm == GateNorm::kRenormalize,
                      .aux_weight = m.aux_loss_weight,
                      .z_weight = m.z_loss_weight,
                      .grad_scale = aux_scale_};
  Timed(OpBucket::kMoeRouting, [&] {
    ops_.route_backward(ctx, rs, g_->drlogits, g_->dgate, y.rprobs, y.rlse, y.expert, y.load);
  });
  MatmulBackward({Tn, D, E}, dh, dw + y.router, g_->drlogits, y.h2, w + y.router, Accumulate::kYes,
                 FlopKind::kModel);
}

template class Transformer<float>;
template class Transformer<double>;
template class Transformer<float, Bf16>;

}  // namespace parity::kernels
