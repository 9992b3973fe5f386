// What the scheduler tests submit and report, built by hand so the tests do not hinge on the
// planner: run and sweep specs, a stub planner (and a sweep whose analysis has a known answer),
// devices and metric points. No store and no PostgreSQL: the logic tests on the memory store
// (scheduler_logic_fixture.h) and the PostgreSQL ones (scheduler_fixture.h) share them.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/field_violation.h"
#include "parity/v1/run.pb.h"
#include "parity/v1/sweep.pb.h"
#include "parity/v1/worker.pb.h"

namespace parity::server::testing {

// A planned run with its accounting filled as the planner would.
inline v1::RunSpec MakeRunSpec(const std::string& name, v1::RunRole role, uint32_t gpus = 0) {
  v1::RunSpec run;
  run.set_name(name);
  run.set_role(role);
  run.mutable_model()->set_architecture(role == v1::RUN_ROLE_MOE ? v1::ARCHITECTURE_MOE
                                                                 : v1::ARCHITECTURE_DENSE);
  run.mutable_model()->set_d_model(256);
  run.mutable_model()->set_num_layers(4);
  if (role == v1::RUN_ROLE_MOE) {
    run.mutable_model()->mutable_moe()->set_num_experts(8);
    run.mutable_model()->mutable_moe()->set_top_k(2);
    run.mutable_model()->mutable_moe()->set_expert_hidden(128);
  }
  v1::Accounting* a = run.mutable_accounting();
  a->set_params(3'000'000);
  a->set_active_params(role == v1::RUN_ROLE_MOE ? 600'000 : 3'000'000);
  a->set_activation_rate(role == v1::RUN_ROLE_MOE ? 0.2 : 1.0);
  a->set_flops_per_token(6.0 * a->active_params());
  a->set_tokens(1'000'000);
  a->set_unique_tokens(1'000'000);
  a->set_epochs(1.0);
  a->set_compute_flops(a->flops_per_token() * 1e6);
  run.set_compute_budget("C1");
  run.set_compute_multiple(1.0);
  run.set_data_variant("unique");
  run.mutable_training()->set_seed(0);
  run.mutable_resources()->set_cpu_threads(1);
  run.mutable_resources()->set_gpus(gpus);
  return run;
}

// A spec the stub planner expands: its label "runs" says how many runs (default 4), and
// "gpus" how many GPUs each needs. The first run is the 1C dense baseline.
inline v1::SweepSpec MakeSweepSpec(const std::string& name, int runs = 4, int gpus = 0) {
  v1::SweepSpec spec;
  spec.set_name(name);
  (*spec.mutable_labels())["runs"] = absl::StrCat(runs);
  (*spec.mutable_labels())["gpus"] = absl::StrCat(gpus);
  return spec;
}

// A sweep whose analysis has a known answer (the stub planner expands it when the spec has the
// label "analysis"): dense baselines at C = 1e15, 2e15 and 4e15 FLOPs (three budgets, so the
// dense law can be fitted), MoE runs at C = 1e15 with r_a = 0.1, 0.2, 0.4 and seeds 0 and 1
// (data variant "unique") and one at r_a = 0.2 with data variant "strict". Finished with
// SyntheticBpc(), the dense law is L(C) = 10·C^-0.05 + 0.5 exactly, the MoE runs' seeds sit
// ±0.001 around a mean that at r_a = 0.2 reaches the dense loss of 2·C (EL = 2), and the
// "unique" group's BPC is a parabola in ln r_a with its minimum at r_a = 0.2.
inline v1::SweepSpec AnalysisSweepSpec(const std::string& name) {
  v1::SweepSpec spec;
  spec.set_name(name);
  (*spec.mutable_labels())["analysis"] = "1";
  return spec;
}
constexpr int kAnalysisSweepRuns = 10;
constexpr double kLawA = 10, kLawB = 0.05, kLawC = 0.5, kSeedOffset = 0.001;
inline double DenseLaw(double compute) { return kLawA * std::pow(compute, -kLawB) + kLawC; }
inline double SyntheticBpc(const v1::RunSpec& run) {
  const double c = run.accounting().compute_flops();
  if (run.role() == v1::RUN_ROLE_DENSE_BASELINE) return DenseLaw(c);
  const double t = std::log(run.accounting().activation_rate() / 0.2);
  const double seed = run.training().seed() == 0 ? kSeedOffset : -kSeedOffset;
  return DenseLaw(2 * c) + 0.05 * t * t + seed;
}

inline std::vector<v1::RunSpec> AnalysisRuns() {
  std::vector<v1::RunSpec> runs;
  auto add = [&](const std::string& name, v1::RunRole role, double compute, double rate,
                 const std::string& variant, uint64_t seed = 0) {
    v1::RunSpec run = MakeRunSpec(name, role);
    run.mutable_accounting()->set_compute_flops(compute);
    run.mutable_accounting()->set_activation_rate(rate);
    run.set_compute_multiple(compute / 1e15);
    run.set_data_variant(variant);
    run.mutable_training()->set_seed(seed);
    run.set_predicted_efficiency_leverage(role == v1::RUN_ROLE_MOE ? 1.5 : 0);
    runs.push_back(std::move(run));
  };
  add("dense-1C", v1::RUN_ROLE_DENSE_BASELINE, 1e15, 1.0, "unique");
  add("dense-2C", v1::RUN_ROLE_DENSE_BASELINE, 2e15, 1.0, "unique");
  add("dense-4C", v1::RUN_ROLE_DENSE_BASELINE, 4e15, 1.0, "unique");
  for (const char* rate : {"0.1", "0.2", "0.4"}) {
    for (uint64_t seed : {0, 1}) {
      add(absl::StrCat("moe-r", rate, "-s", seed), v1::RUN_ROLE_MOE, 1e15, std::stod(rate),
          "unique", seed);
    }
  }
  add("moe-r0.2-strict", v1::RUN_ROLE_MOE, 1e15, 0.2, "strict");
  return runs;
}

inline absl::StatusOr<std::vector<v1::RunSpec>> StubPlanner(const v1::SweepSpec& spec) {
  if (spec.labels().count("analysis") > 0) return AnalysisRuns();
  if (spec.name().empty()) {
    core::FieldViolation violation{"name", "required"};
    return core::InvalidArgumentWithViolations("invalid sweep spec", {&violation, 1});
  }
  int runs = 4, gpus = 0;
  if (auto it = spec.labels().find("runs"); it != spec.labels().end()) {
    (void)absl::SimpleAtoi(it->second, &runs);
  }
  if (auto it = spec.labels().find("gpus"); it != spec.labels().end()) {
    (void)absl::SimpleAtoi(it->second, &gpus);
  }
  std::vector<v1::RunSpec> planned;
  for (int i = 0; i < runs; ++i) {
    planned.push_back(MakeRunSpec(absl::StrCat(i == 0 ? "dense-1C" : "moe", "-", i),
                                  i == 0 ? v1::RUN_ROLE_DENSE_BASELINE : v1::RUN_ROLE_MOE,
                                  static_cast<uint32_t>(gpus)));
    planned.back().set_sweep_name(spec.name());
    // A gang (label "ranks"): that many ranks of 8 CPU threads each, one per CpuDevice().
    if (auto it = spec.labels().find("ranks"); it != spec.labels().end()) {
      uint32_t ranks = 1;
      (void)absl::SimpleAtoi(it->second, &ranks);
      planned.back().mutable_resources()->set_ranks(ranks);
      planned.back().mutable_resources()->set_cpu_threads(8);
    }
  }
  return planned;
}

inline v1::Device CpuDevice(uint32_t threads = 8) {
  v1::Device device;
  device.set_kind(v1::DEVICE_KIND_CPU);
  device.set_threads(threads);
  return device;
}

inline v1::Device GpuDevice(uint32_t index, uint64_t memory = 80ull << 30) {
  v1::Device device;
  device.set_kind(v1::DEVICE_KIND_CUDA);
  device.set_index(index);
  device.set_memory_bytes(memory);
  return device;
}

inline v1::MetricPoint Point(uint64_t step, double val_bpc = -1) {
  v1::MetricPoint point;
  point.set_attempt(1);
  point.set_step(step);
  point.set_tokens(step * 1024);
  point.set_unique_tokens(step * 1024);
  point.set_train_bpc(2.0 - step * 0.001);
  if (val_bpc >= 0) point.set_val_bpc(val_bpc);
  point.set_learning_rate(1e-3);
  return point;
}

// Point with one MoE layer's expert load (layer 1, one share): only for a MoE run, since
// ReportMetrics refuses expert loads beyond the run's layers and experts (a dense run takes none).
inline v1::MetricPoint MoePoint(uint64_t step, double val_bpc = -1) {
  v1::MetricPoint point = Point(step, val_bpc);
  v1::ExpertLoadStats* load = point.add_expert_load();
  load->set_layer(1);
  load->set_min_share(0.1);
  load->set_max_share(0.2);
  load->add_shares(0.1);
  return point;
}

}  // namespace parity::server::testing
