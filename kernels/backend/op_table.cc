#include "kernels/backend/op_table.h"

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

}  // namespace parity::kernels
