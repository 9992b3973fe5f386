// Dataset names: what a spec's data.corpus holds. A researcher names a dataset; only the worker
// turns the name into a file, inside its own --corpus-dir (worker/dataset_resolver.h). So the name
// is never a path: no '/', no "..", no leading dot, nothing but [A-Za-z0-9._-], at most 128
// characters. The one rule, shared by validation at submission and the worker's resolver.
#pragma once

#include <cstddef>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace parity::core {

inline constexpr size_t kMaxDatasetNameBytes = 128;

// What a refused name gets told to do instead.
inline constexpr absl::string_view kDatasetNameRemedy =
    "name a dataset in the worker's --corpus-dir (e.g. \"kjv\"), not a path";

// OK for a plain dataset name ([A-Za-z0-9][A-Za-z0-9._-]{0,127}, no ".."); otherwise
// INVALID_ARGUMENT whose message is the reason and the remedy (the caller names the field).
absl::Status CheckDatasetName(absl::string_view name);

}  // namespace parity::core
