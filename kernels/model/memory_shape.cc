#include "kernels/model/memory_shape.h"

namespace parity::kernels {

core::MemoryShape MemoryShapeOf(const ModelConfig& model) {
  core::MemoryShape m;
  m.d_model = model.d_model;
  m.n_heads = model.n_heads;
  m.n_kv_heads = model.n_kv_heads;
  m.head_dim = model.head_dim();
  m.d_ffn = model.d_ffn;
  for (int64_t l = 0; l < model.n_layers; ++l) m.moe_layer.push_back(model.IsMoeLayer(l));
  m.n_experts = model.n_experts;
  m.top_k = model.top_k;
  m.d_expert = model.d_expert;
  m.d_shared = model.SharedDim();
  m.vocab = model.vocab_size;
  m.tied_head = model.head == HeadTying::kTied;
  m.seq_len = model.seq_len;
  return m;
}

core::MemoryPrecision MemoryPrecisionOf(Precision precision) {
  return precision == Precision::kBf16 ? core::MemoryPrecision::kBf16
                                       : core::MemoryPrecision::kFp32;
}

uint64_t EstimatedDeviceBytes(const RunConfig& config, Workspace workspace) {
  core::MemoryShape shape = MemoryShapeOf(config.model);
  shape.recompute = config.train.recompute_activations;
  const core::MemoryEstimate e = core::EstimateTrainingMemory(shape, config.train.batch_size,
                                                              MemoryPrecisionOf(config.precision));
  return workspace == Workspace::kCuda ? e.total : e.BufferBytes();
}

}  // namespace parity::kernels
