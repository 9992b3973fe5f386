#include "kernels/backend/op_table.h"

#include "kernels/backend/op_table_bf16.h"

namespace parity::kernels {

const char* OpName(OpKind kind) {
  switch (kind) {
#define PARITY_NAME_PAIRED(k, f, b, fs, bs) \
  case OpKind::k:                           \
    return #f;
#define PARITY_NAME_UPDATE(k, f, fs) \
  case OpKind::k:                    \
    return #f;
    PARITY_OPS(PARITY_NAME_PAIRED, float)
    PARITY_UPDATE_OPS(PARITY_NAME_UPDATE, float)
#undef PARITY_NAME_PAIRED
#undef PARITY_NAME_UPDATE
    case OpKind::kCount:
      break;
  }
  return "unknown";
}

bool Bf16OpTable::Complete() const {
  const bool set[] = {
      embedding_forward != nullptr,     embedding_backward != nullptr,
      rmsnorm_forward != nullptr,       rmsnorm_backward != nullptr,
      matmul_forward != nullptr,        matmul_forward_f32 != nullptr,
      matmul_backward != nullptr,       matmul_backward_f32 != nullptr,
      swiglu_forward != nullptr,        swiglu_backward != nullptr,
      rope_forward != nullptr,          rope_backward != nullptr,
      attention_forward != nullptr,     attention_backward != nullptr,
      cross_entropy_forward != nullptr, cross_entropy_backward != nullptr,
      route_forward != nullptr,         route_backward != nullptr,
      permute_forward != nullptr,       permute_backward != nullptr,
      combine_forward != nullptr,       combine_backward != nullptr,
      routing_plan != nullptr,          bias_update != nullptr,
      sum_squares != nullptr,           adamw_update != nullptr,
      cast_to_bf16 != nullptr,
  };
  for (const bool entry : set) {
    if (!entry) return false;
  }
  // Kept apart from the list above: its two-column layout has no room for these names.
  return grouped_matmul_forward != nullptr && grouped_matmul_backward != nullptr;
}

}  // namespace parity::kernels
