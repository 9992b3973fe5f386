// The spec loader's fuzz body, shared by the YAML and JSON targets: text → ParseSweepSpec →
// ValidateSweepSpec → (a small valid spec) PlanSweep, with the loader's promises checked on the
// way:
//   * a refusal is INVALID_ARGUMENT carrying at least one field violation (what the CLI prints);
//   * a spec that loads, written back as proto JSON, loads again as JSON to the same message;
//   * a spec that validates plans or is refused with violations, never another error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "core/field_violation.h"
#include "core/planner.h"
#include "core/spec_loader.h"
#include "core/validation.h"
#include "google/protobuf/stubs/logging.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"

namespace parity::fuzz {

inline void Check(bool condition, const char* what, const std::string& detail = "") {
  if (condition) return;
  fprintf(stderr, "fuzz check failed: %s %s\n", what, detail.c_str());
  std::abort();
}

inline void CheckRefusal(const absl::Status& status, const char* what) {
  Check(status.code() == absl::StatusCode::kInvalidArgument, what, status.ToString());
  Check(!core::FieldViolationsOf(status).empty(), what, "refused without field violations");
}

// Protobuf logs every refused non-UTF-8 string; at thousands of inputs a second that is noise.
inline void QuietLogs() { google::protobuf::SetLogHandler(nullptr); }

inline void FuzzSpecText(const uint8_t* data, size_t size, core::SpecFormat format) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<v1::SweepSpec> spec = core::ParseSweepSpec(text, format);
  if (!spec.ok()) {
    CheckRefusal(spec.status(), "ParseSweepSpec");
    return;
  }

  // Round trip through the loader's own JSON path: what protobuf writes, the loader reads.
  std::string json;
  google::protobuf::util::JsonPrintOptions print;
  print.preserve_proto_field_names = (size % 2) == 0;  // both spellings of keys
  Check(google::protobuf::util::MessageToJsonString(*spec, &json, print).ok(), "MessageToJson");
  absl::StatusOr<v1::SweepSpec> again = core::ParseSweepSpec(json, core::SpecFormat::kJson);
  Check(again.ok(), "JSON round trip refused", again.status().ToString() + "\n" + json);
  std::string diff;
  google::protobuf::util::MessageDifferencer differ;
  differ.ReportDifferencesToString(&diff);
  Check(differ.Compare(*spec, *again), "JSON round trip differs", diff + "\n" + json);

  if (!core::ValidateSweepSpec(*spec).empty()) return;
  // Planning is the expensive part (the shape solver scans); small grids keep each input quick.
  // Validation already refuses more than 10,000 runs or 1,000 MoE points per sweep.
  int points = spec->grid().moe_size() + spec->baselines_size();
  int64_t runs = int64_t{points} * std::max(spec->grid().compute_size(), 1) *
                 std::max(spec->grid().data_size(), 1) * std::max(spec->grid().seeds_size(), 1);
  if (points > 8 || runs > 256) return;
  absl::StatusOr<std::vector<v1::RunSpec>> planned = core::PlanSweep(*spec);
  if (!planned.ok()) CheckRefusal(planned.status(), "PlanSweep");
}

}  // namespace parity::fuzz
