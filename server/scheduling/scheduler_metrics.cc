#include "server/scheduling/scheduler_metrics.h"

#include <algorithm>
#include <array>
#include <map>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "google/protobuf/descriptor.h"
#include "prometheus/exposer.h"
#include "prometheus/metric_family.h"
#include "prometheus/text_serializer.h"
#include "spdlog/spdlog.h"

namespace parity::server {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;

// From sub-millisecond calls to the 60 s ceiling of a LeaseRun long poll (seconds).
const prometheus::Histogram::BucketBoundaries kLatencyBuckets = {
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60};

constexpr std::array<v1::RunState, 6> kStates = {v1::RUN_STATE_PENDING, v1::RUN_STATE_LEASED,
                                                 v1::RUN_STATE_RUNNING, v1::RUN_STATE_SUCCEEDED,
                                                 v1::RUN_STATE_FAILED,  v1::RUN_STATE_CANCELLED};

// "RUN_STATE_PENDING" → "PENDING": label values read like the database and the CLI.
std::string Short(const std::string& enum_name, absl::string_view prefix) {
  return absl::StartsWith(enum_name, prefix) ? enum_name.substr(prefix.size()) : enum_name;
}
std::string StateLabel(v1::RunState state) { return Short(v1::RunState_Name(state), "RUN_STATE_"); }

// gRPC path and bare name → bare name, for every method of the two services; built from the
// descriptors so that a new RPC gets its own label without touching this file.
const std::unordered_map<std::string, std::string>& KnownMethods() {
  static const auto* const methods = [] {
    auto* known = new std::unordered_map<std::string, std::string>();
    for (const char* service : {"parity.v1.SweepService", "parity.v1.WorkerService"}) {
      const google::protobuf::ServiceDescriptor* descriptor =
          google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(service);
      if (descriptor == nullptr) continue;
      for (int i = 0; i < descriptor->method_count(); ++i) {
        const std::string& name = descriptor->method(i)->name();
        (*known)[absl::StrCat("/", service, "/", name)] = name;
        (*known)[name] = name;
      }
    }
    return known;
  }();
  return *methods;
}

std::string CodeLabel(absl::StatusCode code) {
  const std::string name = absl::StatusCodeToString(code);
  return name.empty() ? "UNKNOWN" : name;
}

MetricFamily GaugeFamily(std::string name, std::string help) {
  MetricFamily family;
  family.name = std::move(name);
  family.help = std::move(help);
  family.type = prometheus::MetricType::Gauge;
  return family;
}

void AddGauge(MetricFamily& family, std::vector<ClientMetric::Label> labels, double value) {
  ClientMetric metric;
  metric.label = std::move(labels);
  metric.gauge.value = value;
  family.metric.push_back(std::move(metric));
}

}  // namespace

// Reads the database at scrape time rather than from a background thread: nothing is queried
// while nobody scrapes, and values are never older than refresh_interval when someone does. The
// mutex makes concurrent scrapes share one query.
class SchedulerMetrics::DatabaseGauges final : public prometheus::Collectable {
 public:
  DatabaseGauges(ReadModels& reads, const Clock& clock, SchedulerMetricsOptions options)
      : reads_(reads), clock_(clock), options_(std::move(options)) {}

  std::vector<MetricFamily> Collect() const override {
    absl::MutexLock lock(&mu_);
    const absl::Time now = clock_.Now();
    if (now - refreshed_ >= options_.refresh_interval) {
      cached_ = Read();
      refreshed_ = clock_.Now();
    }
    return cached_;
  }

 private:
  std::vector<MetricFamily> Read() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    MetricFamily up = GaugeFamily("parity_scheduler_database_up",
                                  "1 when the last read of the run counts from PostgreSQL "
                                  "succeeded, 0 when it failed (the gauges below are then absent)");
    absl::StatusOr<RunCounts> counts = reads_.CountRunsByState(options_.counts);
    AddGauge(up, {}, counts.ok() ? 1 : 0);
    if (!counts.ok()) {
      if (database_up_) {
        spdlog::warn("event=metrics_read_failed error=\"{}\"", counts.status().ToString());
      }
      database_up_ = false;
      return {std::move(up)};
    }
    database_up_ = true;

    struct SweepRow {
      std::string name;
      std::array<int64_t, kStates.size()> runs{};
    };
    std::map<std::string, SweepRow> sweeps;  // "" = every other sweep
    sweeps[""].name = "other";
    std::array<int64_t, kStates.size()> totals{};
    for (const SweepStateCount& row : counts->by_sweep) {
      const auto state = std::find(kStates.begin(), kStates.end(), row.state);
      if (state == kStates.end()) continue;
      const size_t i = static_cast<size_t>(state - kStates.begin());
      SweepRow& sweep = sweeps[row.sweep_id];
      if (!row.sweep_id.empty()) sweep.name = row.sweep_name;
      sweep.runs[i] += row.runs;
      totals[i] += row.runs;
    }

    MetricFamily by_state = GaugeFamily(
        "parity_scheduler_runs", "Runs in each state, over every sweep in the database (count)");
    MetricFamily by_sweep = GaugeFamily(
        "parity_scheduler_sweep_runs",
        absl::StrCat("Runs in each state of each unfinished sweep (the ",
                     options_.counts.max_sweeps,
                     " newest; all other sweeps summed under sweep=\"other\") (count)"));
    for (size_t i = 0; i < kStates.size(); ++i) {
      const std::string state = StateLabel(kStates[i]);
      AddGauge(by_state, {{"state", state}}, static_cast<double>(totals[i]));
      for (const auto& [id, sweep] : sweeps) {
        AddGauge(
            by_sweep,
            {{"state", state}, {"sweep", id.empty() ? "other" : id}, {"sweep_name", sweep.name}},
            static_cast<double>(sweep.runs[i]));
      }
    }
    MetricFamily queue = GaugeFamily(
        "parity_scheduler_queue_depth",
        "PENDING runs of unfinished sweeps past any retry delay: what workers could lease now "
        "(count)");
    AddGauge(queue, {}, static_cast<double>(counts->ready_to_lease));
    MetricFamily workers = GaugeFamily(
        "parity_scheduler_live_workers",
        absl::StrCat("Workers seen (registration, lease call or heartbeat) within the last ",
                     absl::FormatDuration(options_.counts.live_worker_window), " (count)"));
    AddGauge(workers, {}, static_cast<double>(counts->live_workers));
    return {std::move(up), std::move(by_state), std::move(by_sweep), std::move(queue),
            std::move(workers)};
  }

  ReadModels& reads_;
  const Clock& clock_;
  const SchedulerMetricsOptions options_;
  mutable absl::Mutex mu_;
  mutable absl::Time refreshed_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  mutable std::vector<MetricFamily> cached_ ABSL_GUARDED_BY(mu_);
  mutable bool database_up_ ABSL_GUARDED_BY(mu_) = true;  // logs only the first failure
};

SchedulerMetrics::SchedulerMetrics(ReadModels& reads, const Clock& clock,
                                   SchedulerMetricsOptions options)
    : registry_(std::make_shared<prometheus::Registry>()),
      database_(std::make_shared<DatabaseGauges>(reads, clock, options)),
      sweeps_submitted_(prometheus::BuildCounter()
                            .Name("parity_scheduler_sweeps_submitted_total")
                            .Help("SubmitSweep calls that succeeded; deduplicated=\"true\" when "
                                  "the idempotency key matched a stored sweep (count)")
                            .Register(*registry_)),
      leases_(prometheus::BuildCounter()
                  .Name("parity_scheduler_leases_total")
                  .Help("Runs leased to workers, re-leases after expiry included (count)")
                  .Register(*registry_)
                  .Add({})),
      lease_wait_(prometheus::BuildHistogram()
                      .Name("parity_scheduler_lease_wait_seconds")
                      .Help("Time a LeaseRun call that got a run waited for it (seconds)")
                      .Register(*registry_)
                      .Add({}, kLatencyBuckets)),
      rpcs_(prometheus::BuildCounter()
                .Name("parity_scheduler_rpcs_total")
                .Help("gRPC calls handled, by method and status code (count)")
                .Register(*registry_)),
      rpc_duration_(prometheus::BuildHistogram()
                        .Name("parity_scheduler_rpc_duration_seconds")
                        .Help("Time from a gRPC call's arrival to its status, by method; "
                              "LeaseRun includes its long poll (seconds)")
                        .Register(*registry_)),
      points_ingested_(prometheus::BuildCounter()
                           .Name("parity_scheduler_metric_points_ingested_total")
                           .Help("Training metric points stored by ReportMetrics (count)")
                           .Register(*registry_)
                           .Add({})),
      points_duplicate_(prometheus::BuildCounter()
                            .Name("parity_scheduler_metric_points_duplicates_total")
                            .Help("Metric points skipped because their (run, step) was already "
                                  "stored, e.g. resent after a reconnect (count)")
                            .Register(*registry_)
                            .Add({})),
      runs_completed_(prometheus::BuildCounter()
                          .Name("parity_scheduler_runs_completed_total")
                          .Help("CompleteRun calls accepted, by the run's resulting state "
                                "(PENDING = requeued for another attempt) and failure class "
                                "(count)")
                          .Register(*registry_)),
      reaped_(prometheus::BuildCounter()
                  .Name("parity_scheduler_reaped_leases_total")
                  .Help("Expired leases handled by the reaper: requeued, failed (past "
                        "max_attempts), cancelled, or requeued_after_outage (lapsed during an "
                        "outage, no attempt spent) (count)")
                  .Register(*registry_)),
      reaper_errors_(prometheus::BuildCounter()
                         .Name("parity_scheduler_reaper_errors_total")
                         .Help("Reaper passes that failed, e.g. the database was away (count)")
                         .Register(*registry_)
                         .Add({})),
      lease_grace_(prometheus::BuildCounter()
                       .Name("parity_scheduler_lease_grace_total")
                       .Help("Outages the reaper found (the scheduler started, a pass failed, or "
                             "no replica reaped for a while), each beginning a grace in which no "
                             "lease is reaped and lapses spend no attempt (count)")
                       .Register(*registry_)
                       .Add({})),
      retention_deleted_(prometheus::BuildCounter()
                             .Name("parity_scheduler_retention_deleted_total")
                             .Help("Rows the telemetry retention deleted: metric points thinned "
                                   "from ended sweeps' curves, pruned events, forgotten workers "
                                   "(count)")
                             .Register(*registry_)),
      gangs_(prometheus::BuildGauge()
                 .Name("parity_scheduler_gangs")
                 .Help("Gangs (runs of several ranks): waiting (pending, eligible), placed "
                       "(leased or running), and pool_workers (workers waiting in the gang pool), "
                       "as last read while workers poll (count)")
                 .Register(*registry_)),
      gang_rendezvous_(prometheus::BuildHistogram()
                           .Name("parity_scheduler_gang_rendezvous_seconds")
                           .Help("Time from a gang's placement to the release of its rendezvous "
                                 "(every rank checked in) (seconds)")
                           .Register(*registry_)
                           .Add({}, kLatencyBuckets)),
      gang_restarts_(prometheus::BuildCounter()
                         .Name("parity_scheduler_gang_restarts_total")
                         .Help("Whole-gang restarts (or ends) by reason: rank_failed, "
                               "slot_lapsed, rendezvous_timeout, placement_raced (count)")
                         .Register(*registry_)) {
  // Series that exist from the start, so rate() and alerts see a 0 rather than nothing.
  sweeps_submitted_.Add({{"deduplicated", "false"}});
  sweeps_submitted_.Add({{"deduplicated", "true"}});
  for (const char* outcome : {"requeued", "failed", "cancelled", "requeued_after_outage"}) {
    reaped_.Add({{"outcome", outcome}});
  }
  for (const char* kind : {"metric_points", "events", "workers"}) {
    retention_deleted_.Add({{"kind", kind}});
  }
  for (const char* state : {"waiting", "placed", "pool_workers"}) gangs_.Add({{"state", state}});
  for (const char* reason :
       {"rank_failed", "slot_lapsed", "rendezvous_timeout", "placement_raced"}) {
    gang_restarts_.Add({{"reason", reason}});
  }
  // The completions retry_policy.h can produce; a first increment of any other combination is
  // still counted, only rate() misses that one.
  runs_completed_.Add({{"state", "SUCCEEDED"}, {"failure_class", "none"}});
  for (const char* failure_class : {"USER_ERROR", "INFRASTRUCTURE", "OUT_OF_MEMORY", "DIVERGED",
                                    "HUNG", "INVALID_RESULT", "DATA_MISMATCH"}) {
    runs_completed_.Add({{"state", "FAILED"}, {"failure_class", failure_class}});
  }
  for (const char* failure_class : {"PREEMPTED", "INFRASTRUCTURE", "OUT_OF_MEMORY", "HUNG"}) {
    runs_completed_.Add({{"state", "PENDING"}, {"failure_class", failure_class}});
  }
  for (const auto& [key, name] : KnownMethods()) {
    if (key != name) continue;
    RpcCounter(name, absl::StatusCode::kOk);
    rpc_duration_.Add({{"method", name}}, kLatencyBuckets);
  }
}

SchedulerMetrics::~SchedulerMetrics() = default;

prometheus::Counter& SchedulerMetrics::RpcCounter(const std::string& method,
                                                  absl::StatusCode code) {
  return rpcs_.Add({{"method", method}, {"code", CodeLabel(code)}});
}

void SchedulerMetrics::OnSweepSubmitted(const v1::Sweep&, bool deduplicated) {
  sweeps_submitted_.Add({{"deduplicated", deduplicated ? "true" : "false"}}).Increment();
}

void SchedulerMetrics::OnRunLeased(const v1::Run&, absl::Duration waited) {
  leases_.Increment();
  lease_wait_.Observe(absl::ToDoubleSeconds(waited));
}

void SchedulerMetrics::OnMetricsStored(const MetricsAppendResult& result) {
  points_ingested_.Increment(result.accepted);
  points_duplicate_.Increment(result.duplicates);
}

void SchedulerMetrics::OnRunCompleted(const v1::Run& run) {
  // A success keeps the class of an earlier failed attempt on the Run; it is not this outcome's.
  const bool failed = run.state() != v1::RUN_STATE_SUCCEEDED &&
                      run.failure_class() != v1::FAILURE_CLASS_UNSPECIFIED;
  runs_completed_
      .Add(
          {{"state", StateLabel(run.state())},
           {"failure_class",
            failed ? Short(v1::FailureClass_Name(run.failure_class()), "FAILURE_CLASS_") : "none"}})
      .Increment();
}

void SchedulerMetrics::OnLeasesReaped(const ReapResult& result) {
  reaped_.Add({{"outcome", "requeued"}}).Increment(result.requeued);
  reaped_.Add({{"outcome", "failed"}}).Increment(result.failed);
  reaped_.Add({{"outcome", "cancelled"}}).Increment(result.cancelled);
  reaped_.Add({{"outcome", "requeued_after_outage"}}).Increment(result.outage_requeued);
  if (result.liveness.outage) lease_grace_.Increment();
}

void SchedulerMetrics::OnReapFailed(const absl::Status&) { reaper_errors_.Increment(); }

void SchedulerMetrics::OnGangCounts(const GangCounts& counts) {
  gangs_.Add({{"state", "waiting"}}).Set(counts.waiting_gangs);
  gangs_.Add({{"state", "placed"}}).Set(counts.placed_gangs);
  gangs_.Add({{"state", "pool_workers"}}).Set(counts.waiting_workers);
}

void SchedulerMetrics::OnGangRendezvous(absl::Duration took) {
  gang_rendezvous_.Observe(absl::ToDoubleSeconds(took));
}

void SchedulerMetrics::OnGangRestarted(const v1::Run&, absl::string_view reason) {
  gang_restarts_.Add({{"reason", std::string(reason)}}).Increment();
}

void SchedulerMetrics::OnRetentionApplied(const RetentionResult& result) {
  retention_deleted_.Add({{"kind", "metric_points"}})
      .Increment(static_cast<double>(result.points_deleted));
  retention_deleted_.Add({{"kind", "events"}})
      .Increment(static_cast<double>(result.events_deleted));
  retention_deleted_.Add({{"kind", "workers"}}).Increment(result.workers_deleted);
}

void SchedulerMetrics::ObserveRpc(absl::string_view method, absl::StatusCode code,
                                  absl::Duration duration) {
  static const std::string kOther = "other";
  const auto& known = KnownMethods();
  const auto it = known.find(std::string(method));
  const std::string& name = it == known.end() ? kOther : it->second;
  RpcCounter(name, code).Increment();
  rpc_duration_.Add({{"method", name}}, kLatencyBuckets).Observe(absl::ToDoubleSeconds(duration));
}

std::string SchedulerMetrics::Render() {
  std::vector<MetricFamily> families = registry_->Collect();
  for (MetricFamily& family : database_->Collect()) families.push_back(std::move(family));
  return prometheus::TextSerializer().Serialize(families);
}

absl::StatusOr<std::unique_ptr<prometheus::Exposer>> SchedulerMetrics::Expose(
    const std::string& address) {
  try {
    auto exposer = std::make_unique<prometheus::Exposer>(address);
    exposer->RegisterCollectable(registry_);
    exposer->RegisterCollectable(database_);
    return exposer;
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on ", address, ": ", e.what()));
  }
}

}  // namespace parity::server
