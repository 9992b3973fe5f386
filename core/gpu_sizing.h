// Sizing a planned GPU run to the GPU its sweep names (resources.gpu_memory_budget_bytes): the
// largest micro-batch whose device-memory estimate (memory_estimate.h) fits, and the memory the
// run then asks a worker for. The planner calls SizeRunForGpu once per completed RunSpec.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "core/field_violation.h"
#include "core/memory_estimate.h"
#include "parity/v1/sweep.pb.h"

namespace parity::core {

// Share of the budget a run's estimate may take. The rest is left for what the estimate cannot
// see: the CUDA context and kernels' module images (~0.5–1 GB on an H200), the caching
// allocator's rounding, and NCCL's buffers in a multi-GPU run.
inline constexpr double kUsableBudgetFraction = 0.9;

// The memory-relevant shape of a resolved model at sequence length `seq_len`, as the engine builds
// it (kernels/spec/run_spec_adapter.cc: a 1dense+SE model with no explicit D_se gets K·D_e).
absl::StatusOr<MemoryShape> MemoryShapeOf(const parity::v1::ModelSpec& model, uint32_t seq_len);

// The precision a run trains in: training.precision; unset means bf16 for a run with GPUs and
// fp32 for a CPU run, as the engine resolves it.
MemoryPrecision PrecisionOf(const parity::v1::RunSpec& run);

// For a run with resources.gpus > 0 and resources.gpu_memory_budget_bytes > 0: sets
// training.micro_batch_sequences to the largest micro-batch whose estimate fits in
// kUsableBudgetFraction of the budget, evened out over the sequences each GPU takes per step
// (batch_tokens/S/gpus under data parallelism; batch_tokens/S when gpus does not divide it) as
// core/micro_batches.h cuts them; a micro-batch the spec fixed is evened out the same way and
// checked. Then sets resources.gpu_memory_bytes to the estimate (never below a value the spec
// gave). Other runs are left alone. Returns false after appending a violation naming
// resources.gpu_memory_budget_bytes when nothing fits (an identical violation from an earlier run
// of the same model is not repeated).
bool SizeRunForGpu(parity::v1::RunSpec& run, std::vector<FieldViolation>& violations);

// For a gang (resources.ranks > 1), after SizeRunForGpu: each rank cuts its batch_tokens/S/ranks
// sequences a step into micro-batches (core/micro_batches.h). An unset micro_batch_sequences
// becomes that share (one micro-batch a rank); a set one becomes the largest micro-batch the
// share is cut into (itself when it divides the share). Other runs are left alone.
void ShareBatchAmongRanks(parity::v1::RunSpec& run);

// For a run with resources.gpus > 0: its resolved shapes within what the CUDA kernels take
// (core/gpu_limits.h) — head dimension at most kCudaMaxHeadDim (a violation naming dense. or
// moe.num_heads) and at most kCudaMaxExperts experts (naming grid.moe). Returns false
// after appending the violation (once per model); CPU runs are left alone.
bool CheckCudaShapes(const parity::v1::RunSpec& run, std::vector<FieldViolation>& violations);

}  // namespace parity::core
