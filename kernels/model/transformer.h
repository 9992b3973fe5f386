// The model the engine trains (docs/domain.md): a byte-level decoder-only transformer with dense or
// MoE SwiGLU feed-forward layers. This class owns the parameters, their gradients and the saved
// activations, and orchestrates ops through the device's op table; it does no arithmetic itself
// except host-side bookkeeping (loss means, expert row counts). Every array it hands to an op is
// device memory; the host sees per micro-batch the losses and per MoE layer the E+1 plan offsets.
//
// Shape legend: B sequences per micro-batch, S sequence length, T = B·S tokens, D = D_m,
// H/Hkv/Dh heads, F = D_ffn, E experts, K top-k, De/Dse expert and shared-expert widths,
// P = T·K routing slots, V = 256.
//
// Threading: one thread calls everything (the ops parallelise inside). Templated on the scalar:
// float trains, double exists for finite-difference gradient checks.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/backend/device.h"
#include "kernels/backend/op_table.h"
#include "kernels/model/config.h"
#include "kernels/model/rng.h"

namespace parity::kernels {

// One named parameter tensor inside the flat parameter buffer.
struct ParamTensor {
  std::string name;
  int64_t offset = 0;  // elements from the start of the flat buffer
  int64_t size = 0;
  WeightDecay decay = WeightDecay::kApply;
};

// Routing statistics of one MoE layer for the last forward (host copies).
struct RoutingStats {
  std::vector<int64_t> load;  // [E] routing slots per expert (from the routing plan's offsets)
  double aux_loss = 0;        // λ·E·Σ f_i·P_i
  double z_loss = 0;          // λ_z·mean(lse²)
};

struct ForwardResult {
  double ce = 0;   // mean cross-entropy over the micro-batch's tokens, nats
  double aux = 0;  // Σ over MoE layers of the balance loss
  double z = 0;    // Σ over MoE layers of the router z-loss
};

template <typename T>
class Transformer {
 public:
  // `max_batch`: most sequences a Forward may carry (activations are sized for it).
  static absl::StatusOr<std::unique_ptr<Transformer>> Create(const ModelConfig& config,
                                                             Device& device, int64_t max_batch);
  ~Transformer();

  const ModelConfig& config() const { return config_; }
  int64_t NumParams() const { return num_params_; }
  const std::vector<ParamTensor>& Tensors() const { return tensors_; }
  T* Params() { return params_; }
  T* Grads() { return grads_; }

  // N(0, 0.02) matrices (residual output projections scaled by 1/√(2L)), unit norm weights.
  void InitParams(Rng& rng);
  void ZeroGrads();

  // Runs `batch` sequences of S tokens (host arrays, batch·S each) and saves activations.
  ForwardResult Forward(const int32_t* tokens, const int32_t* targets, int64_t batch);
  // Backward of the last Forward, ACCUMULATING into Grads():
  //   grads += ∂(ce_scale·Σ_t ce_t + aux_scale·Σ_layers(aux + z))/∂θ.
  void Backward(double ce_scale, double aux_scale);

  // Called by Backward as soon as a layer's weight gradients are complete, with the layer's
  // contiguous range of the flat gradient [offset, offset + count), deepest layer first; the
  // embedding, final norm and head are not reported (they are complete only when Backward
  // returns). Lets a data-parallel step sum a layer's gradient across ranks while the backward
  // of the layers below runs. Empty = none.
  using GradsReadyHook = std::function<void(int64_t offset, int64_t count)>;
  void SetGradsReadyHook(GradsReadyHook hook) { grads_ready_ = std::move(hook); }

  int64_t NumMoeLayers() const { return static_cast<int64_t>(moe_layers_.size()); }
  int64_t MoeLayerIndex(int64_t i) const { return moe_layers_[i]; }  // i-th MoE layer's depth
  const RoutingStats& Routing(int64_t i) const;
  // Loss-free balancing biases b_i of the i-th MoE layer (added to scores for selection only):
  // a device array of E floats, zero after Create. Move it with the device's ToHost/FromHost.
  float* BalanceBias(int64_t i);

  // Device memory this model holds (parameters, gradients, activations, scratch), in bytes.
  size_t AllocatedBytes() const;

  struct Layer;  // per-layer parameter offsets and activations (transformer.cc)

 private:
  // The attention shape of a forward or backward over `batch` sequences.
  AttentionShape AttentionShapeFor(int64_t batch) const;
  Transformer(const ModelConfig& config, Device& device, const OpTable<T>& ops, int64_t max_batch);
  absl::Status Allocate();
  void MoeForward(Layer& layer, int64_t tokens, T* x_resid);
  void MoeBackward(Layer& layer, int64_t tokens, T* dresid, T* dh);

  ModelConfig config_;
  Device& device_;
  const OpTable<T>& ops_;
  int64_t max_batch_;
  int64_t batch_ = 0;       // sequences in the last Forward
  double aux_scale_ = 1.0;  // aux_scale of the Backward in progress
  GradsReadyHook grads_ready_;
  std::vector<ParamTensor> tensors_;
  int64_t num_params_ = 0;
  std::vector<std::unique_ptr<Buffer>> buffers_;  // owns every allocation below
  T* params_ = nullptr;
  T* grads_ = nullptr;
  std::vector<std::unique_ptr<Layer>> layers_;
  std::vector<int64_t> moe_layers_;
  struct Globals;
  std::unique_ptr<Globals> g_;
};

extern template class Transformer<float>;
extern template class Transformer<double>;

}  // namespace parity::kernels
