// The engine's own config as the planner's device-memory estimate takes it
// (core/memory_estimate.h), so that a run reports the estimate for exactly what it trains beside
// the peak its device saw (kernels/train/metrics.cc). No protobuf: the engine maps its resolved
// ModelConfig itself, and kernels/tests/memory_estimate_test.cc checks the mapping equals
// core::MemoryShapeOf of the spec.
#pragma once

#include <cstdint>

#include "core/memory_estimate.h"
#include "kernels/model/config.h"

namespace parity::kernels {

// The resolved shape: D_h = D_m/H, D_se as the layout resolves it, each layer's MoE placement.
core::MemoryShape MemoryShapeOf(const ModelConfig& model);

// The estimate's precision for a resolved one; kUnspecified (never in a session) counts as fp32.
core::MemoryPrecision MemoryPrecisionOf(Precision precision);

// Whether the estimate carries the workspace constant (core::kWorkspaceBytes: the CUDA context,
// cuBLAS workspaces, the pool's slack) that only a GPU process has.
enum class Workspace { kNone, kCuda };

// The bytes a run of `config` (precision resolved, config.train.batch_size sequences per
// micro-batch) is estimated to hold on one device: the planner's figure (MemoryEstimate::total)
// on a GPU, the model buffers alone (BufferBytes) on the CPU, which has no such workspace.
uint64_t EstimatedDeviceBytes(const RunConfig& config, Workspace workspace);

}  // namespace parity::kernels
