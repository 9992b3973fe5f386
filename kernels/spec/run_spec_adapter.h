// The one place the engine meets the API contract: parity.v1.RunSpec (proto/parity/v1/sweep.proto,
// as JSON in the proto3 mapping) → the engine's plain RunConfig. A field left unset takes core's
// default (core/run_spec_defaults.h, the code the planner fills a planned spec with; nothing is
// restated here); anything the engine cannot do is refused with the RunSpec field path.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "kernels/model/config.h"

namespace parity::v1 {
class RunSpec;
}

namespace parity::kernels {

// Threads requested by the spec (training.threads, else resources.cpu_threads), 0 if neither;
// GPUs it asks for (resources.gpus), which picks parity-train's default --device.
struct ParsedRunSpec {
  RunConfig config;
  int threads = 0;
  int gpus = 0;
};

absl::StatusOr<ParsedRunSpec> RunConfigFromRunSpec(const parity::v1::RunSpec& spec);

// Parses JSON (unknown fields are an error, so a typo is caught) and converts; then validates.
absl::StatusOr<ParsedRunSpec> RunConfigFromRunSpecJson(const std::string& json);

}  // namespace parity::kernels
