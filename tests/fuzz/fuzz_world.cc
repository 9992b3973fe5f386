#include "tests/fuzz/fuzz_world.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "core/planner.h"
#include "core/spec_loader.h"
#include "core/summary_check.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/reflection.h"
#include "google/protobuf/stubs/logging.h"
#include "spdlog/spdlog.h"

namespace parity::fuzz {

const char kSeedSweepYaml[] = R"(name: fuzz-seed
moe:
  d_model: 64
  num_layers: 2
  num_heads: 4
  moe: {layout: all-moe, total_ffn_ratio: 16, granularity: 4, router: {balance: aux_loss}}
dense: {d_model: 128, num_layers: 2, num_heads: 8, ffn_hidden: 384}
training:
  rule: explicit
  learning_rate: 3e-3
  batch_tokens: 64
  sequence_length: 64
  log_every_steps: 10
  eval_every_steps: 50
  eval_tokens: 8192
data: {corpus: kjv, validation_fraction: 0.01}
grid:
  moe: [{target_activation_rate: 0.25}, {target_activation_rate: 0.6}]
  compute: [{name: C1, compute_flops: 2e10}]
  data: [{name: unique, reuse: unique}]
  seeds: [0, 1]
baselines: [{name: dense-1C, compute_multiple: 1}]
resources: {cpu_threads: 1}
)";

namespace {

[[noreturn]] void Die(const std::string& what) {
  fprintf(stderr, "fuzz world: %s\n", what.c_str());
  std::abort();
}

template <typename T>
T Must(absl::StatusOr<T> value, const char* what) {
  if (!value.ok()) Die(absl::StrCat(what, ": ", value.status().ToString()));
  return *std::move(value);
}

// The seed sweep, planned once per process.
const std::pair<v1::SweepSpec, std::vector<v1::RunSpec>>& SeedPlan() {
  static const auto* plan = [] {
    v1::SweepSpec spec =
        Must(core::ParseSweepSpec(kSeedSweepYaml, core::SpecFormat::kYaml), "seed spec");
    std::vector<v1::RunSpec> runs = Must(core::PlanSweep(spec), "seed plan");
    return new std::pair<v1::SweepSpec, std::vector<v1::RunSpec>>(std::move(spec), std::move(runs));
  }();
  return *plan;
}

v1::MetricPoint Point(uint64_t step, bool eval, bool moe) {
  v1::MetricPoint point;
  point.set_attempt(1);
  point.set_step(step);
  point.set_epoch(step / 100.0);
  point.set_tokens(step * 64);
  point.set_unique_tokens(step * 64);
  point.set_flops(step * 64 * 1e6);
  point.set_train_bpc(4.0 - step * 0.01);
  if (eval) point.set_val_bpc(4.1 - step * 0.01);
  point.set_learning_rate(3e-3);
  point.set_grad_norm(1.5);
  point.set_tokens_per_second(1e5);
  point.set_flops_per_second(1e11);
  if (moe) {
    v1::ExpertLoadStats* load = point.add_expert_load();
    load->set_layer(0);
    load->set_min_share(0.1);
    load->set_max_share(0.4);
    for (double share : {0.1, 0.2, 0.3, 0.4}) load->add_shares(share);
  }
  return point;
}

}  // namespace

void QuietLogs() {
  google::protobuf::SetLogHandler(nullptr);
  spdlog::set_level(spdlog::level::off);
}

FuzzWorld::FuzzWorld()
    : store_(std::make_unique<server::MemoryRunStore>([this] { return clock_.Now(); })) {
  server::SchedulerOptions options;
  options.max_lease_wait = absl::ZeroDuration();  // LeaseRun answers after one try
  options.watch_poll_interval = absl::ZeroDuration();
  scheduler_ = std::make_unique<server::testing::SchedulerUnderTest>(
      *store_, signal_, clock_, &core::PlanSweep, options, nullptr);
  Seed();
}

void FuzzWorld::Reset() {
  store_->Reset();
  Seed();
}

void FuzzWorld::Seed() {
  const auto& [spec, runs] = SeedPlan();
  server::NewSweep sweep{spec, runs, "fuzz", ""};
  const server::CreatedSweep created = Must(store_->CreateSweep(sweep), "seed sweep");
  server::WorkerRegistration registration;
  registration.hostname = "fuzz-host";
  v1::Device& cpu = registration.devices.emplace_back();
  cpu.set_kind(v1::DEVICE_KIND_CPU);
  cpu.set_threads(8);
  const v1::Worker worker = Must(store_->RegisterWorker(registration), "seed worker");
  server::LeaseRequest lease{
      .worker_id = worker.worker_id(), .offer = {.cpu_threads = 8}, .ttl = absl::Minutes(10)};

  // Three runs leased: two finish with metrics, the third keeps running with metrics.
  std::vector<server::LeasedRun> leased;
  for (int i = 0; i < 2; ++i) {
    std::optional<server::LeasedRun> run = Must(store_->LeaseNextRun(lease), "seed lease");
    if (!run) Die("seed lease: no run");
    leased.push_back(std::move(*run));
  }
  // The running one through the Scheduler, for the lease secret its writes must carry.
  v1::LeaseRunRequest lease_request;
  lease_request.set_worker_id(worker.worker_id());
  *lease_request.add_free_devices() = cpu;
  v1::LeaseRunResponse running =
      Must(scheduler_->LeaseRun(lease_request, clock_.Now() + absl::Hours(1), {}), "seed lease");
  if (!running.has_lease()) Die("seed lease: no run for the scheduler");
  seeded_lease_secret_ = running.lease_secret();
  leased.push_back(server::LeasedRun{.lease = running.lease(), .run = running.run()});
  for (size_t i = 0; i < leased.size(); ++i) {
    const server::LeasedRun& run = leased[i];
    const bool moe = run.run.spec().role() == v1::RUN_ROLE_MOE;
    std::vector<v1::MetricPoint> points;
    for (uint64_t step = 0; step <= 60; step += 10)
      points.push_back(Point(step, step % 20 == 0, moe));
    Must(store_->AppendMetrics(run.run.run_id(), run.lease.lease_epoch(), points), "seed metrics");
    if (i == 2) {
      server::HeartbeatUpdate beat{
          worker.worker_id(), run.run.run_id(), run.lease.lease_epoch(), 60,
          std::nullopt,       absl::Minutes(10)};
      Must(store_->Heartbeat(beat), "seed heartbeat");
      continue;
    }
    server::Completion done;
    done.run_id = run.run.run_id();
    done.lease_epoch = run.lease.lease_epoch();
    done.success = core::PlannedSummary(run.run.spec(), 3.0 + 0.1 * i, 3.0 + 0.1 * i);
    std::vector<absl::StatusOr<server::CompletionResult>> completed = store_->CompleteRuns({&done});
    if (!Must(std::move(completed[0]), "seed completion").invalid_summary.empty()) {
      Die("seed completion: summary refused");
    }
  }
  std::string pending;
  for (const std::string& id : created.run_ids) {
    if (Must(store_->GetRun(id), "seed run").state() == v1::RUN_STATE_PENDING) pending = id;
  }
  placeholders_ = {{"@pending", pending},
                   {"@worker", worker.worker_id()},
                   {"@sweep", created.sweep.sweep_id()},
                   {"@run2", leased[2].run.run_id()},
                   {"@run", leased[0].run.run_id()}};
}

FuzzWorld::~FuzzWorld() { scheduler_.reset(); }

std::string FuzzWorld::ExpandPlaceholders(std::string text) const {
  if (text.find('@') == std::string::npos) return text;
  return absl::StrReplaceAll(text, placeholders_);
}

void FuzzWorld::ExpandPlaceholders(google::protobuf::Message& message) const {
  using google::protobuf::FieldDescriptor;
  const google::protobuf::Reflection* reflection = message.GetReflection();
  std::vector<const FieldDescriptor*> fields;
  reflection->ListFields(message, &fields);
  for (const FieldDescriptor* field : fields) {
    if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      if (field->is_repeated()) {
        for (int i = 0; i < reflection->FieldSize(message, field); ++i) {
          ExpandPlaceholders(*reflection->MutableRepeatedMessage(&message, field, i));
        }
      } else {
        ExpandPlaceholders(*reflection->MutableMessage(&message, field));
      }
    } else if (field->cpp_type() == FieldDescriptor::CPPTYPE_STRING) {
      if (field->is_repeated()) {
        for (int i = 0; i < reflection->FieldSize(message, field); ++i) {
          reflection->SetRepeatedString(
              &message, field, i,
              ExpandPlaceholders(reflection->GetRepeatedString(message, field, i)));
        }
      } else {
        reflection->SetString(&message, field,
                              ExpandPlaceholders(reflection->GetString(message, field)));
      }
    }
  }
}

}  // namespace parity::fuzz
