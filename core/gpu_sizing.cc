#include "core/gpu_sizing.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/accounting.h"
#include "core/gpu_limits.h"
#include "core/micro_batches.h"
#include "core/run_spec_defaults.h"
#include "core/symbols.h"

namespace parity::core {
namespace {

using parity::v1::RunSpec;

constexpr char kBudgetField[] = "resources.gpu_memory_budget_bytes";

// The model a run trains, as its grid point names it ("moe ra20", "baseline dense-1C").
std::string ModelLabel(const RunSpec& run) {
  for (const char* key : {"moe", "baseline"}) {
    if (auto it = run.grid_point().find(key); it != run.grid_point().end()) {
      return absl::StrCat(key, " ", it->second);
    }
  }
  return absl::StrCat("run ", run.name());
}

void AddOnce(std::vector<FieldViolation>& violations, std::string description,
             const char* field = kBudgetField) {
  for (const FieldViolation& v : violations) {
    if (v.field == field && v.description == description) return;
  }
  violations.push_back({field, std::move(description)});
}

}  // namespace

absl::StatusOr<MemoryShape> MemoryShapeOf(const parity::v1::ModelSpec& model, uint32_t seq_len) {
  // The engine derives D_h = D_m/H when a spec leaves it 0; planned specs always set it.
  parity::v1::ModelSpec resolved = model;
  if (resolved.head_dim() == 0 && resolved.num_heads() > 0) {
    resolved.set_head_dim(resolved.d_model() / resolved.num_heads());
  }
  absl::StatusOr<Shape> s = ShapeOf(resolved);
  if (!s.ok()) return s.status();
  MemoryShape m;
  // The embedding, head and logits scale with V; 0 means the byte vocabulary.
  m.vocab = model.vocab_size() == 0 ? kDefaultVocabSize : model.vocab_size();
  m.d_model = s->d_model;
  m.n_heads = s->num_heads;
  m.n_kv_heads = s->num_kv_heads;
  m.head_dim = s->head_dim;
  m.d_ffn = s->ffn_hidden;
  for (uint32_t l = 0; l < model.num_layers(); ++l) m.moe_layer.push_back(IsMoeLayer(model, l));
  m.n_experts = s->num_experts;
  m.top_k = s->top_k;
  m.d_expert = s->expert_hidden;
  m.d_shared = s->shared_expert_hidden;
  if (m.d_shared == 0 && model.architecture() == parity::v1::ARCHITECTURE_MOE &&
      model.moe().layout() == parity::v1::MOE_LAYOUT_ONE_DENSE_SHARED_EXPERT) {
    m.d_shared = m.top_k * m.d_expert;
  }
  m.tied_head = model.tie_embeddings();
  m.seq_len = seq_len;
  return m;
}

MemoryPrecision PrecisionOf(const RunSpec& run) {
  // As the engine resolves it (kernels/train/session.cc ResolvePrecision): unset is bf16 on a
  // GPU and fp32 on the CPU.
  switch (run.training().precision()) {
    case parity::v1::PRECISION_BF16:
      return MemoryPrecision::kBf16;
    case parity::v1::PRECISION_FP32:
      return MemoryPrecision::kFp32;
    default:
      return run.resources().gpus() > 0 ? MemoryPrecision::kBf16 : MemoryPrecision::kFp32;
  }
}

bool SizeRunForGpu(RunSpec& run, std::vector<FieldViolation>& violations) {
  auto& resources = *run.mutable_resources();
  const uint64_t budget = resources.gpu_memory_budget_bytes();
  if (budget == 0 || resources.gpus() == 0) return true;
  auto& training = *run.mutable_training();
  const uint32_t seq = training.sequence_length();
  absl::StatusOr<MemoryShape> shape = MemoryShapeOf(run.model(), seq);
  if (!shape.ok()) {
    AddOnce(violations, absl::StrCat(ModelLabel(run), ": ", shape.status().message()));
    return false;
  }
  shape->recompute = training.recompute_activations();
  const uint64_t usable = static_cast<uint64_t>(std::floor(double(budget) * kUsableBudgetFraction));
  const MemoryPrecision precision = PrecisionOf(run);
  const uint64_t sequences = seq == 0 ? 0 : training.batch_tokens() / seq;
  const uint64_t per_gpu =
      sequences % resources.gpus() == 0 ? sequences / resources.gpus() : sequences;
  auto estimate = [&](uint64_t micro) {
    return EstimateTrainingMemory(*shape, static_cast<int64_t>(micro), precision);
  };
  // The largest micro-batch the share is cut into (core/micro_batches.h) is what needs memory.
  uint64_t chosen = static_cast<uint64_t>(
      LargestMicroBatch(static_cast<int64_t>(per_gpu), training.micro_batch_sequences()));
  if (chosen == 0) {
    // Memory grows with the micro-batch: the largest cap that fits is found by bisection over
    // [1, per_gpu], and the share is then cut as evenly as that cap allows (never above it).
    uint64_t fits = 0, lo = 1, hi = per_gpu;
    while (lo <= hi) {
      const uint64_t mid = lo + (hi - lo) / 2;
      if (estimate(mid).total <= usable) {
        fits = mid, lo = mid + 1;
      } else {
        hi = mid - 1;
      }
    }
    chosen = static_cast<uint64_t>(
        LargestMicroBatch(static_cast<int64_t>(per_gpu), static_cast<int64_t>(fits)));
  } else if (estimate(chosen).total > usable) {
    const MemoryEstimate e = estimate(chosen);
    AddOnce(violations,
            absl::StrFormat("%s: micro_batch_sequences %d of S = %d needs %s (%s), over %g%% of "
                            "the %s budget (%s)",
                            ModelLabel(run), chosen, seq, HumanBytes(e.total), e.Describe(),
                            kUsableBudgetFraction * 100, HumanBytes(budget), HumanBytes(usable)));
    return false;
  }
  if (chosen == 0) {
    const MemoryEstimate e = estimate(1);
    // Activation checkpointing is the remedy to name first when it alone would make it fit.
    MemoryShape recomputed = *shape;
    recomputed.recompute = true;
    const bool recompute_fits =
        !shape->recompute && EstimateTrainingMemory(recomputed, 1, precision).total <= usable;
    AddOnce(violations,
            absl::StrFormat("%s: one sequence of S = %d needs %s (%s), over %g%% of the %s budget "
                            "(%s); %s",
                            ModelLabel(run), seq, HumanBytes(e.total), e.Describe(),
                            kUsableBudgetFraction * 100, HumanBytes(budget), HumanBytes(usable),
                            recompute_fits ? "set training.recompute_activations: true (it fits "
                                             "then), or use a larger GPU"
                                           : "use a larger GPU, a shorter sequence or a smaller "
                                             "model"));
    return false;
  }
  training.set_micro_batch_sequences(static_cast<uint32_t>(chosen));
  resources.set_gpu_memory_bytes(std::max(resources.gpu_memory_bytes(), estimate(chosen).total));
  return true;
}

void ShareBatchAmongRanks(RunSpec& run) {
  const uint32_t ranks = RanksOf(run.resources());
  auto& training = *run.mutable_training();
  const uint64_t seq = training.sequence_length();
  if (ranks <= 1 || seq == 0) return;
  // Whole sequences a rank: ResolveTraining made the batch a multiple of `ranks` sequences.
  const int64_t per_rank = static_cast<int64_t>(training.batch_tokens() / seq / ranks);
  const int64_t micro = training.micro_batch_sequences();
  // Unset: one micro-batch a rank. Set: the largest micro-batch the share is cut into.
  training.set_micro_batch_sequences(
      static_cast<uint32_t>(micro == 0 ? per_rank : LargestMicroBatch(per_rank, micro)));
}

bool CheckCudaShapes(const RunSpec& run, std::vector<FieldViolation>& violations) {
  if (run.resources().gpus() == 0) return true;
  const parity::v1::ModelSpec& model = run.model();
  const std::string section = run.role() == parity::v1::RUN_ROLE_MOE ? "moe" : "dense";
  const uint32_t head_dim = model.head_dim() != 0    ? model.head_dim()
                            : model.num_heads() != 0 ? model.d_model() / model.num_heads()
                                                     : 0;
  bool fits = true;
  if (head_dim > kCudaMaxHeadDim) {
    // The resolved model always carries head_dim; the sweep usually sets it through num_heads.
    const std::string field = section + ".num_heads";
    AddOnce(violations,
            absl::StrFormat(
                "%s: head dimension %d exceeds the %d the CUDA attention kernel takes "
                "(resources.gpus > 0): use more heads (d_model / num_heads, or head_dim, <= %d)",
                ModelLabel(run), head_dim, kCudaMaxHeadDim, kCudaMaxHeadDim),
            field.c_str());
    fits = false;
  }
  if (model.has_moe() && model.moe().num_experts() > kCudaMaxExperts) {
    AddOnce(violations,
            absl::StrFormat("%s: %d experts exceed the %d the CUDA routing kernels take "
                            "(resources.gpus > 0): a smaller granularity or total_ffn_ratio",
                            ModelLabel(run), model.moe().num_experts(), kCudaMaxExperts),
            "grid.moe");
    fits = false;
  }
  return fits;
}

}  // namespace parity::core
