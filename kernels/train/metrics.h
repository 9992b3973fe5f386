// Telemetry of a training process (internal to train/): throughput over the steps since the last
// line and over the whole process, and the JSON lines of kernels/README.md ("parity-train
// interface"): "metrics" per logged step and the closing "summary".
#pragma once

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

#include "kernels/train/session.h"
#include "kernels/train/step.h"
#include "kernels/train/trainer.h"

namespace parity::kernels {

struct Telemetry {
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  int64_t trained_steps = 0;  // in this process
  double model_flops = 0, total_flops = 0, seconds = 0, data_wait_seconds = 0, comm_seconds = 0;
  // Since the previous metrics line.
  double window_seconds = 0, window_flops = 0;
  int64_t window_tokens = 0;

  void Add(const StepResult& step, int64_t step_tokens);
  void ResetWindow() { window_seconds = window_flops = 0, window_tokens = 0; }
  double WallSeconds() const;
};

// The "metrics" line of the step just trained; at evaluation steps `eval_bpc` holds each reported
// set's BPC in the corpus's report order (else it is empty): "val_bpc" (the first) and
// "eval_bpc" {name: bpc}.
nlohmann::json MetricsLine(const Session& session, const StepResult& step,
                           const Telemetry& telemetry, const std::vector<double>& eval_bpc);

// The "summary" line; fills the measured fields of `summary` it reports.
nlohmann::json SummaryLine(const Session& session, const Telemetry& telemetry,
                           TrainSummary& summary);

}  // namespace parity::kernels
