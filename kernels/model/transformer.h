// The model the engine trains (docs/domain.md): a byte-level decoder-only transformer with dense or
// MoE SwiGLU feed-forward layers. This class owns the parameters, their gradients and the saved
// activations, and orchestrates ops through the device's op table; it does no arithmetic itself
// except host-side bookkeeping (loss means, expert row counts). Every array it hands to an op is
// device memory; the host sees per micro-batch the losses (queued copies, read when the caller
// synchronises) and per MoE layer the E+1 plan offsets (the one readback that waits).
//
// Shape legend: B sequences per micro-batch, S sequence length, T = B·S tokens, D = D_m,
// H/Hkv/Dh heads, F = D_ffn, E experts, K top-k, De/Dse expert and shared-expert widths,
// P = T·K routing slots, V = 256.
//
// Precision: T is the master scalar (parameters, gradients, the residual stream, statistics), A
// the activations' (GEMM inputs and outputs inside a block, their gradients). A = T is one
// precision throughout: float trains the fp32 parity mode, double exists for finite-difference
// gradient checks. Transformer<float, Bf16> is the bf16 mode (op_table_bf16.h says which array is
// which): the GEMMs read a bf16 copy of the weights, cast from the masters before the first
// Forward after any write through Params().
//
// Threading: one thread calls everything (the ops parallelise inside).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>
#include <type_traits>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/backend/bf16.h"
#include "kernels/backend/device.h"
#include "kernels/backend/op_table.h"
#include "kernels/backend/op_table_bf16.h"
#include "kernels/model/config.h"
#include "kernels/model/model.h"
#include "kernels/model/rng.h"

namespace parity::kernels {

template <typename T, typename A = T>
class Transformer final : public Model<T> {
 public:
  // The op table the model dispatches through: one scalar's table, or the bf16 mode's.
  using Ops = std::conditional_t<std::is_same_v<T, A>, OpTable<T>, Bf16OpTable>;
  using GradsReadyHook = typename Model<T>::GradsReadyHook;

  // `max_batch`: most sequences a Forward may carry (activations are sized for it). `recompute`:
  // activation checkpointing — the layers of a kind share one set of activation buffers, and the
  // backward runs each layer's forward again from its input (kept in the residual stream) before
  // differentiating it. The same ops on the same inputs: the same bits as without.
  static absl::StatusOr<std::unique_ptr<Transformer>> Create(const ModelConfig& config,
                                                             Device& device, int64_t max_batch,
                                                             bool recompute = false);
  ~Transformer() override;

  const ModelConfig& config() const override { return config_; }
  int64_t NumParams() const override { return num_params_; }
  const std::vector<ParamTensor>& Tensors() const override { return tensors_; }
  T* Params() override {
    weights_stale_ = true;
    return params_;
  }
  T* Grads() override { return grads_; }

  void InitParams(Rng& rng) override;
  void ZeroGrads() override;
  void Forward(const MicroBatch<T>& mb) override;
  ForwardResult ForwardAndWait(const int32_t* tokens, const int32_t* targets,
                               int64_t batch) override;
  void Backward(double ce_scale, double aux_scale) override;
  absl::Status TrainMicroBatch(const MicroBatch<T>& mb, double ce_scale, double aux_scale) override;
  void SetGraphReplay(bool on) override { graph_replay_ = on; }
  // Recordings TrainMicroBatch holds (one per replayed shape): for tests and diagnostics.
  int64_t RecordedGraphs() const;
  void SetGradsReadyHook(GradsReadyHook hook) override { grads_ready_ = std::move(hook); }

  int64_t NumMoeLayers() const override { return static_cast<int64_t>(moe_layers_.size()); }
  int64_t MoeLayerIndex(int64_t i) const override { return moe_layers_[i]; }
  const RoutingStats& Routing(int64_t i) const override;
  float* BalanceBias(int64_t i) override;
  size_t AllocatedBytes() const override;
  void SetProfile(StepProfile* profile) override { profile_ = profile; }

  struct Layer;  // per-layer parameter offsets and activations (transformer.cc)

 private:
  // The attention shape of a forward or backward over `batch` sequences.
  AttentionShape AttentionShapeFor(int64_t batch) const;
  // The last layer's output: the residual stream's last slice, laid out for max_batch sequences
  // (a Forward of fewer uses the start of each slice, so the slice's place is the maximum's).
  T* FinalResidual() const { return layers_.back()->x_out; }
  Transformer(const ModelConfig& config, Device& device, const Ops& ops, int64_t max_batch,
              bool recompute);
  absl::Status Allocate();
  absl::Status AllocateActivations(int64_t max_ffn);
  // One layer's forward from y.x_in into y.x_out, saving its activations.
  void LayerForward(Layer& y, int64_t tokens, const AttentionShape& as);
  // LayerForward again in the backward, its FLOPs moved to FlopKind::kRecompute.
  void RecomputeLayer(Layer& y, int64_t tokens, const AttentionShape& as);
  // Runs `call` (op calls), timed into `bucket` while a profile is being taken.
  template <typename F>
  void Timed(OpBucket bucket, F&& call);
  // The bf16 weight copy from the masters when they may have changed (no-op when A = T).
  void RefreshWeights();
  // Forward's three parts: the ids' queued upload, the ops, the losses' queued copies back.
  void QueueInputs(const MicroBatch<T>& mb);
  void ForwardOps(int64_t batch);
  void QueueLosses(const MicroBatch<T>& mb);
  // TrainMicroBatch's recorded path: warm up, record, replay (see Model::TrainMicroBatch).
  absl::Status ReplayMicroBatch(int64_t batch, double ce_scale, double aux_scale);
  // y (=|+=) x·Wᵀ into an activation (A) or master-precision (T) array.
  template <typename Y>
  void MatmulForward(const MatmulShape& s, Y* y, const A* x, const A* w, Accumulate acc,
                     FlopKind kind);
  // dx (=|+=) dy·W, dW += dyᵀ·x, with dy an activation (A) or master-precision (T) gradient.
  template <typename DY>
  void MatmulBackward(const MatmulShape& s, A* dx, T* dw, const DY* dy, const A* x, const A* w,
                      Accumulate acc, FlopKind kind);
  void MoeForward(Layer& layer, int64_t tokens, T* x_resid);
  void MoeBackward(Layer& layer, int64_t tokens, T* dresid, A* dh);

  ModelConfig config_;
  Device& device_;
  const Ops& ops_;
  int64_t max_batch_;
  bool recompute_;
  int64_t batch_ = 0;       // sequences in the last Forward
  double aux_scale_ = 1.0;  // aux_scale of the Backward in progress
  GradsReadyHook grads_ready_;
  StepProfile* profile_ = nullptr;
  // Graph replay: per (batch, ce_scale, aux_scale), whether its first run is done, the FLOPs that
  // run counted, and the recording.
  struct Recorded {
    bool warmed = false;
    FlopCounter flops;
    std::unique_ptr<Graph> graph;
  };
  bool graph_replay_ = false;
  std::map<std::tuple<int64_t, double, double>, Recorded> recorded_;
  std::vector<ParamTensor> tensors_;
  int64_t num_params_ = 0;
  std::vector<std::unique_ptr<Buffer>> buffers_;  // owns every allocation below
  T* params_ = nullptr;
  T* grads_ = nullptr;
  A* weights_ = nullptr;       // what the GEMMs read: params_ itself when A = T, else a copy
  bool weights_stale_ = true;  // Params() was handed out since the copy was made
  std::vector<std::unique_ptr<Layer>> layers_;
  std::vector<int64_t> moe_layers_;
  struct Globals;
  std::unique_ptr<Globals> g_;
};

extern template class Transformer<float>;
extern template class Transformer<double>;
extern template class Transformer<float, Bf16>;

}  // namespace parity::kernels
