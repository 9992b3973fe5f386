// WorkerMetrics on its own (per-run series appear with a run and vanish with it; devices;
// counters; the families match deploy/prometheus/metrics.txt and pass promtool's linter), then a
// real WorkerDaemon with the fake engine and fake scheduler, scraped over HTTP from its exposer
// while a run trains and after it ended.
#include "worker/worker_metrics.h"

#include <httplib.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "prometheus/exposer.h"
#include "tests/support/prometheus_text.h"
#include "worker/tests/fake_scheduler_client.h"
#include "worker/worker.h"

namespace parity::worker {
namespace {

namespace fs = std::filesystem;
using parity::testing::Exposition;
using parity::testing::ParseExposition;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Optional;

parity::v1::MetricPoint Point(uint64_t step, double tokens_per_second, double train_bpc,
                              std::optional<double> val_bpc = std::nullopt) {
  parity::v1::MetricPoint p;
  p.set_step(step);
  p.set_tokens_per_second(tokens_per_second);
  p.set_train_bpc(train_bpc);
  if (val_bpc) p.set_val_bpc(*val_bpc);
  return p;
}

parity::v1::Device Device(parity::v1::DeviceKind kind, uint32_t index, uint64_t memory,
                          uint32_t threads = 0) {
  parity::v1::Device d;
  d.set_kind(kind);
  d.set_index(index);
  d.set_memory_bytes(memory);
  d.set_threads(threads);
  return d;
}

Exposition Parsed(const WorkerMetrics& metrics) {
  Exposition e = ParseExposition(metrics.Render());
  EXPECT_THAT(e.errors, IsEmpty());
  return e;
}

TEST(WorkerMetricsTest, RunSeriesExistOnlyWhileTheRunIsActive) {
  WorkerMetrics metrics;
  metrics.RunStarted("run-a", "dense-1C");
  metrics.RunStarted("run-b", "moe-r0.2");
  EXPECT_THAT(Parsed(metrics).Value("parity_worker_runs_in_flight"), Optional(2.0));

  metrics.RunProgress("run-a", Point(10, 5e4, 3.1));
  metrics.RunProgress("run-b", Point(10, 2e4, 3.4));
  Exposition m = Parsed(metrics);
  EXPECT_THAT(m.Value("parity_worker_run_tokens_per_second",
                      {{"run_id", "run-a"}, {"run_name", "dense-1C"}}),
              Optional(5e4));
  EXPECT_THAT(m.Value("parity_worker_run_train_bpc", {{"run_id", "run-b"}}), Optional(3.4));
  EXPECT_THAT(m.Series("parity_worker_run_val_bpc"), IsEmpty()) << "no evaluation yet";

  metrics.RunProgress("run-a", Point(20, 6e4, 2.9, 3.0));
  m = Parsed(metrics);
  EXPECT_THAT(m.Value("parity_worker_run_tokens_per_second", {{"run_id", "run-a"}}), Optional(6e4));
  EXPECT_THAT(m.Value("parity_worker_run_val_bpc", {{"run_id", "run-a"}}), Optional(3.0));

  metrics.RunFinished("run-a", "succeeded");
  metrics.RunProgress("run-a", Point(21, 6e4, 2.8));  // a late line must not bring it back
  m = Parsed(metrics);
  for (const char* family : {"parity_worker_run_tokens_per_second", "parity_worker_run_train_bpc",
                             "parity_worker_run_val_bpc"}) {
    for (const parity::testing::Sample& s : m.Series(family)) {
      EXPECT_NE(s.labels.at("run_id"), "run-a") << family << " outlived its run";
    }
  }
  EXPECT_EQ(m.Series("parity_worker_run_tokens_per_second").size(), 1u);
  EXPECT_THAT(m.Value("parity_worker_runs_in_flight"), Optional(1.0));
  EXPECT_THAT(m.Value("parity_worker_runs_finished_total", {{"outcome", "succeeded"}}),
              Optional(1.0));

  metrics.RunFinished("run-b", "lease-lost");
  m = Parsed(metrics);
  EXPECT_THAT(m.Series("parity_worker_run_train_bpc"), IsEmpty());
  EXPECT_THAT(m.Value("parity_worker_runs_in_flight"), Optional(0.0));
  EXPECT_THAT(m.Value("parity_worker_runs_finished_total", {{"outcome", "lease-lost"}}),
              Optional(1.0));
}

TEST(WorkerMetricsTest, DevicesAndSchedulerCallsAreCounted) {
  WorkerMetrics metrics;
  metrics.SetDevices({{Device(parity::v1::DEVICE_KIND_CPU, 0, 64ull << 30, 16), true, 4},
                      {Device(parity::v1::DEVICE_KIND_CUDA, 0, 80ull << 30), true, 0},
                      {Device(parity::v1::DEVICE_KIND_CUDA, 1, 80ull << 30), false, 0}});
  metrics.LeaseAttempt(LeaseAttemptResult::kLeased);
  metrics.LeaseAttempt(LeaseAttemptResult::kEmpty);
  metrics.LeaseAttempt(LeaseAttemptResult::kEmpty);
  metrics.HeartbeatSent(true);
  metrics.HeartbeatSent(false);
  metrics.PointsForwarded(250);
  metrics.PointsDropped("buffer_full", 3);
  metrics.PointsDropped("undelivered", 7);
  metrics.RunStarted("run-a", "dense-1C");
  metrics.RunProgress("run-a", Point(5, 5e4, 3.0, 3.1));

  const std::string text = metrics.Render();
  const Exposition m = ParseExposition(text);
  EXPECT_THAT(m.errors, IsEmpty());
  EXPECT_THAT(m.Value("parity_worker_device_memory_bytes", {{"kind", "cuda"}, {"index", "1"}}),
              Optional(static_cast<double>(80ull << 30)));
  EXPECT_THAT(m.Value("parity_worker_device_busy", {{"kind", "cuda"}, {"index", "0"}}),
              Optional(1.0));
  EXPECT_THAT(m.Value("parity_worker_device_busy", {{"kind", "cuda"}, {"index", "1"}}),
              Optional(0.0));
  EXPECT_THAT(m.Value("parity_worker_device_busy", {{"kind", "cpu"}, {"index", "0"}}),
              Optional(1.0));
  EXPECT_THAT(m.Value("parity_worker_cpu_threads"), Optional(16.0));
  EXPECT_THAT(m.Value("parity_worker_cpu_threads_booked"), Optional(4.0));
  EXPECT_THAT(m.Value("parity_worker_lease_attempts_total", {{"result", "empty"}}), Optional(2.0));
  EXPECT_THAT(m.Value("parity_worker_lease_attempts_total", {{"result", "error"}}), Optional(0.0));
  EXPECT_THAT(m.Value("parity_worker_heartbeats_total"), Optional(2.0));
  EXPECT_THAT(m.Value("parity_worker_heartbeat_failures_total"), Optional(1.0));
  EXPECT_THAT(m.Value("parity_worker_metric_points_forwarded_total"), Optional(250.0));
  EXPECT_THAT(m.Value("parity_worker_metric_points_dropped_total", {{"reason", "undelivered"}}),
              Optional(7.0));

  // With a run active and evaluated every family is present: compare with the published list.
  EXPECT_THAT(parity::testing::CompareWithList(
                  m, parity::testing::ReadMetricList(PARITY_METRIC_LIST), "parity_worker_"),
              IsEmpty());
  const parity::testing::PromtoolResult lint =
      parity::testing::PromtoolCheckMetrics(text, ::testing::TempDir() + "/worker_metrics.prom");
  EXPECT_EQ(lint.exit_status, 0) << lint.output;
  EXPECT_EQ(lint.output, "") << "promtool check metrics found problems";
}

constexpr char kScrapeToken[] = "scrape-token-0123456789abcdef";

TEST(WorkerMetricsTest, ExposeRefusesAnAddressInUse) {
  WorkerMetrics metrics;
  absl::StatusOr<std::unique_ptr<prometheus::Exposer>> first =
      metrics.Expose({.address = "127.0.0.1:0", .scrape_token = kScrapeToken});
  ASSERT_TRUE(first.ok()) << first.status();
  const int port = (*first)->GetListeningPorts().at(0);
  WorkerMetrics other;
  absl::StatusOr<std::unique_ptr<prometheus::Exposer>> second =
      other.Expose({.address = absl::StrCat("127.0.0.1:", port), .scrape_token = kScrapeToken});
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
}

TEST(WorkerMetricsTest, ExposeNeedsAScrapeTokenAndLoopbackUnlessPlaintextIsAllowed) {
  WorkerMetrics metrics;
  absl::StatusOr<std::unique_ptr<prometheus::Exposer>> no_token =
      metrics.Expose({.address = "127.0.0.1:0", .scrape_token = ""});
  EXPECT_EQ(no_token.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(no_token.status().message()), HasSubstr("--metrics-token-file"));
  for (const char* address : {"0.0.0.0:0", "127.0.0.1.invalid:0", ":0"}) {
    absl::StatusOr<std::unique_ptr<prometheus::Exposer>> exposed =
        metrics.Expose({.address = address, .scrape_token = kScrapeToken});
    EXPECT_EQ(exposed.status().code(), absl::StatusCode::kInvalidArgument)
        << address << " is not loopback and should be refused without the plaintext flag";
    EXPECT_THAT(std::string(exposed.status().message()), HasSubstr("--metrics-insecure-plaintext"));
  }
  absl::StatusOr<std::unique_ptr<prometheus::Exposer>> allowed = metrics.Expose(
      {.address = "0.0.0.0:0", .scrape_token = kScrapeToken, .insecure_plaintext = true});
  EXPECT_TRUE(allowed.ok()) << allowed.status();
}

TEST(WorkerMetricsTest, AScrapeWithoutTheTokenIsRefused) {
  WorkerMetrics metrics;
  absl::StatusOr<std::unique_ptr<prometheus::Exposer>> exposer =
      metrics.Expose({.address = "127.0.0.1:0", .scrape_token = kScrapeToken});
  ASSERT_TRUE(exposer.ok()) << exposer.status();
  const int port = (*exposer)->GetListeningPorts().at(0);
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(5);
  httplib::Result anonymous = client.Get("/metrics");
  ASSERT_TRUE(anonymous) << anonymous.error();
  EXPECT_EQ(anonymous->status, 401) << "no password";
  client.set_basic_auth("prometheus", "scrape-token-0123456789abcdeX");
  httplib::Result wrong = client.Get("/metrics");
  ASSERT_TRUE(wrong) << wrong.error();
  EXPECT_EQ(wrong->status, 401) << "a wrong password";
  client.set_basic_auth("prometheus", kScrapeToken);
  httplib::Result right = client.Get("/metrics");
  ASSERT_TRUE(right) << right.error();
  EXPECT_EQ(right->status, 200) << "the scrape token";
  EXPECT_THAT(right->body, HasSubstr("parity_worker_runs_in_flight"));
}

// GET /metrics of a worker's exposer; parse errors fail the test.
Exposition Scrape(int port) {
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(5);
  client.set_basic_auth("prometheus", kScrapeToken);
  httplib::Result response = client.Get("/metrics");
  if (!response) {
    ADD_FAILURE() << "GET /metrics on port " << port << " failed: " << response.error();
    return {};
  }
  Exposition e = ParseExposition(response->body);
  EXPECT_THAT(e.errors, IsEmpty());
  return e;
}

TEST(WorkerMetricsDaemonTest, ScrapedFromARealWorkerWhileARunTrains) {
  const fs::path root = fs::path(::testing::TempDir()) / "worker_metrics_daemon";
  fs::remove_all(root);
  fs::create_directories(root / "corpus");
  std::ofstream(root / "corpus" / "tiny.txt") << "a small dataset\n";
  FakeSchedulerClient fake;
  {
    parity::v1::LeaseRunResponse lease;
    lease.mutable_lease()->set_run_id("run-1");
    lease.mutable_lease()->set_lease_epoch(1);
    lease.mutable_run()->set_run_id("run-1");
    lease.mutable_run()->set_attempt(1);
    lease.mutable_run()->mutable_spec()->set_name("dense-1C-0");
    lease.mutable_run()->mutable_spec()->mutable_data()->set_corpus("tiny");
    lease.mutable_run()->mutable_spec()->mutable_training()->set_steps(60);
    lease.mutable_run()->mutable_spec()->mutable_resources()->set_cpu_threads(1);
    absl::MutexLock l(&fake.mu);
    fake.leases = {lease};
  }
  WorkerMetrics metrics;
  absl::StatusOr<std::unique_ptr<prometheus::Exposer>> exposer =
      metrics.Expose({.address = "127.0.0.1:0", .scrape_token = kScrapeToken});
  ASSERT_TRUE(exposer.ok()) << exposer.status();
  const int port = (*exposer)->GetListeningPorts().at(0);

  WorkerOptions options;
  options.hostname = "metrics-host";
  options.lease_wait = absl::Milliseconds(50);
  options.run.train_binary = PARITY_FAKE_ENGINE;
  options.run.checkpoint_root = (root / "ckpt").string();
  options.run.work_root = (root / "work").string();
  options.run.corpus_dir = (root / "corpus").string();
  options.run.heartbeat_interval = absl::Milliseconds(100);
  options.run.engine_env = {{"FAKE_STEP_MS", "50"}};  // 60 steps: about 3 s of training
  options.backoff = {.initial = absl::Milliseconds(10), .max = absl::Milliseconds(100)};
  options.metrics = &metrics;
  parity::v1::Device cpu = Device(parity::v1::DEVICE_KIND_CPU, 0, 8ull << 30, 2);
  DeviceSlots slots({cpu}, /*max_runs=*/1);
  WorkerDaemon daemon(fake, slots, options);
  std::thread loop([&] { EXPECT_TRUE(daemon.Run().ok()); });

  // While it trains: its live series, the CPU busy.
  std::optional<double> tokens_per_second, val_bpc;
  Exposition during;
  for (int i = 0; i < 100 && !(tokens_per_second && val_bpc); ++i) {
    absl::SleepFor(absl::Milliseconds(50));
    during = Scrape(port);
    tokens_per_second = during.Value("parity_worker_run_tokens_per_second",
                                     {{"run_id", "run-1"}, {"run_name", "dense-1C-0"}});
    val_bpc = during.Value("parity_worker_run_val_bpc", {{"run_id", "run-1"}});
  }
  EXPECT_THAT(tokens_per_second, Optional(5e4)) << "the fake engine reports 5e4 tokens/s";
  EXPECT_TRUE(val_bpc.has_value()) << "the fake engine evaluates every 5 steps";
  EXPECT_THAT(during.Value("parity_worker_runs_in_flight"), Optional(1.0));
  EXPECT_THAT(during.Value("parity_worker_device_busy", {{"kind", "cpu"}}), Optional(1.0));
  EXPECT_THAT(during.Value("parity_worker_lease_attempts_total", {{"result", "leased"}}),
              Optional(1.0));

  // After it: no per-run series, the outcome counted, every point forwarded.
  bool completed = false;
  for (int i = 0; i < 200 && !completed; ++i) {
    absl::SleepFor(absl::Milliseconds(50));
    absl::MutexLock l(&fake.mu);
    completed = !fake.completes.empty();
  }
  ASSERT_TRUE(completed) << "the run should complete";
  Exposition after;
  for (int i = 0; i < 100; ++i) {  // the outcome is counted just after CompleteRun returns
    after = Scrape(port);
    if (after.Value("parity_worker_runs_in_flight") == 0.0) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  daemon.Shutdown();
  loop.join();
  EXPECT_THAT(after.Series("parity_worker_run_tokens_per_second"), IsEmpty());
  EXPECT_THAT(after.Series("parity_worker_run_val_bpc"), IsEmpty());
  EXPECT_THAT(after.Value("parity_worker_runs_in_flight"), Optional(0.0));
  EXPECT_THAT(after.Value("parity_worker_runs_finished_total", {{"outcome", "succeeded"}}),
              Optional(1.0));
  absl::MutexLock l(&fake.mu);
  EXPECT_THAT(after.Value("parity_worker_metric_points_forwarded_total"),
              Optional(static_cast<double>(fake.points.size())));
  EXPECT_THAT(after.Value("parity_worker_heartbeats_total"),
              Optional(static_cast<double>(fake.heartbeat_calls)));
}

}  // namespace
}  // namespace parity::worker
