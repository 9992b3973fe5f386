// The scheduler's Prometheus metrics against a throwaway PostgreSQL: a real SchedulerServer with
// its metrics endpoint, driven over real gRPC and scraped over HTTP as Prometheus would (the
// exposition parsed and linted by promtool, its families checked against
// deploy/prometheus/metrics.txt); then SchedulerMetrics on its own for the scrape cache, the
// cardinality bound, the reaper counters and a database that is away.
#include <grpcpp/grpcpp.h>
#include <httplib.h>

#include <memory>
#include <string>

#include "core/summary_check.h"
#include "gmock/gmock.h"
#include "parity/v1/sweep_service.grpc.pb.h"
#include "parity/v1/worker_service.grpc.pb.h"
#include "server/scheduler_server.h"
#include "server/scheduling/scheduler_metrics.h"
#include "tests/scheduler/scheduler_fixture.h"
#include "tests/support/prometheus_text.h"
#include "tests/support/test_tokens.h"

namespace parity::server::testing {
namespace {

using parity::testing::Exposition;
using parity::testing::ParseExposition;
using ::testing::IsEmpty;
using ::testing::Optional;

const std::string kMetricList = std::string(PARITY_SOURCE_DIR) + "/deploy/prometheus/metrics.txt";

// GET /metrics as Prometheus does, with a token as the basic-auth password (the metrics port
// knows no bearer tokens); "" (and a test failure) when the endpoint does not answer.
std::string Scrape(int port) {
  httplib::Client client("127.0.0.1", port);
  client.set_basic_auth("prometheus", parity::testing::kTestAdminToken);
  client.set_connection_timeout(5);
  client.set_read_timeout(10);
  httplib::Result response = client.Get("/metrics");
  if (!response) {
    ADD_FAILURE() << "GET 127.0.0.1:" << port << "/metrics failed: " << response.error();
    return "";
  }
  EXPECT_EQ(response->status, 200);
  EXPECT_THAT(response->get_header_value("Content-Type"), ::testing::HasSubstr("text/plain"));
  return response->body;
}

class MetricsEndpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    PARITY_REQUIRE_POSTGRES();
    ServerOptions options;
    options.listen_address = "127.0.0.1:0";
    options.bootstrap_token = parity::testing::kTestAdminToken;
    options.metrics_listen = "127.0.0.1:0";
    options.database_url = parity::testing::PostgresEnvironment::FreshDatabase();
    options.pool_size = 4;
    options.reap_interval = absl::Milliseconds(100);
    options.scheduler.lease_ttl = absl::Seconds(30);
    options.scheduler.idle_poll_interval = absl::Milliseconds(100);
    absl::StatusOr<std::unique_ptr<SchedulerServer>> server =
        SchedulerServer::Start(options, &StubPlanner);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    ASSERT_NE(server_->metrics(), nullptr);
    ASSERT_GT(server_->metrics_port(), 0);
    auto channel = parity::testing::TokenChannel(server_->port());
    sweeps_ = v1::SweepService::NewStub(channel);
    workers_ = v1::WorkerService::NewStub(channel);
  }

  std::unique_ptr<grpc::ClientContext> Context() {
    auto context = std::make_unique<grpc::ClientContext>();
    context->set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    return context;
  }

  v1::LeaseRunResponse Lease(const std::string& worker) {
    v1::LeaseRunRequest request;
    request.set_worker_id(worker);
    *request.add_free_devices() = CpuDevice();
    request.mutable_wait_time()->set_seconds(5);
    v1::LeaseRunResponse leased;
    const grpc::Status status = workers_->LeaseRun(Context().get(), request, &leased);
    EXPECT_TRUE(status.ok()) << status.error_message();
    EXPECT_TRUE(leased.has_lease());
    return leased;
  }

  std::unique_ptr<SchedulerServer> server_;
  std::unique_ptr<v1::SweepService::Stub> sweeps_;
  std::unique_ptr<v1::WorkerService::Stub> workers_;
};

TEST_F(MetricsEndpointTest, ScrapeShowsWhatTheApiDid) {
  // A sweep of 3 runs: one finished, one leased, one waiting.
  v1::SubmitSweepRequest submit;
  *submit.mutable_spec() = MakeSweepSpec("watched", 3);
  v1::SubmitSweepResponse submitted;
  ASSERT_TRUE(sweeps_->SubmitSweep(Context().get(), submit, &submitted).ok());
  v1::RegisterWorkerRequest registration;
  registration.set_hostname("metrics-test");
  *registration.add_devices() = CpuDevice();
  v1::RegisterWorkerResponse registered;
  ASSERT_TRUE(workers_->RegisterWorker(Context().get(), registration, &registered).ok());

  const v1::LeaseRunResponse first = Lease(registered.worker_id());
  v1::ReportMetricsRequest report;
  report.set_run_id(first.run().run_id());
  report.set_lease_epoch(first.lease().lease_epoch());
  report.set_lease_secret(first.lease_secret());
  for (uint64_t step = 1; step <= 5; ++step) *report.add_points() = Point(step, 1.5);
  v1::ReportMetricsResponse reported;
  ASSERT_TRUE(workers_->ReportMetrics(Context().get(), report, &reported).ok());
  report.mutable_points()->DeleteSubrange(2, 3);  // steps 1 and 2 again: duplicates
  ASSERT_TRUE(workers_->ReportMetrics(Context().get(), report, &reported).ok());
  ASSERT_EQ(reported.duplicates(), 2u);
  v1::CompleteRunRequest complete;
  complete.set_run_id(first.run().run_id());
  complete.set_lease_epoch(first.lease().lease_epoch());
  complete.set_lease_secret(first.lease_secret());
  *complete.mutable_success() = core::PlannedSummary(first.run().spec(), 1.4, 1.4);
  v1::CompleteRunResponse completed;
  ASSERT_TRUE(workers_->CompleteRun(Context().get(), complete, &completed).ok());
  Lease(registered.worker_id());
  // A call the scheduler refuses, to be counted under its code.
  v1::GetSweepRequest bad;
  bad.set_sweep_id("not-a-uuid");
  v1::GetSweepResponse unused;
  ASSERT_EQ(sweeps_->GetSweep(Context().get(), bad, &unused).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);

  const std::string text = Scrape(server_->metrics_port());
  const Exposition m = ParseExposition(text);
  EXPECT_THAT(m.errors, IsEmpty()) << text;

  EXPECT_THAT(m.Value("parity_scheduler_database_up"), Optional(1.0));
  EXPECT_THAT(m.Value("parity_scheduler_runs", {{"state", "PENDING"}}), Optional(1.0));
  EXPECT_THAT(m.Value("parity_scheduler_runs", {{"state", "LEASED"}}), Optional(1.0));
  EXPECT_THAT(m.Value("parity_scheduler_runs", {{"state", "RUNNING"}}), Optional(0.0));
  EXPECT_THAT(m.Value("parity_scheduler_runs", {{"state", "SUCCEEDED"}}), Optional(1.0));
  const std::string sweep = submitted.sweep().sweep_id();
  EXPECT_THAT(m.Value("parity_scheduler_sweep_runs",
                      {{"sweep", sweep}, {"sweep_name", "watched"}, {"state", "PENDING"}}),
              Optional(1.0));
  EXPECT_THAT(m.Value("parity_scheduler_sweep_runs", {{"sweep", sweep}, {"state", "SUCCEEDED"}}),
              Optional(1.0));
  EXPECT_THAT(m.Value("parity_scheduler_sweep_runs", {{"sweep", "other"}, {"state", "PENDING"}}),
              Optional(0.0));
  EXPECT_THAT(m.Value("parity_scheduler_queue_depth"), Optional(1.0));
  EXPECT_THAT(m.Value("parity_scheduler_live_workers"), Optional(1.0));
  EXPECT_THAT(m.Value("parity_scheduler_sweeps_submitted_total", {{"deduplicated", "false"}}),
              Optional(1.0));
  EXPECT_THAT(m.Value("parity_scheduler_leases_total"), Optional(2.0));
  EXPECT_THAT(m.Value("parity_scheduler_lease_wait_seconds_count"), Optional(2.0));
  EXPECT_THAT(m.Value("parity_scheduler_metric_points_ingested_total"), Optional(5.0));
  EXPECT_THAT(m.Value("parity_scheduler_metric_points_duplicates_total"), Optional(2.0));
  EXPECT_THAT(m.Value("parity_scheduler_runs_completed_total",
                      {{"state", "SUCCEEDED"}, {"failure_class", "none"}}),
              Optional(1.0));
  EXPECT_THAT(m.Value("parity_scheduler_rpcs_total", {{"method", "LeaseRun"}, {"code", "OK"}}),
              Optional(2.0));
  EXPECT_THAT(m.Value("parity_scheduler_rpcs_total", {{"method", "ReportMetrics"}, {"code", "OK"}}),
              Optional(2.0));
  EXPECT_THAT(m.Value("parity_scheduler_rpcs_total",
                      {{"method", "GetSweep"}, {"code", "INVALID_ARGUMENT"}}),
              Optional(1.0));
  // Every method of both services has its series from the start.
  EXPECT_THAT(m.Value("parity_scheduler_rpcs_total", {{"method", "AnalyzeSweep"}, {"code", "OK"}}),
              Optional(0.0));
  EXPECT_THAT(m.Value("parity_scheduler_rpc_duration_seconds_count", {{"method", "LeaseRun"}}),
              Optional(2.0));
  EXPECT_THAT(m.Value("parity_scheduler_rpc_duration_seconds_bucket",
                      {{"method", "LeaseRun"}, {"le", "+Inf"}}),
              Optional(2.0));
  // A lone replica leads the upkeep from its start (server/leadership/).
  EXPECT_THAT(m.Value("parity_scheduler_is_leader"), Optional(1.0));
  EXPECT_THAT(m.Value("parity_scheduler_leadership_changes_total", {{"change", "gained"}}),
              Optional(1.0));
  EXPECT_THAT(m.Value("parity_scheduler_leadership_changes_total", {{"change", "lost"}}),
              Optional(0.0));

  // The scrape and the HTTP server's hook render the same families.
  const Exposition rendered = ParseExposition(server_->metrics()->Render());
  EXPECT_THAT(rendered.errors, IsEmpty());
  for (const auto& [family, type] : rendered.type) EXPECT_EQ(m.type.count(family), 1u) << family;

  // What the dashboards and alerts are checked against is what is exported.
  EXPECT_THAT(parity::testing::CompareWithList(m, parity::testing::ReadMetricList(kMetricList),
                                               "parity_scheduler_"),
              IsEmpty());

  const parity::testing::PromtoolResult lint =
      parity::testing::PromtoolCheckMetrics(text, ::testing::TempDir() + "/scheduler_metrics.prom");
  EXPECT_EQ(lint.exit_status, 0) << lint.output;
  EXPECT_EQ(lint.output, "") << "promtool check metrics found problems";
}

class SchedulerMetricsTest : public SchedulerTest {
 protected:
  void SetUp() override {
    SchedulerTest::SetUp();
    if (HasFatalFailure() || IsSkipped()) return;
    metrics_ = std::make_unique<SchedulerMetrics>(
        *store_, metrics_clock_,
        SchedulerMetricsOptions{.refresh_interval = absl::Seconds(1), .counts = {.max_sweeps = 3}});
    scheduler_ = std::make_unique<SchedulerUnderTest>(*store_, signal_, clock_, &StubPlanner,
                                                      options_, metrics_.get());
  }

  // A fresh read of the database, past the cache.
  Exposition Fresh() {
    metrics_clock_.Advance(absl::Seconds(1));
    Exposition e = ParseExposition(metrics_->Render());
    EXPECT_THAT(e.errors, IsEmpty());
    return e;
  }

  FakeClock metrics_clock_{
      absl::FromUnixSeconds(1'700'000'000)};  // moved by hand: the scrape cache
  std::unique_ptr<SchedulerMetrics> metrics_;
};

TEST_F(SchedulerMetricsTest, DatabaseGaugesAreCachedForTheRefreshInterval) {
  Submit(MakeSweepSpec("a", 2));
  EXPECT_THAT(Fresh().Value("parity_scheduler_runs", {{"state", "PENDING"}}), Optional(2.0));
  Submit(MakeSweepSpec("b", 3));
  metrics_clock_.Advance(absl::Milliseconds(900));
  EXPECT_THAT(
      ParseExposition(metrics_->Render()).Value("parity_scheduler_runs", {{"state", "PENDING"}}),
      Optional(2.0))
      << "read the database again within the refresh interval";
  // Counters are never cached: the second submission shows at once.
  EXPECT_THAT(ParseExposition(metrics_->Render())
                  .Value("parity_scheduler_sweeps_submitted_total", {{"deduplicated", "false"}}),
              Optional(2.0));
  metrics_clock_.Advance(absl::Milliseconds(100));
  EXPECT_THAT(
      ParseExposition(metrics_->Render()).Value("parity_scheduler_runs", {{"state", "PENDING"}}),
      Optional(5.0));
}

TEST_F(SchedulerMetricsTest, SeriesStayBoundedHoweverManySweepsThereAre) {
  Submit(MakeSweepSpec("finished-0", 1));
  FinishRuns(1);
  const Exposition one = Fresh();
  EXPECT_EQ(one.Series("parity_scheduler_sweep_runs").size(), 6u)  // sweep="other", each state
      << "a finished sweep has no series of its own";

  for (int i = 1; i < 20; ++i) {
    Submit(MakeSweepSpec(absl::StrCat("finished-", i), 1));
    FinishRuns(1);
  }
  const Exposition twenty = Fresh();
  EXPECT_EQ(twenty.samples.size(), one.samples.size()) << "finished sweeps added series";
  EXPECT_THAT(twenty.Value("parity_scheduler_runs", {{"state", "SUCCEEDED"}}), Optional(20.0));
  EXPECT_THAT(
      twenty.Value("parity_scheduler_sweep_runs", {{"sweep", "other"}, {"state", "SUCCEEDED"}}),
      Optional(20.0));

  // Five unfinished sweeps, max_sweeps = 3: the three newest on their own, two under "other".
  std::vector<std::string> open;
  for (int i = 0; i < 5; ++i) open.push_back(Submit(MakeSweepSpec("open", 1)).sweep().sweep_id());
  const Exposition capped = Fresh();
  EXPECT_EQ(capped.Series("parity_scheduler_sweep_runs").size(), (3u + 1u) * 6u);
  for (int i = 2; i < 5; ++i) {
    EXPECT_THAT(
        capped.Value("parity_scheduler_sweep_runs", {{"sweep", open[i]}, {"state", "PENDING"}}),
        Optional(1.0))
        << "sweep " << i;
  }
  EXPECT_THAT(
      capped.Value("parity_scheduler_sweep_runs", {{"sweep", "other"}, {"state", "PENDING"}}),
      Optional(2.0));
  EXPECT_THAT(capped.Value("parity_scheduler_runs", {{"state", "PENDING"}}), Optional(5.0));
  EXPECT_THAT(capped.Value("parity_scheduler_queue_depth"), Optional(5.0));
}

TEST_F(SchedulerMetricsTest, CountsCompletionsByClassAndReaperOutcomes) {
  options_.lease_ttl = absl::Milliseconds(500);
  // The passes here may be seconds apart on a busy machine: no silence is an outage (the default,
  // a third of the TTL, would begin a grace and reap nothing).
  options_.outage_silence = absl::Minutes(1);
  scheduler_ = std::make_unique<SchedulerUnderTest>(*store_, signal_, clock_, &StubPlanner,
                                                    options_, metrics_.get());
  ASSERT_TRUE(scheduler_->ReapExpiredLeases().ok());  // records the liveness, no outage
  Submit(MakeSweepSpec("retries", 2));
  const std::string worker = Register();
  absl::StatusOr<v1::LeaseRunResponse> failing = LeaseNow(worker);
  ASSERT_TRUE(failing.ok() && failing->has_lease()) << failing.status();
  v1::CompleteRunRequest complete;
  complete.set_run_id(failing->run().run_id());
  complete.set_lease_epoch(failing->lease().lease_epoch());
  complete.set_lease_secret(failing->lease_secret());
  complete.mutable_failure()->set_failure_class(v1::FAILURE_CLASS_USER_ERROR);
  ASSERT_TRUE(scheduler_->CompleteRun(complete).ok());

  absl::StatusOr<v1::LeaseRunResponse> expiring = LeaseNow(worker);
  ASSERT_TRUE(expiring.ok() && expiring->has_lease()) << expiring.status();
  absl::SleepFor(absl::Milliseconds(700));
  absl::StatusOr<ReapResult> reaped = scheduler_->ReapExpiredLeases();
  ASSERT_TRUE(reaped.ok()) << reaped.status();
  ASSERT_EQ(reaped->requeued, 1);

  const Exposition m = Fresh();
  EXPECT_THAT(m.Value("parity_scheduler_runs_completed_total",
                      {{"state", "FAILED"}, {"failure_class", "USER_ERROR"}}),
              Optional(1.0));
  EXPECT_THAT(m.Value("parity_scheduler_reaped_leases_total", {{"outcome", "requeued"}}),
              Optional(1.0));
  EXPECT_THAT(m.Value("parity_scheduler_reaped_leases_total", {{"outcome", "failed"}}),
              Optional(0.0));
  EXPECT_THAT(
      m.Value("parity_scheduler_reaped_leases_total", {{"outcome", "requeued_after_outage"}}),
      Optional(0.0));
  EXPECT_THAT(m.Value("parity_scheduler_lease_grace_total"), Optional(0.0));
  EXPECT_THAT(m.Value("parity_scheduler_reaper_errors_total"), Optional(0.0));
  EXPECT_THAT(m.Value("parity_scheduler_leases_total"), Optional(2.0));
}

TEST(SchedulerMetricsWithoutDatabase, ReportsTheDatabaseDownAndCountsReaperErrors) {
  // Nothing listens on port 1: every connection attempt is refused at once.
  PostgresRunStore store(
      PostgresRunStoreOptions{"postgresql://postgres@127.0.0.1:1/none?connect_timeout=2", 1});
  RealClock clock;
  WorkSignal signal;
  SchedulerMetrics metrics(store, clock);
  SchedulerUnderTest scheduler(store, signal, clock, &StubPlanner, SchedulerOptions{}, &metrics);
  EXPECT_FALSE(scheduler.ReapExpiredLeases().ok());

  const Exposition m = ParseExposition(metrics.Render());
  EXPECT_THAT(m.errors, IsEmpty());
  EXPECT_THAT(m.Value("parity_scheduler_database_up"), Optional(0.0));
  EXPECT_THAT(m.Series("parity_scheduler_runs"), IsEmpty()) << "stale or made-up counts";
  EXPECT_THAT(m.Value("parity_scheduler_reaper_errors_total"), Optional(1.0));
}

TEST(SchedulerMetricsRpc, MethodsOutsideTheApiShareOneLabel) {
  PostgresRunStore store(PostgresRunStoreOptions{"postgresql://127.0.0.1:1/none", 1});
  RealClock clock;
  SchedulerMetrics metrics(store, clock);
  metrics.ObserveRpc("/parity.v1.WorkerService/Heartbeat", absl::StatusCode::kFailedPrecondition,
                     absl::Milliseconds(3));
  metrics.ObserveRpc("CompleteRun", absl::StatusCode::kOk, absl::Milliseconds(3));
  metrics.ObserveRpc("/grpc.health.v1.Health/Check", absl::StatusCode::kOk, absl::Milliseconds(1));
  metrics.ObserveRpc("/made.up.Service/Method", absl::StatusCode::kUnimplemented,
                     absl::Milliseconds(1));
  const Exposition m = ParseExposition(metrics.Render());
  EXPECT_THAT(m.Value("parity_scheduler_rpcs_total",
                      {{"method", "Heartbeat"}, {"code", "FAILED_PRECONDITION"}}),
              Optional(1.0));
  EXPECT_THAT(m.Value("parity_scheduler_rpcs_total", {{"method", "CompleteRun"}, {"code", "OK"}}),
              Optional(1.0));
  EXPECT_THAT(m.Value("parity_scheduler_rpcs_total", {{"method", "other"}, {"code", "OK"}}),
              Optional(1.0));
  EXPECT_THAT(
      m.Value("parity_scheduler_rpcs_total", {{"method", "other"}, {"code", "UNIMPLEMENTED"}}),
      Optional(1.0));
  std::set<std::string> methods;
  for (const auto& s : m.Series("parity_scheduler_rpcs_total"))
    methods.insert(s.labels.at("method"));
  EXPECT_EQ(methods.size(), 22u) << "13 SweepService + 8 WorkerService methods + other";
}

}  // namespace
}  // namespace parity::server::testing
