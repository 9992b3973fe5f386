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
};

struct ForwardResult {
  double ce = 0;   // mean cross-entropy over the micro-batch's tokens, nats
  double aux = 0;  // Σ over MoE layers of the balance loss λ·E·Σ f_i·P_i
  double z = 0;    // Σ over MoE layers of the router z-loss λ_z·mean(lse²)
};

// One micro-batch of a queued Forward: its token ids in, its losses out, all in HOST memory
// (Device::AllocateHost's, so that the copies do not wait). Forward queues the copies on the
// device's stream: the ids must stay unchanged, and the losses are valid, only once the stream has
// been synchronised after the call. S is the model's seq_len.
template <typename T>
struct MicroBatch {
  const int32_t* tokens = nullptr;   // [batch·S]
  const int32_t* targets = nullptr;  // [batch·S]
  int64_t batch = 0;                 // sequences, at most the model's max_batch
  T* token_loss = nullptr;           // out [batch·S]: each token's cross-entropy, nats
  double* route_losses = nullptr;    // out [2·NumMoeLayers()]: each MoE layer's {aux, z}; unused
                                     // (may be null) in a model without MoE layers
};

// The means a ForwardResult reports from the losses a Forward delivered: cross-entropy summed in
// double in token order, then divided by the token count; aux and z summed over the layers in
// order. The one summation every caller uses, so the reported bits do not depend on the path.
template <typename T>
ForwardResult SumLosses(const T* token_loss, int64_t tokens, const double* route_losses,
                        int64_t moe_layers) {
  ForwardResult r;
  double sum = 0.0;
  for (int64_t i = 0; i < tokens; ++i) sum += token_loss[i];
  r.ce = sum / static_cast<double>(tokens);
  for (int64_t i = 0; i < moe_layers; ++i) {
    r.aux += route_losses[2 * i];
    r.z += route_losses[2 * i + 1];
  }
  return r;
}

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

  // Queues the forward of `mb` on the device (the ids' upload, every op, the losses' copies back)
  // and saves its activations for Backward. The host waits for nothing here, except in each MoE
  // layer for its routing plan's offsets (the grouped expert GEMMs take their shapes from the
  // host): a dense model's training step waits once for all of its micro-batches.
  virtual void Forward(const MicroBatch<T>& mb) = 0;
  // Forward of `batch` sequences from any host arrays (batch·S each), waiting for the device and
  // returning SumLosses of the result: for tests and one-off evaluations.
  virtual ForwardResult ForwardAndWait(const int32_t* tokens, const int32_t* targets,
                                       int64_t batch) = 0;
  // Forward(mb) then Backward(ce_scale, aux_scale): one training micro-batch. With graph replay
  // on (SetGraphReplay), a model whose micro-batch is pure device work — no MoE layer (its routing
  // plan is read on the host), no grads-ready hook, no profile — runs the first micro-batch of each
  // (batch, ce_scale, aux_scale) as usual, records the second's ops as a Graph
  // (Device::Record) and replays that for every later one: on CUDA one launch instead of
  // hundreds. The same ops on the same inputs, so the same bits; the FLOPs counted are the first
  // run's. The token upload and the losses' copies stay outside the recording. Errors: the
  // device's, when it cannot record or launch.
  virtual absl::Status TrainMicroBatch(const MicroBatch<T>& mb, double ce_scale,
                                       double aux_scale) = 0;
  // Off by default: the recording's correctness on a GPU is checked by bench/gpu_check.sh.
  virtual void SetGraphReplay(bool on) = 0;
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
