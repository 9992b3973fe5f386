// The text a model's layout goes by in results: the runs.layout column, the results view's filter,
// the export's `layout` column (docs/export.md). Header-only, messages only, so that the store
// interfaces (server/store/) and the export (export/) share it without linking core.
#pragma once

#include <string>

#include "parity/v1/model.pb.h"

namespace parity::core {

inline std::string ModelLayoutName(const v1::ModelSpec& model) {
  if (model.architecture() != v1::ARCHITECTURE_MOE) return "dense";
  switch (model.moe().layout()) {
    case v1::MOE_LAYOUT_ALL_MOE:
      return "all-moe";
    case v1::MOE_LAYOUT_INTERLEAVED:
      return "interleaved";
    default:
      return "1dense+SE";  // the default layout (docs/domain.md)
  }
}

}  // namespace parity::core
