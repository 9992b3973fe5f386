// What the training loop (train/) needs of a model, whatever precision its activations are in:
// a Transformer<float> (fp32, the parity mode) or a Transformer<float, Bf16> (the bf16 mode, fp32
// master weights). The interface is over the master scalar T: parameters, gradients and the
// optimizer's arrays are T in every mode. CreateModel picks the implementation for a precision.
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
#include "kernels/model/step_profile.h"

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
class Model {
 public:
  virtual ~Model() = default;

  virtual const ModelConfig& config() const = 0;
  virtual int64_t NumParams() const = 0;
  virtual const std::vector<ParamTensor>& Tensors() const = 0;
  // The master parameters (device memory). Writing through this pointer is how the optimizer,
  // a checkpoint load or a broadcast changes them; a model that keeps a lower-precision copy for
  // its GEMMs refreshes it before its next Forward, since every call may be followed by writes.
  virtual T* Params() = 0;
  virtual T* Grads() = 0;

  // N(0, 0.02) matrices (residual output projections scaled by 1/√(2L)), unit norm weights.
  virtual void InitParams(Rng& rng) = 0;
  virtual void ZeroGrads() = 0;

  // Runs `batch` sequences of S tokens (host arrays, batch·S each) and saves activations.
  virtual ForwardResult Forward(const int32_t* tokens, const int32_t* targets, int64_t batch) = 0;
  // Backward of the last Forward, ACCUMULATING into Grads():
  //   grads += ∂(ce_scale·Σ_t ce_t + aux_scale·Σ_layers(aux + z))/∂θ.
  virtual void Backward(double ce_scale, double aux_scale) = 0;

  // Called by Backward as soon as a layer's weight gradients are complete, with the layer's
  // contiguous range of the flat gradient [offset, offset + count), deepest layer first; the
  // embedding, final norm and head are not reported (they are complete only when Backward
  // returns). Lets a data-parallel step sum a layer's gradient across ranks while the backward
  // of the layers below runs. Empty = none.
  using GradsReadyHook = std::function<void(int64_t offset, int64_t count)>;
  virtual void SetGradsReadyHook(GradsReadyHook hook) = 0;

  virtual int64_t NumMoeLayers() const = 0;
  virtual int64_t MoeLayerIndex(int64_t i) const = 0;  // i-th MoE layer's depth
  virtual const RoutingStats& Routing(int64_t i) const = 0;
  // Loss-free balancing biases b_i of the i-th MoE layer (added to scores for selection only):
  // a device array of E floats, zero after creation. Move it with the device's ToHost/FromHost.
  virtual float* BalanceBias(int64_t i) = 0;

  // Device memory this model holds (parameters, weight copy, gradients, activations, scratch).
  virtual size_t AllocatedBytes() const = 0;

  // While set, Forward and Backward synchronise the device around each op of a timed bucket and
  // add its seconds to `profile` (step_profile.h); null (the default) times nothing.
  virtual void SetProfile(StepProfile* profile) = 0;
};

// A fp32-master model in `precision` (kFp32 or kBf16; resolved, never kUnspecified), with
// activation checkpointing when `recompute` (Transformer::Create). Unimplemented when the device
// has no kernels for it.
absl::StatusOr<std::unique_ptr<Model<float>>> CreateModel(const ModelConfig& config,
                                                          Precision precision, Device& device,
                                                          int64_t max_batch,
                                                          bool recompute = false);

}  // namespace parity::kernels
