// Evaluation sets: the named held-out texts a run is evaluated on ("validation" first, then e.g.
// "code"). The engine reports BPC per set (MetricPoint.eval_bpc, RunSummary.final_eval_bpc); a
// worker and the scheduler hold what it reports to one rule, here, since a set's name becomes a
// JSON key, a CSV column ("final_bpc.<set>") and a dashboard legend: a plain name
// ([A-Za-z0-9][A-Za-z0-9._-]{0,63}, no ".."), at most kMaxEvalSets sets, finite BPC.
#pragma once

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/map.h"

namespace parity::core {

// The primary evaluation set: DataSpec.eval_sets' default and the one val_bpc reports.
inline constexpr absl::string_view kPrimaryEvalSet = "validation";
inline constexpr size_t kMaxEvalSets = 16;
inline constexpr size_t kMaxEvalSetNameBytes = 64;

// OK for a plain set name; otherwise INVALID_ARGUMENT whose message is the reason and the remedy
// (the caller names the field).
absl::Status CheckEvalSetName(absl::string_view name);

// OK when `bpc` (set name → bits per byte) has at most kMaxEvalSets entries, each a plain name
// with a finite, non-negative value; otherwise INVALID_ARGUMENT naming the first offending key.
absl::Status CheckEvalBpc(const google::protobuf::Map<std::string, double>& bpc);

}  // namespace parity::core
