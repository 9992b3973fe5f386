// How long planning a realistic sweep takes: 8 activation rates × 3 budgets × 2 data variants ×
// 5 seeds = 240 MoE runs plus 2 baselines × 3 × 2 × 5 = 60 dense runs, 300 in all. Planning sits
// on the SubmitSweep and PlanSweep request paths, so it must stay well under 50 ms.
#include <cstdlib>
#include <iostream>

#include "benchmark/benchmark.h"
#include "core/planner.h"
#include "core/spec_loader.h"

namespace {

constexpr char kSpec[] = R"(
name: bench-300
moe:
  d_model: 1536
  num_layers: 20
  num_heads: 12
  ffn_ratio: 2.75
  moe: {layout: 1dense+SE, total_ffn_ratio: 14}
dense: {ffn_ratio: 2.6875, aspect_ratio: 100, head_dim: 128}
training: {rule: step_law, sequence_length: 2048}
data: {corpus: pretraining-mix}
grid:
  moe:
    - {target_activation_rate: 0.12}
    - {target_activation_rate: 0.16}
    - {target_activation_rate: 0.20}
    - {target_activation_rate: 0.25}
    - {target_activation_rate: 0.30}
    - {target_activation_rate: 0.36}
    - {target_activation_rate: 0.45}
    - {target_activation_rate: 0.60}
  compute: [{compute_flops: 3e20}, {compute_flops: 6e20}, {compute_flops: 1.2e21}]
  data: [{reuse: unique}, {reuse: strict}]
  seeds: [0, 1, 2, 3, 4]
baselines: [{compute_multiple: 1}, {compute_multiple: 2}]
)";

parity::v1::SweepSpec LoadSpec() {
  absl::StatusOr<parity::v1::SweepSpec> spec =
      parity::core::ParseSweepSpec(kSpec, parity::core::SpecFormat::kYaml);
  if (!spec.ok()) {
    std::cerr << spec.status() << "\n";
    std::abort();
  }
  return *spec;
}

// Validation, shape solving and grid expansion of the parsed spec.
void BM_PlanSweep300(benchmark::State& state) {
  const parity::v1::SweepSpec spec = LoadSpec();
  size_t runs = 0;
  for (auto _ : state) {
    absl::StatusOr<std::vector<parity::v1::RunSpec>> planned = parity::core::PlanSweep(spec);
    if (!planned.ok()) {
      state.SkipWithError("planning failed");
      return;
    }
    runs = planned->size();
    benchmark::DoNotOptimize(planned);
  }
  state.counters["runs"] = double(runs);
}
BENCHMARK(BM_PlanSweep300)->Unit(benchmark::kMillisecond);

// The same including the YAML parse, as `parity plan` and SubmitSweep see it.
void BM_ParseAndPlanSweep300(benchmark::State& state) {
  for (auto _ : state) {
    absl::StatusOr<parity::v1::SweepSpec> spec =
        parity::core::ParseSweepSpec(kSpec, parity::core::SpecFormat::kYaml);
    absl::StatusOr<std::vector<parity::v1::RunSpec>> planned = parity::core::PlanSweep(*spec);
    benchmark::DoNotOptimize(planned);
  }
}
BENCHMARK(BM_ParseAndPlanSweep300)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
