#include "tests/fuzz/fuzz_world.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "core/planner.h"
#include "core/spec_loader.h"
#include "core/summary_check.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/reflection.h"
#include "google/protobuf/stubs/logging.h"
#include "spdlog/spdlog.h"
#include "web/dashboard_documents.h"

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

bool Orderable(const std::string& column) {
  return std::any_of(std::begin(server::kResultsOrderColumns),
                     std::end(server::kResultsOrderColumns),
                     [&](std::string_view c) { return column == c; });
}

v1::ResultRow RowOf(const v1::Run& run) {
  v1::ResultRow row;
  row.set_run_id(run.run_id());
  row.set_sweep_id(run.sweep_id());
  row.set_name(run.spec().name());
  row.set_role(run.spec().role());
  row.set_state(run.state());
  row.set_d_model(run.spec().model().d_model());
  row.set_num_layers(run.spec().model().num_layers());
  row.set_num_experts(run.spec().model().moe().num_experts());
  row.set_top_k(run.spec().model().moe().top_k());
  row.set_expert_hidden(run.spec().model().moe().expert_hidden());
  const v1::Accounting& a = run.spec().accounting();
  row.set_params(a.params());
  row.set_active_params(a.active_params());
  row.set_activation_rate(a.activation_rate());
  row.set_flops_per_token(a.flops_per_token());
  row.set_measured_flops_per_token(run.summary().measured_flops_per_token());
  row.set_compute_flops(a.compute_flops());
  row.set_tokens(a.tokens());
  row.set_unique_tokens(a.unique_tokens());
  row.set_epochs(a.epochs());
  row.set_final_val_bpc(run.summary().final_val_bpc());
  row.set_compute_budget(run.spec().compute_budget());
  row.set_compute_multiple(run.spec().compute_multiple());
  row.set_data_variant(run.spec().data_variant());
  row.set_predicted_efficiency_leverage(run.spec().predicted_efficiency_leverage());
  row.set_seed(run.spec().training().seed());
  return row;
}

}  // namespace

void QuietLogs() {
  google::protobuf::SetLogHandler(nullptr);
  spdlog::set_level(spdlog::level::off);
}

FuzzRunStore::FuzzRunStore(const server::Clock& clock) : clock_(clock) { Reset(); }

void FuzzRunStore::Reset() {
  memory_ = std::make_unique<server::MemoryRunStore>([this] { return clock_.Now(); });
  absl::MutexLock lock(&mu_);
  metrics_.clear();
}

absl::StatusOr<server::CreatedSweep> FuzzRunStore::CreateSweep(const server::NewSweep& sweep) {
  return memory_->CreateSweep(sweep);
}
absl::StatusOr<v1::Sweep> FuzzRunStore::GetSweep(const std::string& sweep_id) {
  return memory_->GetSweep(sweep_id);
}
absl::StatusOr<server::Page<v1::Sweep>> FuzzRunStore::ListSweeps(v1::SweepState state,
                                                                 const server::PageRequest& page) {
  return memory_->ListSweeps(state, page);
}
absl::StatusOr<server::CancelResult> FuzzRunStore::CancelSweep(const std::string& sweep_id,
                                                               const std::string& reason) {
  return memory_->CancelSweep(sweep_id, reason);
}
absl::StatusOr<uint32_t> FuzzRunStore::DeleteSweep(const std::string& sweep_id) {
  return memory_->DeleteSweep(sweep_id);
}
absl::StatusOr<v1::Run> FuzzRunStore::GetRun(const std::string& run_id) {
  return memory_->GetRun(run_id);
}
absl::StatusOr<server::Page<v1::Run>> FuzzRunStore::ListRuns(
    const std::string& sweep_id, const std::vector<v1::RunState>& states,
    const server::PageRequest& page) {
  return memory_->ListRuns(sweep_id, states, page);
}
absl::StatusOr<server::Page<v1::Worker>> FuzzRunStore::ListWorkers(
    const server::WorkersQuery& query) {
  return memory_->ListWorkers(query);
}
absl::StatusOr<v1::Worker> FuzzRunStore::RegisterWorker(const server::WorkerRegistration& worker) {
  return memory_->RegisterWorker(worker);
}
absl::StatusOr<std::string> FuzzRunStore::ClaimWorker(const std::string& worker_id,
                                                      const std::string& owner) {
  return memory_->ClaimWorker(worker_id, owner);
}
absl::StatusOr<std::vector<server::RunHolding>> FuzzRunStore::RunHoldings(
    const std::string& worker_id, const std::vector<std::string>& run_ids) {
  return memory_->RunHoldings(worker_id, run_ids);
}
std::vector<absl::StatusOr<std::optional<server::LeasedRun>>> FuzzRunStore::LeaseNextRuns(
    const std::vector<const server::LeaseRequest*>& requests) {
  return memory_->LeaseNextRuns(requests);
}
absl::StatusOr<server::OwnerLoad> FuzzRunStore::CountOwnerLoad(const std::string& owner) {
  return memory_->CountOwnerLoad(owner);
}
absl::StatusOr<server::StoredAccessToken> FuzzRunStore::CreateToken(
    const server::NewAccessToken& token) {
  return memory_->CreateToken(token);
}
absl::StatusOr<std::optional<server::StoredAccessToken>> FuzzRunStore::FindToken(
    const std::string& secret_sha256) {
  return memory_->FindToken(secret_sha256);
}
absl::StatusOr<server::Page<server::StoredAccessToken>> FuzzRunStore::ListTokens(
    bool include_inactive, const server::PageRequest& page) {
  return memory_->ListTokens(include_inactive, page);
}
absl::StatusOr<uint32_t> FuzzRunStore::RevokeTokens(const server::TokenRevocation& which) {
  return memory_->RevokeTokens(which);
}
absl::StatusOr<bool> FuzzRunStore::HasLiveAdmin() { return memory_->HasLiveAdmin(); }
absl::StatusOr<std::string> FuzzRunStore::GetOrCreateServerKey(const std::string& name,
                                                               const std::string& candidate) {
  return memory_->GetOrCreateServerKey(name, candidate);
}

absl::StatusOr<server::HeartbeatResult> FuzzRunStore::Heartbeat(
    const server::HeartbeatUpdate& update) {
  return memory_->Heartbeat(update);
}
absl::StatusOr<server::MetricsAppendResult> FuzzRunStore::AppendMetrics(
    const std::string& run_id, int64_t lease_epoch, const std::vector<v1::MetricPoint>& points) {
  absl::StatusOr<server::MetricsAppendResult> result =
      memory_->AppendMetrics(run_id, lease_epoch, points);
  if (result.ok()) {
    absl::MutexLock lock(&mu_);
    for (const v1::MetricPoint& point : points) {
      v1::MetricPoint& stored = metrics_[run_id][point.step()];
      stored = point;
      stored.set_run_id(run_id);
    }
  }
  return result;
}
std::vector<absl::StatusOr<server::CompletionResult>> FuzzRunStore::CompleteRuns(
    const std::vector<const server::Completion*>& completions) {
  return memory_->CompleteRuns(completions);
}
absl::StatusOr<server::ReapResult> FuzzRunStore::ReapExpiredLeases(int limit) {
  return memory_->ReapExpiredLeases(limit);
}
absl::StatusOr<server::ServiceLiveness> FuzzRunStore::RecordReaperPass(
    const server::ReaperPass& pass) {
  return memory_->RecordReaperPass(pass);
}
absl::StatusOr<server::RetentionResult> FuzzRunStore::ApplyRetention(
    const server::RetentionPolicy& policy) {
  return memory_->ApplyRetention(policy);
}

absl::StatusOr<server::Page<v1::ResultRow>> FuzzRunStore::QueryResults(
    const server::ResultsQuery& query) {
  bool descending = false;
  std::string column;
  if (!query.order_by.empty()) {
    std::vector<std::string> words = absl::StrSplit(query.order_by, ' ', absl::SkipEmpty());
    descending = words.size() == 2 && absl::AsciiStrToLower(words[1]) == "desc";
    if (words.empty() || !Orderable(words[0]) || words.size() > 2 ||
        (words.size() == 2 && !descending)) {
      return absl::InvalidArgumentError(
          absl::StrCat("order_by '", query.order_by, "' is not a results field [desc]"));
    }
    column = words[0];
  }
  int64_t offset = 0;
  if (!query.page.page_token.empty()) {
    absl::StatusOr<std::string> text = server::DecodePageToken(query.page.page_token);
    if (!text.ok()) return text.status();
    if (!absl::SimpleAtoi(*text, &offset) || offset < 0) return server::BadPageToken();
  }
  std::vector<v1::ResultRow> rows;
  std::vector<std::string> sweep_ids;
  if (query.sweep_id.empty()) {
    server::PageRequest page{1000, ""};
    do {
      absl::StatusOr<server::Page<v1::Sweep>> sweeps =
          memory_->ListSweeps(v1::SWEEP_STATE_UNSPECIFIED, page);
      if (!sweeps.ok()) return sweeps.status();
      for (const v1::Sweep& sweep : sweeps->items) sweep_ids.push_back(sweep.sweep_id());
      page.page_token = sweeps->next_page_token;
    } while (!page.page_token.empty());
  } else {
    sweep_ids.push_back(query.sweep_id);
  }
  for (const std::string& sweep_id : sweep_ids) {
    server::PageRequest page{1000, ""};
    do {
      absl::StatusOr<server::Page<v1::Run>> runs = memory_->ListRuns(sweep_id, query.states, page);
      if (absl::IsNotFound(runs.status())) break;
      if (!runs.ok()) return runs.status();
      for (const v1::Run& run : runs->items) {
        v1::ResultRow row = RowOf(run);
        if (!query.layout.empty() && row.layout() != query.layout) continue;
        if (query.min_activation_rate != 0 && row.activation_rate() < query.min_activation_rate) {
          continue;
        }
        if (query.max_activation_rate != 0 && row.activation_rate() > query.max_activation_rate) {
          continue;
        }
        rows.push_back(std::move(row));
      }
      page.page_token = runs->next_page_token;
    } while (!page.page_token.empty());
  }
  if (!column.empty()) {
    // By the column's value through reflection (text or number), then run id, as the SQL does.
    const google::protobuf::FieldDescriptor* field =
        v1::ResultRow::descriptor()->FindFieldByName(column);
    auto key = [field](const v1::ResultRow& row) {
      const google::protobuf::Reflection* r = row.GetReflection();
      switch (field->cpp_type()) {
        case google::protobuf::FieldDescriptor::CPPTYPE_STRING:
          return std::pair<double, std::string>(0, r->GetString(row, field));
        case google::protobuf::FieldDescriptor::CPPTYPE_ENUM:
          return std::pair<double, std::string>(r->GetEnumValue(row, field), "");
        case google::protobuf::FieldDescriptor::CPPTYPE_UINT32:
          return std::pair<double, std::string>(r->GetUInt32(row, field), "");
        case google::protobuf::FieldDescriptor::CPPTYPE_UINT64:
          return std::pair<double, std::string>(static_cast<double>(r->GetUInt64(row, field)), "");
        default:
          return std::pair<double, std::string>(r->GetDouble(row, field), "");
      }
    };
    std::stable_sort(rows.begin(), rows.end(), [&](const auto& a, const auto& b) {
      const auto ka = key(a), kb = key(b);
      if (ka != kb) return descending ? kb < ka : ka < kb;
      return a.run_id() < b.run_id();
    });
  }
  server::Page<v1::ResultRow> page;
  const uint64_t size = query.page.page_size;
  for (uint64_t i = static_cast<uint64_t>(offset); i < rows.size() && i < offset + size; ++i) {
    page.items.push_back(rows[i]);
  }
  if (rows.size() > offset + size)
    page.next_page_token = server::EncodePageToken(absl::StrCat(offset + size));
  return page;
}

absl::StatusOr<server::SweepEventPage> FuzzRunStore::ListSweepEvents(const std::string& sweep_id,
                                                                     uint64_t horizon) {
  server::SweepEventPage page;
  page.next_horizon = 1;  // no events are kept
  return page;
}

absl::StatusOr<std::vector<server::RunEvent>> FuzzRunStore::ListRunEvents(const std::string& run_id,
                                                                          int64_t after_event_id,
                                                                          int limit) {
  return std::vector<server::RunEvent>();
}

absl::StatusOr<server::RunCounts> FuzzRunStore::CountRunsByState(
    const server::RunCountsQuery& query) {
  return server::RunCounts();
}

absl::StatusOr<std::vector<v1::MetricPoint>> FuzzRunStore::ListMetrics(const std::string& run_id,
                                                                       uint64_t from_step,
                                                                       int limit) {
  absl::MutexLock lock(&mu_);
  std::vector<v1::MetricPoint> points;
  auto run = metrics_.find(run_id);
  if (run == metrics_.end()) return points;
  for (auto it = run->second.lower_bound(from_step);
       it != run->second.end() && static_cast<int>(points.size()) < limit; ++it) {
    points.push_back(it->second);
  }
  return points;
}

absl::StatusOr<std::vector<v1::MetricPoint>> FuzzRunStore::SampleMetrics(
    const std::vector<std::string>& run_ids, const MetricSampling& sampling) {
  absl::MutexLock lock(&mu_);
  std::vector<v1::MetricPoint> out;
  for (const std::string& run_id : run_ids) {
    auto run = metrics_.find(run_id);
    if (run == metrics_.end()) continue;
    std::vector<v1::MetricPoint> points;
    for (const auto& [step, point] : run->second) {
      if (sampling.validation_only && !point.has_val_bpc()) continue;
      points.push_back(point);
    }
    for (v1::MetricPoint& point :
         web::SampleEvenly(points, static_cast<size_t>(std::max(sampling.max_points_per_run, 1)))) {
      if (!sampling.expert_load_summaries) {
        point.clear_expert_load();
      } else {
        for (v1::ExpertLoadStats& load : *point.mutable_expert_load()) load.clear_shares();
      }
      out.push_back(std::move(point));
    }
  }
  return out;
}

FuzzWorld::FuzzWorld() : store_(std::make_unique<FuzzRunStore>(clock_)) {
  server::SchedulerOptions options;
  options.max_lease_wait = absl::ZeroDuration();  // LeaseRun answers after one try
  options.watch_poll_interval = absl::ZeroDuration();
  scheduler_ = std::make_unique<server::Scheduler>(*store_, signal_, clock_, &core::PlanSweep,
                                                   options, nullptr);
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
  server::LeaseRequest lease{worker.worker_id(), {.cpu_threads = 8}, absl::Minutes(10)};

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
  leased.push_back(server::LeasedRun{running.lease(), running.run()});
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
