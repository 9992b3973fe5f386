#include "worker/worker_metrics.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "clients/cpp/loopback_address.h"
#include "prometheus/exposer.h"
#include "prometheus/text_serializer.h"

namespace parity::worker {
namespace {

// Whether two strings are equal, in a time that does not depend on where they differ.
bool ConstantTimeEquals(const std::string& a, const std::string& b) {
  unsigned char differ = a.size() == b.size() ? 0 : 1;
  const std::string& longest = a.size() >= b.size() ? a : b;
  for (size_t i = 0; i < longest.size(); ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    differ |= static_cast<unsigned char>(x ^ y);
  }
  return differ == 0;
}

prometheus::Labels DeviceLabels(const parity::v1::Device& device) {
  return {{"kind", device.kind() == parity::v1::DEVICE_KIND_CUDA ? "cuda" : "cpu"},
          {"index", absl::StrCat(device.index())}};
}

}  // namespace

WorkerMetrics::WorkerMetrics()
    : registry_(std::make_shared<prometheus::Registry>()),
      runs_in_flight_(prometheus::BuildGauge()
                          .Name("parity_worker_runs_in_flight")
                          .Help("Runs this worker supervises now (count)")
                          .Register(*registry_)
                          .Add({})),
      runs_finished_(prometheus::BuildCounter()
                         .Name("parity_worker_runs_finished_total")
                         .Help("Runs that ended here, by outcome: succeeded, failed, cancelled, "
                               "preempted, lease-lost, abandoned (count)")
                         .Register(*registry_)),
      run_tokens_per_second_(prometheus::BuildGauge()
                                 .Name("parity_worker_run_tokens_per_second")
                                 .Help("Training throughput of each active run at its latest "
                                       "logged step (tokens per second)")
                                 .Register(*registry_)),
      run_train_bpc_(prometheus::BuildGauge()
                         .Name("parity_worker_run_train_bpc")
                         .Help("Training loss of each active run at its latest logged step "
                               "(bits per character)")
                         .Register(*registry_)),
      run_val_bpc_(prometheus::BuildGauge()
                       .Name("parity_worker_run_val_bpc")
                       .Help("Validation loss of each active run at its latest evaluation "
                             "(bits per character)")
                       .Register(*registry_)),
      device_memory_(prometheus::BuildGauge()
                         .Name("parity_worker_device_memory_bytes")
                         .Help("Memory of each device offered: host memory for the CPU, device "
                               "memory for a GPU (bytes)")
                         .Register(*registry_)),
      device_busy_(prometheus::BuildGauge()
                       .Name("parity_worker_device_busy")
                       .Help("1 while a run holds the device (the CPU: while any run books "
                             "threads of it), else 0")
                       .Register(*registry_)),
      cpu_threads_(prometheus::BuildGauge()
                       .Name("parity_worker_cpu_threads")
                       .Help("CPU threads this worker offers (threads)")
                       .Register(*registry_)
                       .Add({})),
      cpu_threads_booked_(prometheus::BuildGauge()
                              .Name("parity_worker_cpu_threads_booked")
                              .Help("CPU threads booked by the runs going now (threads)")
                              .Register(*registry_)
                              .Add({})),
      points_forwarded_(prometheus::BuildCounter()
                            .Name("parity_worker_metric_points_forwarded_total")
                            .Help("Engine metric points the scheduler accepted (count)")
                            .Register(*registry_)
                            .Add({})),
      points_dropped_(prometheus::BuildCounter()
                          .Name("parity_worker_metric_points_dropped_total")
                          .Help("Engine metric points never delivered: buffer_full (the "
                                "scheduler was away too long) or undelivered (the run ended "
                                "first) (count)")
                          .Register(*registry_)),
      heartbeats_(prometheus::BuildCounter()
                      .Name("parity_worker_heartbeats_total")
                      .Help("Heartbeat calls made, failed ones included (count)")
                      .Register(*registry_)
                      .Add({})),
      heartbeat_failures_(prometheus::BuildCounter()
                              .Name("parity_worker_heartbeat_failures_total")
                              .Help("Heartbeat calls that failed (count)")
                              .Register(*registry_)
                              .Add({})),
      lease_attempts_(prometheus::BuildCounter()
                          .Name("parity_worker_lease_attempts_total")
                          .Help("LeaseRun calls by result: leased, empty (the long poll ended "
                                "without work) or error (count)")
                          .Register(*registry_)) {
  // Series that exist from the start, so rate() and alerts see a 0 rather than nothing.
  for (const char* reason : {"buffer_full", "undelivered"})
    points_dropped_.Add({{"reason", reason}});
  for (const char* result : {"leased", "empty", "error"}) lease_attempts_.Add({{"result", result}});
  for (const char* outcome : {"succeeded", "failed"}) runs_finished_.Add({{"outcome", outcome}});
}

WorkerMetrics::~WorkerMetrics() = default;

void WorkerMetrics::LeaseAttempt(LeaseAttemptResult result) {
  const char* name = result == LeaseAttemptResult::kLeased  ? "leased"
                     : result == LeaseAttemptResult::kEmpty ? "empty"
                                                            : "error";
  lease_attempts_.Add({{"result", name}}).Increment();
}

void WorkerMetrics::SetDevices(const std::vector<DeviceUsage>& devices) {
  for (const DeviceUsage& usage : devices) {
    const prometheus::Labels labels = DeviceLabels(usage.device);
    device_memory_.Add(labels).Set(static_cast<double>(usage.device.memory_bytes()));
    device_busy_.Add(labels).Set(usage.busy ? 1 : 0);
    if (usage.device.kind() == parity::v1::DEVICE_KIND_CPU) {
      cpu_threads_.Set(usage.device.threads());
      cpu_threads_booked_.Set(usage.threads_booked);
    }
  }
}

prometheus::Labels WorkerMetrics::RunLabels(const std::string& run_id, const RunSeries& run) const {
  return {{"run_id", run_id}, {"run_name", run.run_name}};
}

void WorkerMetrics::RunStarted(const std::string& run_id, const std::string& run_name) {
  absl::MutexLock lock(&mu_);
  runs_[run_id].run_name = run_name;
  runs_in_flight_.Set(static_cast<double>(runs_.size()));
}

void WorkerMetrics::RunProgress(const std::string& run_id, const parity::v1::MetricPoint& point) {
  absl::MutexLock lock(&mu_);
  const auto it = runs_.find(run_id);
  if (it == runs_.end()) return;  // not started, or already finished: no series to bring back
  RunSeries& run = it->second;
  const prometheus::Labels labels = RunLabels(run_id, run);
  if (run.tokens_per_second == nullptr) {
    run.tokens_per_second = &run_tokens_per_second_.Add(labels);
    run.train_bpc = &run_train_bpc_.Add(labels);
  }
  run.tokens_per_second->Set(point.tokens_per_second());
  run.train_bpc->Set(point.train_bpc());
  if (point.has_val_bpc()) {
    if (run.val_bpc == nullptr) run.val_bpc = &run_val_bpc_.Add(labels);
    run.val_bpc->Set(point.val_bpc());
  }
}

void WorkerMetrics::RunFinished(const std::string& run_id, absl::string_view outcome) {
  runs_finished_.Add({{"outcome", std::string(outcome)}}).Increment();
  absl::MutexLock lock(&mu_);
  const auto it = runs_.find(run_id);
  if (it == runs_.end()) return;
  if (it->second.tokens_per_second != nullptr) {
    run_tokens_per_second_.Remove(it->second.tokens_per_second);
    run_train_bpc_.Remove(it->second.train_bpc);
  }
  if (it->second.val_bpc != nullptr) run_val_bpc_.Remove(it->second.val_bpc);
  runs_.erase(it);
  runs_in_flight_.Set(static_cast<double>(runs_.size()));
}

void WorkerMetrics::PointsForwarded(uint64_t count) {
  points_forwarded_.Increment(static_cast<double>(count));
}

void WorkerMetrics::PointsDropped(absl::string_view reason, uint64_t count) {
  points_dropped_.Add({{"reason", std::string(reason)}}).Increment(static_cast<double>(count));
}

void WorkerMetrics::HeartbeatSent(bool ok) {
  heartbeats_.Increment();
  if (!ok) heartbeat_failures_.Increment();
}

std::string WorkerMetrics::Render() const {
  return prometheus::TextSerializer().Serialize(registry_->Collect());
}

absl::StatusOr<std::unique_ptr<prometheus::Exposer>> WorkerMetrics::Expose(
    const Endpoint& endpoint) {
  if (endpoint.scrape_token.size() < 16) {
    return absl::InvalidArgumentError(
        "--metrics-listen needs --metrics-token-file (PARITY_WORKER_METRICS_TOKEN_FILE): a "
        "secret of at least 16 characters that scrapers send as the basic-auth password");
  }
  if (!endpoint.insecure_plaintext) {
    const absl::StatusOr<bool> loopback = clients::IsLoopbackAddress(endpoint.address);
    if (!loopback.ok() || !*loopback) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--metrics-listen ", endpoint.address, ": ",
          loopback.ok() ? "not a loopback address" : std::string(loopback.status().message()),
          "; the metrics port has no TLS, so its token would cross the network in clear: keep "
          "it on loopback, or add --metrics-insecure-plaintext on a trusted network"));
    }
  }
  try {
    auto exposer = std::make_unique<prometheus::Exposer>(endpoint.address);
    exposer->RegisterCollectable(registry_);
    exposer->RegisterAuth(
        [token = endpoint.scrape_token](const std::string&, const std::string& password) {
          return ConstantTimeEquals(password, token);
        },
        "parity-worker");
    return exposer;
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on ", endpoint.address, ": ", e.what()));
  }
}

}  // namespace parity::worker
