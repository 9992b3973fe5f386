// The web dashboard end to end: a throwaway PostgreSQL, a real SchedulerServer with its HTTP
// port on a free port, a 54-run sweep (two seeds; dense runs at three sizes per budget, so the
// analysis has a compute-optimal frontier) seeded through the real gRPC API by fake workers
// (study_seeder.h), then
//   - the /api/v1 JSON API and its errors over real HTTP;
//   - the pages in headless Chromium driven by Playwright (dashboard_browser.mjs): tables have
//     their rows, sorting reorders them, every chart drew its points, and a live update (more
//     metrics reported while the page is open) shows up without a reload;
//   - `parity report` against the same scheduler, opened from file:// in Chromium;
//   - the same analysis figures in the API's JSON, `parity report`'s analysis.md and the Python
//     client's analyze() (analysis_figures.py).
// Screenshots land in the build tree (PARITY_SCREENSHOT_DIR) for inspection. Missing Chromium or
// node modules fail the test: deploy/setup.sh installs them.
#include <httplib.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/planner.h"
#include "core/spec_loader.h"
#include "gtest/gtest.h"
#include "server/scheduler_server.h"
#include "tests/dashboard/child_runner.h"
#include "tests/dashboard/study_seeder.h"
#include "tests/support/postgres_environment.h"
#include "tests/support/test_certificates.h"
#include "tests/support/test_tokens.h"

namespace parity::dashboard_testing {
namespace {

using nlohmann::json;

constexpr char kUnknownId[] = "7f0c2a4e-5b1d-4c3e-9a8f-0123456789ab";

std::string Chromium() {
  const char* path = std::getenv("PARITY_CHROMIUM");
  return path != nullptr ? path : "/usr/bin/chromium";
}

class DashboardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    PARITY_REQUIRE_POSTGRES();
    server::ServerOptions options;
    options.listen_address = "127.0.0.1:0";
    options.bootstrap_token = parity::testing::kTestAdminToken;
    options.http_listen = "127.0.0.1:0";
    options.database_url = parity::testing::PostgresEnvironment::FreshDatabase();
    database_url_ = options.database_url;
    options.pool_size = 6;
    options.scheduler.lease_ttl = absl::Minutes(10);  // the RUNNING runs stay leased throughout
    options.scheduler.heartbeat_interval = absl::Seconds(30);
    options.scheduler.idle_poll_interval = absl::Milliseconds(100);
    absl::StatusOr<std::unique_ptr<server::SchedulerServer>> started =
        server::SchedulerServer::Start(options, &PlanWithDenseSizes);
    ASSERT_TRUE(started.ok()) << started.status();
    server_ = std::move(*started);
    ASSERT_GT(server_->http_port(), 0);
    channel_ = parity::testing::TokenChannel(server_->port());
    absl::StatusOr<v1::SweepSpec> spec =
        core::LoadSweepSpecFile("tests/dashboard/dashboard_sweep.yaml");
    ASSERT_TRUE(spec.ok()) << spec.status();
    seeder_ = std::make_unique<StudySeeder>(channel_);
    absl::StatusOr<SeededStudy> study = seeder_->Seed(*spec);
    ASSERT_TRUE(study.ok()) << study.status();
    study_ = std::move(*study);
    http_ = std::make_unique<httplib::Client>("127.0.0.1", server_->http_port());
    http_->set_bearer_token_auth(parity::testing::kTestAdminToken);
    screenshots_ = PARITY_SCREENSHOT_DIR;
    std::filesystem::create_directories(screenshots_);
    scratch_ = std::filesystem::path(::testing::TempDir()) /
               absl::StrCat("dashboard-", ::testing::UnitTest::GetInstance()->random_seed(), "-",
                            getpid());
    std::filesystem::remove_all(scratch_);
    std::filesystem::create_directories(scratch_);
  }

  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown(absl::Seconds(2));
    std::filesystem::remove_all(scratch_);
  }

  struct Reply {
    int status = 0;
    std::string content_type;
    std::string body;
    json doc;  // parsed when the body is JSON
  };

  Reply Get(const std::string& path) {
    Reply reply;
    httplib::Result result = http_->Get(path.c_str());
    if (!result) {
      ADD_FAILURE() << "GET " << path << " failed: " << httplib::to_string(result.error());
      return reply;
    }
    reply.status = result->status;
    reply.content_type = result->get_header_value("Content-Type");
    reply.body = result->body;
    if (reply.content_type == "application/json") reply.doc = json::parse(reply.body);
    return reply;
  }

  const SeededRun& Run(const std::string& name) { return study_.runs.at(name); }
  int Runs() const { return static_cast<int>(study_.runs.size()); }
  int Unfinished() const {
    return static_cast<int>(std::size(kRunningRuns) + std::size(kPendingRuns));
  }
  std::string BaseUrl() const { return absl::StrCat("http://127.0.0.1:", server_->http_port()); }

  // node dashboard_browser.mjs with the common arguments; `extra` appended.
  std::vector<std::string> BrowserCommand(const std::vector<std::string>& extra) {
    std::vector<std::string> argv = {PARITY_NODE_BIN,  PARITY_BROWSER_SCRIPT,
                                     "--node-modules", PARITY_NODE_MODULES,
                                     "--chromium",     Chromium(),
                                     "--screenshots",  screenshots_.string(),
                                     "--sweep",        study_.sweep_id,
                                     "--sweep-name",   "dashboard-study",
                                     "--runs",         std::to_string(study_.runs.size()),
                                     "--succeeded",    std::to_string(Runs() - Unfinished()),
                                     "--moe-run",      Run(kRunningRuns[0]).run.run_id(),
                                     "--dense-run",    Run("dense-1C-C1-unique-s0").run.run_id()};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return argv;
  }

  std::unique_ptr<server::SchedulerServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<StudySeeder> seeder_;
  SeededStudy study_;
  std::unique_ptr<httplib::Client> http_;
  std::string database_url_;
  std::filesystem::path screenshots_;
  std::filesystem::path scratch_;
};

TEST_F(DashboardTest, ApiServesTheSeededSweep) {
  const std::string sweep = absl::StrCat("/api/v1/sweeps/", study_.sweep_id);
  Reply sweeps = Get("/api/v1/sweeps");
  ASSERT_EQ(sweeps.status, 200) << sweeps.body;
  ASSERT_EQ(sweeps.doc["sweeps"].size(), 1u);
  EXPECT_EQ(Runs(), 54) << "16 MoE and 8 dense grid points × 2 seeds, less 6 runs planned once for "
                           "two groups, plus 2 more sizes of each of the 6 unique-data dense runs";
  EXPECT_EQ(sweeps.doc["sweeps"][0]["spec"]["name"], "dashboard-study");
  EXPECT_EQ(sweeps.doc["sweeps"][0]["counts"]["running"], 2);
  EXPECT_EQ(sweeps.doc["sweeps"][0]["counts"]["pending"], 2);
  EXPECT_EQ(sweeps.doc["sweeps"][0]["counts"]["succeeded"], Runs() - Unfinished());

  Reply runs = Get(sweep + "/runs?page_size=1000");
  ASSERT_EQ(runs.status, 200) << runs.body;
  EXPECT_EQ(runs.doc["runs"].size(), size_t(Runs()));
  Reply running = Get(sweep + "/runs?state=running");
  EXPECT_EQ(running.doc["runs"].size(), 2u) << running.body;
  Reply results = Get(sweep + "/results");
  ASSERT_EQ(results.status, 200);
  EXPECT_EQ(results.doc["rows"].size(), size_t(Runs()));
  Reply analysis = Get(sweep + "/analysis");
  ASSERT_EQ(analysis.status, 200) << analysis.body;
  EXPECT_GE(analysis.doc["dense_fit"]["points"].get<int>(), 4);
  EXPECT_EQ(analysis.doc["dense_fit"]["budgets"].get<int>(), 3) << "dense at 2e10, 4e10, 8e10";
  EXPECT_TRUE(analysis.doc["dense_fit"].contains("b_interval")) << analysis.body;
  EXPECT_GE(analysis.doc["dense_fit"]["c"].get<double>(), 0.0) << "the floor is never negative";
  EXPECT_EQ(analysis.doc["dense_fit_refusal"], "");
  ASSERT_GE(analysis.doc["optimal_activation"].size(), 3u) << analysis.body;
  for (const json& optimum : analysis.doc["optimal_activation"]) {
    if (optimum["status"] == "OPTIMUM_STATUS_BRACKETED") {
      EXPECT_GE(optimum["activation_rate"].get<double>(), 0.14) << optimum.dump();
      EXPECT_LE(optimum["activation_rate"].get<double>(), 0.61) << optimum.dump();
    } else {
      EXPECT_NE(optimum["reason"].get<std::string>(), "") << optimum.dump();
    }
  }
  EXPECT_GE(analysis.doc["grid_points"].size(), 16u);

  Reply curves = Get(sweep + "/curves?points=5");
  ASSERT_EQ(curves.status, 200) << curves.body;
  EXPECT_GE(curves.doc["runs"].size(), 20u);
  for (const json& curve : curves.doc["runs"]) {
    EXPECT_LE(curve["val_bpc"].size(), 6u) << "sampled to about 5 points: " << curve.dump();
    EXPECT_EQ(curve["tokens"].size(), curve["val_bpc"].size());
  }
  const std::string moe = Run("moe-ra15-C2-unique-s0").run.run_id();
  Reply one = Get(sweep + "/curves?run_id=" + moe);
  ASSERT_EQ(one.doc["runs"].size(), 1u);
  EXPECT_EQ(one.doc["runs"][0]["run_id"], moe);
  EXPECT_NEAR(one.doc["runs"][0]["val_bpc"].back().get<double>(),
              SyntheticFinalBpc(Run("moe-ra15-C2-unique-s0").run.spec()), 1e-9);

  Reply history = Get(absl::StrCat("/api/v1/runs/", moe, "/history?points=8"));
  ASSERT_EQ(history.status, 200) << history.body;
  EXPECT_LE(history.doc["step"].size(), 9u);
  EXPECT_EQ(history.doc["step"].back(), Run("moe-ra15-C2-unique-s0").run.spec().training().steps());
  ASSERT_FALSE(history.doc["expert_load"].empty());
  EXPECT_EQ(history.doc["latest_expert_load"]["layers"][0]["shares"].size(),
            Run("moe-ra15-C2-unique-s0").run.spec().model().moe().num_experts());

  // Raw points page by page: after_step is exclusive, next_after_step the cursor.
  const std::string metrics = absl::StrCat("/api/v1/runs/", moe, "/metrics");
  Reply first = Get(metrics + "?limit=3");
  ASSERT_EQ(first.doc["points"].size(), 3u) << first.body;
  const std::string cursor = first.doc["next_after_step"];
  EXPECT_EQ(cursor, first.doc["points"][2]["step"]);
  Reply second = Get(metrics + "?limit=3&after_step=" + cursor);
  ASSERT_EQ(second.doc["points"].size(), 3u);
  EXPECT_GT(std::stoll(second.doc["points"][0]["step"].get<std::string>()), std::stoll(cursor));
  Reply last = Get(metrics + "?limit=10000");
  EXPECT_TRUE(last.doc["next_after_step"].is_null());
}

TEST_F(DashboardTest, ApiErrorsAreJsonWithTheirHttpStatus) {
  struct Case {
    std::string path;
    int status;
    std::string code;
  };
  const std::string run = Run("dense-1C-C1-unique-s0").run.run_id();
  for (const Case& c : std::vector<Case>{
           {absl::StrCat("/api/v1/sweeps/", kUnknownId), 404, "NOT_FOUND"},
           {absl::StrCat("/api/v1/sweeps/", kUnknownId, "/runs"), 404, "NOT_FOUND"},
           {absl::StrCat("/api/v1/sweeps/", kUnknownId, "/curves"), 404, "NOT_FOUND"},
           {absl::StrCat("/api/v1/runs/", kUnknownId), 404, "NOT_FOUND"},
           {absl::StrCat("/api/v1/runs/", kUnknownId, "/history"), 404, "NOT_FOUND"},
           {"/api/v1/sweeps/not-a-uuid", 400, "INVALID_ARGUMENT"},
           {absl::StrCat("/api/v1/runs/", run, "/metrics?limit=0"), 400, "INVALID_ARGUMENT"},
           {absl::StrCat("/api/v1/runs/", run, "/metrics?after_step=x"), 400, "INVALID_ARGUMENT"},
           {absl::StrCat("/api/v1/sweeps/", study_.sweep_id, "/runs?state=BOGUS"), 400,
            "INVALID_ARGUMENT"},
           {absl::StrCat("/api/v1/sweeps/", study_.sweep_id, "/curves?run_id=", kUnknownId), 400,
            "INVALID_ARGUMENT"},
           {absl::StrCat("/api/v1/sweeps/", study_.sweep_id, "/curves?run_id=not-a-uuid"), 400,
            "INVALID_ARGUMENT"},
           {absl::StrCat("/api/v1/sweeps/", kUnknownId, "/table"), 404, "NOT_FOUND"},
           {absl::StrCat("/api/v1/sweeps/", kUnknownId, "/summary"), 404, "NOT_FOUND"},
           {absl::StrCat("/api/v1/sweeps/", study_.sweep_id, "/table?page_size=201"), 400,
            "INVALID_ARGUMENT"},
           {absl::StrCat("/api/v1/sweeps/", study_.sweep_id, "/table?state=BOGUS"), 400,
            "INVALID_ARGUMENT"},
           {absl::StrCat("/api/v1/sweeps/", study_.sweep_id, "/table?order_by=no_such_field"), 400,
            "INVALID_ARGUMENT"},
           {"/api/v1/nothing-here", 404, "NOT_FOUND"},
       }) {
    Reply reply = Get(c.path);
    EXPECT_EQ(reply.status, c.status) << c.path << ": " << reply.body;
    ASSERT_EQ(reply.content_type, "application/json") << c.path;
    EXPECT_EQ(reply.doc["error"]["code"], c.code) << c.path;
    EXPECT_EQ(reply.doc["error"]["http_status"], c.status) << c.path;
  }
  Reply bad_limit = Get(absl::StrCat("/api/v1/runs/", run, "/metrics?limit=0"));
  EXPECT_EQ(bad_limit.doc["error"]["violations"][0]["field"], "limit") << bad_limit.body;
}

TEST_F(DashboardTest, ServesTheAppAssetsAndMetrics) {
  for (const std::string& path : {std::string("/"), "/sweeps/" + study_.sweep_id,
                                  "/runs/" + Run(kRunningRuns[0]).run.run_id()}) {
    Reply page = Get(path);
    EXPECT_EQ(page.status, 200) << path;
    EXPECT_EQ(page.content_type, "text/html; charset=utf-8");
    EXPECT_NE(page.body.find("<base href=\"/\">"), std::string::npos) << path;
  }
  Reply chart = Get("/assets/chart.umd.js");
  EXPECT_EQ(chart.status, 200);
  EXPECT_EQ(chart.content_type, "text/javascript; charset=utf-8");
  EXPECT_NE(chart.body.find("Chart.js v4."), std::string::npos);
  EXPECT_EQ(Get("/assets/missing.js").status, 404);
  EXPECT_EQ(Get("/no/such/page").status, 404);
  Reply metrics = Get("/metrics");
  EXPECT_EQ(metrics.status, 200) << metrics.body;
  EXPECT_EQ(metrics.content_type, "text/plain; version=0.0.4");
  EXPECT_NE(metrics.body.find("# TYPE"), std::string::npos) << metrics.body.substr(0, 300);
}

TEST_F(DashboardTest, DashboardInChromiumWithALiveUpdate) {
  ASSERT_TRUE(std::filesystem::exists(Chromium()))
      << Chromium() << " is missing: install Debian's chromium (deploy/setup.sh does)";
  const std::filesystem::path handshake = scratch_ / "handshake";
  std::filesystem::create_directories(handshake);
  bool reported = false;
  std::string report_error;
  // The script writes live-ready once the run page is drawn; more points then arrive, as a
  // training worker would send them, and the script waits for its charts to grow.
  auto answer_handshake = [&] {
    if (reported || !std::filesystem::exists(handshake / "live-ready")) return;
    reported = true;
    absl::Status more = seeder_->ReportMore(study_, kRunningRuns[0], 0.8);
    if (!more.ok()) report_error = more.ToString();
    std::ofstream(handshake / "live-reported") << (more.ok() ? "ok\n" : report_error);
  };
  const ChildResult result =
      RunChild(BrowserCommand({"--mode", "live", "--base-url", BaseUrl(), "--handshake",
                               handshake.string(), "--token", parity::testing::kTestAdminToken}),
               (scratch_ / "browser-live.log").string(), absl::Seconds(240), answer_handshake);
  EXPECT_TRUE(reported) << "the browser script never asked for the live update";
  EXPECT_TRUE(report_error.empty()) << report_error;
  EXPECT_FALSE(result.timed_out) << result.output;
  EXPECT_EQ(result.exit_code, 0) << result.output;
}

// A new user's first hour: every run of a sweep fails because no worker has its dataset
// (USER_ERROR, not retried). `parity submit --wait` must end with exit 4 and, in its last words,
// each distinct failure with its class, message, remedy and how many runs; `status` and
// `results` name the failure in a column; the dashboard shows a banner and a column on the
// sweep page and the reason on the run page (dashboard_browser.mjs --mode failed, axe-core too).
TEST_F(DashboardTest, AFailedSweepSaysWhyAndWhatToDoInTheCliAndTheDashboard) {
  const std::string scheduler = absl::StrCat("127.0.0.1:", server_->port());
  const std::vector<std::string> access = {"--scheduler", scheduler, "--token",
                                           parity::testing::kTestAdminToken};
  auto cli = [&](std::vector<std::string> argv) {
    argv.insert(argv.begin(), PARITY_CLI_BIN);
    argv.insert(argv.end(), access.begin(), access.end());
    return argv;
  };
  // The worker without the dataset: fails whatever it leases while the CLI waits.
  int failed = 0;
  std::string worker_error;
  auto play_worker = [&] {
    absl::StatusOr<int> n = seeder_->FailQueuedRuns(study_.worker_id, absl::Milliseconds(50));
    if (n.ok())
      failed += *n;
    else
      worker_error = n.status().ToString();
  };
  const absl::Time started = absl::Now();
  const ChildResult submit =
      RunChild(cli({"submit", "tests/dashboard/failing_sweep.yaml", "--wait"}),
               (scratch_ / "submit.log").string(), absl::Seconds(120), play_worker);
  EXPECT_LT(absl::Now() - started, absl::Seconds(60)) << "the failures are reported within seconds";
  ASSERT_TRUE(worker_error.empty()) << worker_error;
  ASSERT_FALSE(submit.timed_out) << submit.output;
  EXPECT_EQ(submit.exit_code, 4) << submit.output;
  // The sweep's id from "sweep ID (failing-study): N runs queued" (warnings before it may say
  // "sweep" too: the id is the one followed by " (failing-study)").
  const size_t at = submit.output.find(" (failing-study)");
  ASSERT_TRUE(at != std::string::npos && at >= 36) << submit.output;
  const std::string sweep_id = submit.output.substr(at - 36, 36);
  Reply runs = Get(absl::StrCat("/api/v1/sweeps/", sweep_id, "/runs?page_size=1000"));
  ASSERT_EQ(runs.status, 200) << runs.body;
  const int failing_runs = static_cast<int>(runs.doc["runs"].size());
  ASSERT_GE(failing_runs, 2) << runs.body;
  const std::string message = "user_error: dataset 'missing-corpus' not found on worker ";
  const std::string remedy =
      "remedy: fix the spec or give the workers the dataset; see the message";
  const std::string summary = absl::StrCat(failing_runs, " runs failed: ", message);
  // The final report ends with the reason and the remedy, after the results table.
  const size_t why = submit.output.rfind("Why runs failed:");
  ASSERT_NE(why, std::string::npos) << submit.output;
  EXPECT_NE(submit.output.find(summary, why), std::string::npos) << submit.output;
  EXPECT_NE(submit.output.find(remedy, why), std::string::npos) << submit.output;
  EXPECT_EQ(submit.output.find("FAILURE_CLASS_"), std::string::npos) << submit.output;
  EXPECT_EQ(submit.output.find("USER_ERROR"), std::string::npos)
      << "classes in the spec's spelling, state changes included: " << submit.output;

  // A sweep by its name (status) and by a short id prefix (watch), as a researcher types them.
  const ChildResult status = RunChild(cli({"status", "failing-study"}),
                                      (scratch_ / "status.log").string(), absl::Seconds(60));
  EXPECT_EQ(status.exit_code, 0) << status.output;
  EXPECT_NE(status.output.find("last failure"), std::string::npos) << status.output;
  EXPECT_NE(status.output.find(summary), std::string::npos) << status.output;
  EXPECT_NE(status.output.find(remedy), std::string::npos) << status.output;

  const ChildResult watch = RunChild(cli({"watch", sweep_id.substr(0, 8)}),
                                     (scratch_ / "watch.log").string(), absl::Seconds(60));
  EXPECT_EQ(watch.exit_code, 4) << watch.output;
  EXPECT_NE(watch.output.find(summary), std::string::npos) << watch.output;
  EXPECT_NE(watch.output.find(remedy), std::string::npos) << watch.output;

  // A run by a short id prefix and by SWEEP/RUN name (watch); a run that is not there is exit 3.
  const std::string run_id = runs.doc["runs"][0]["run_id"].get<std::string>();
  const std::string run_name = runs.doc["runs"][0]["spec"]["name"].get<std::string>();
  const ChildResult watch_run = RunChild(cli({"watch", run_id.substr(0, 8)}),
                                         (scratch_ / "watch-run.log").string(), absl::Seconds(60));
  EXPECT_EQ(watch_run.exit_code, 4) << "a failed run: " << watch_run.output;
  const ChildResult watch_named =
      RunChild(cli({"watch", "failing-study/" + run_name}), (scratch_ / "watch-named.log").string(),
               absl::Seconds(60));
  EXPECT_EQ(watch_named.exit_code, 4) << watch_named.output;
  const ChildResult no_run = RunChild(cli({"watch", "failing-study/no-such-run"}),
                                      (scratch_ / "no-run.log").string(), absl::Seconds(60));
  EXPECT_EQ(no_run.exit_code, 3) << no_run.output;
  EXPECT_NE(no_run.output.find("no sweep or run you may see"), std::string::npos) << no_run.output;

  const ChildResult unknown = RunChild(cli({"status", "no-such-study"}),
                                       (scratch_ / "unknown.log").string(), absl::Seconds(60));
  EXPECT_EQ(unknown.exit_code, 3) << unknown.output;
  EXPECT_NE(unknown.output.find("error: 'no-such-study': no sweep or run you may see"),
            std::string::npos)
      << unknown.output;
  const ChildResult results =
      RunChild(cli({"results", sweep_id}), (scratch_ / "results.log").string(), absl::Seconds(60));
  EXPECT_EQ(results.exit_code, 0) << results.output;
  EXPECT_NE(results.output.find("failure"), std::string::npos) << results.output;
  EXPECT_NE(results.output.find(message), std::string::npos) << results.output;
  const ChildResult csv = RunChild(cli({"results", sweep_id, "--format", "csv"}),
                                   (scratch_ / "results-csv.log").string(), absl::Seconds(60));
  EXPECT_EQ(csv.exit_code, 0) << csv.output;
  EXPECT_NE(csv.output.find(",failure_class,failure_message,dataset_digest\n"), std::string::npos)
      << csv.output;
  EXPECT_NE(csv.output.find(",user_error,dataset 'missing-corpus' not found on worker "),
            std::string::npos)
      << "the class and the message, each its own column: " << csv.output;

  ASSERT_TRUE(std::filesystem::exists(Chromium()))
      << Chromium() << " is missing: install Debian's chromium (deploy/setup.sh does)";
  const ChildResult browser =
      RunChild(BrowserCommand({"--mode", "failed", "--base-url", BaseUrl(), "--token",
                               parity::testing::kTestAdminToken, "--failed-sweep", sweep_id,
                               "--failed-run", runs.doc["runs"][0]["run_id"].get<std::string>(),
                               "--failed-runs", std::to_string(failing_runs)}),
               (scratch_ / "browser-failed.log").string(), absl::Seconds(180));
  EXPECT_FALSE(browser.timed_out) << browser.output;
  EXPECT_EQ(browser.exit_code, 0) << browser.output;
}

// The dashboard over HTTPS, as a viewer: a second scheduler on the same database with TLS, and
// the browser signs in through the form (a wrong token first).
TEST_F(DashboardTest, AViewerSignsInOverHttpsAndOut) {
  ASSERT_TRUE(std::filesystem::exists(Chromium()))
      << Chromium() << " is missing: install Debian's chromium (deploy/setup.sh does)";
  const std::string tls = (scratch_ / "tls").string();
  const absl::Status made = parity::testing::MakeTestCertificates(tls);
  ASSERT_TRUE(made.ok()) << made;
  server::ServerOptions options;
  options.listen_address = "127.0.0.1:0";
  options.http_listen = "127.0.0.1:0";
  options.metrics_listen = "";
  options.database_url = database_url_;
  options.pool_size = 4;
  options.tls.cert_file = tls + "/server.pem";
  options.tls.key_file = tls + "/server.key";
  absl::StatusOr<std::unique_ptr<server::SchedulerServer>> https =
      server::SchedulerServer::Start(options, &core::PlanSweep);
  ASSERT_TRUE(https.ok()) << https.status();
  v1::CreateTokenRequest create;
  create.set_name("vera");
  create.set_role(v1::ROLE_VIEWER);
  absl::StatusOr<v1::CreateTokenResponse> viewer =
      (*https)->access().CreateToken(create, server::Identity{"", "test", {}, {}});
  ASSERT_TRUE(viewer.ok()) << viewer.status();
  const ChildResult result =
      RunChild(BrowserCommand({"--mode", "signin", "--base-url",
                               absl::StrCat("https://127.0.0.1:", (*https)->http_port()), "--token",
                               viewer->secret()}),
               (scratch_ / "browser-signin.log").string(), absl::Seconds(180));
  EXPECT_FALSE(result.timed_out) << result.output;
  EXPECT_EQ(result.exit_code, 0) << result.output;
  (*https)->Shutdown(absl::Seconds(2));
}

TEST_F(DashboardTest, ReportRendersOfflineInChromium) {
  ASSERT_TRUE(std::filesystem::exists(Chromium()))
      << Chromium() << " is missing: install Debian's chromium (deploy/setup.sh does)";
  const std::string scheduler = absl::StrCat("127.0.0.1:", server_->port());
  const std::filesystem::path out = std::filesystem::path(screenshots_).parent_path() / "report";
  std::filesystem::remove_all(out);
  const ChildResult report =
      RunChild({PARITY_CLI_BIN, "report", study_.sweep_id, "--out", out.string(), "--scheduler",
                scheduler, "--token", parity::testing::kTestAdminToken},
               (scratch_ / "report.log").string(), absl::Seconds(120));
  ASSERT_EQ(report.exit_code, 0) << report.output;
  for (const char* file : {"index.html", "data.js", "runs.csv", "assets/app.js",
                           "assets/chart.umd.js", "assets/styles.css"}) {
    EXPECT_TRUE(std::filesystem::exists(out / file)) << file;
  }
  std::ifstream csv(out / "runs.csv");
  int lines = 0;
  std::string header;
  for (std::string line; std::getline(csv, line);) {
    if (lines++ == 0) header = line;
  }
  EXPECT_EQ(lines, Runs() + 1) << "a header and one line per run";
  // The export columns of docs/export.md, then the analysis's; and the same as Parquet.
  EXPECT_EQ(header.rfind("sweep_id,run_id,run_name,role,layout,state,", 0), 0u) << header;
  EXPECT_NE(header.find(",delta_bpc_vs_dense_1c,"), std::string::npos) << header;
  EXPECT_NE(header.find(",failure_class,failure_message,dataset_digest,fixed_n_efficiency_"),
            std::string::npos)
      << header;
  EXPECT_TRUE(std::filesystem::exists(out / "runs.parquet"));

  const ChildResult unknown =
      RunChild({PARITY_CLI_BIN, "report", kUnknownId, "--out", (scratch_ / "x").string(),
                "--scheduler", scheduler, "--token", parity::testing::kTestAdminToken},
               (scratch_ / "unknown.log").string(), absl::Seconds(60));
  EXPECT_EQ(unknown.exit_code, 3) << unknown.output;
  EXPECT_FALSE(std::filesystem::exists(scratch_ / "x" / "index.html"));

  const ChildResult browser =
      RunChild(BrowserCommand({"--mode", "report", "--report", (out / "index.html").string()}),
               (scratch_ / "browser-report.log").string(), absl::Seconds(180));
  EXPECT_FALSE(browser.timed_out) << browser.output;
  EXPECT_EQ(browser.exit_code, 0) << browser.output;
}

// What the seeded study's analysis must hold: a dense frontier over three sizes per budget that
// differs from the fixed-N law, both ELs on every MoE grid point, a region per group, and ΔBPC
// against every dense baseline of a group.
void ExpectTheStudysAnalysis(const json& analysis) {
  ASSERT_TRUE(analysis.contains("dense_frontier")) << analysis["dense_frontier_refusal"];
  const json& frontier = analysis["dense_frontier"];
  ASSERT_EQ(frontier["points"].size(), 3u) << "budgets 2e10, 4e10, 8e10: " << frontier.dump();
  for (const json& point : frontier["points"]) {
    EXPECT_EQ(point["sizes"], 3) << "1, 2 and 4 layers at every budget: " << point.dump();
  }
  ASSERT_TRUE(frontier.contains("law")) << frontier["law_refusal"];
  int moe = 0, differ = 0;
  for (const json& point : analysis["grid_points"]) {
    if (point["role"] != "RUN_ROLE_MOE") continue;
    ++moe;
    const double frontier_el = point["frontier_leverage"]["value"].get<double>();
    const double fixed_n_el = point["fixed_n_leverage"]["value"].get<double>();
    EXPECT_TRUE(frontier_el > 0 || !point["frontier_leverage"]["missing_reason"].empty())
        << "a frontier EL or the reason there is none: " << point.dump();
    EXPECT_TRUE(fixed_n_el > 0 || !point["fixed_n_leverage"]["missing_reason"].empty())
        << point.dump();
    if (frontier_el > 0 && fixed_n_el > 0 && std::fabs(frontier_el - fixed_n_el) > 1e-6) ++differ;
    if (point["group"].get<std::string>().find("unique") != std::string::npos) {
      EXPECT_EQ(point["baselines"].size(), 6u)
          << "dense 1C and 2C at three sizes each: " << point["baselines"].dump();
    }
  }
  EXPECT_EQ(moe, 16);
  EXPECT_GT(differ, 0) << "the frontier beats the 2-layer law at 2e10 and 8e10, so the ELs differ";
  for (const json& optimum : analysis["optimal_activation"]) {
    EXPECT_EQ(optimum["grid"].size(), optimum["rates"]) << optimum.dump();
    EXPECT_NE(optimum["region_note"], "") << optimum.dump();
    EXPECT_NE(optimum["lack_of_fit"]["verdict"], "LACK_OF_FIT_VERDICT_UNSPECIFIED");
    double total = 0;
    for (const json& point : optimum["grid"]) total += point["probability_best"].get<double>();
    EXPECT_NEAR(total, 1.0, 1e-6) << "two seeds per r_a: P(best) is resampled and sums to 1";
  }
}

// The acceptance test of "the same figures everywhere": the API's JSON (which the dashboard's
// panel draws), `parity report`'s analysis.md and the Python client's analyze().
TEST_F(DashboardTest, AnalysisIsTheSameInTheApiTheReportAndThePythonClient) {
  Reply analysis = Get(absl::StrCat("/api/v1/sweeps/", study_.sweep_id, "/analysis"));
  ASSERT_EQ(analysis.status, 200) << analysis.body;
  ExpectTheStudysAnalysis(analysis.doc);
  const std::filesystem::path api_json = scratch_ / "analysis.json";
  std::ofstream(api_json) << analysis.body;

  const std::string scheduler = absl::StrCat("127.0.0.1:", server_->port());
  const std::filesystem::path out = scratch_ / "report";
  const ChildResult report =
      RunChild({PARITY_CLI_BIN, "report", study_.sweep_id, "--out", out.string(), "--scheduler",
                scheduler, "--token", parity::testing::kTestAdminToken},
               (scratch_ / "report.log").string(), absl::Seconds(120));
  ASSERT_EQ(report.exit_code, 0) << report.output;
  EXPECT_NE(report.output.find("frontier EL"), std::string::npos)
      << "the terminal names which EL it prints: " << report.output;
  EXPECT_NE(report.output.find("fixed-N EL"), std::string::npos) << report.output;

  const ChildResult python =
      RunChild({"/usr/bin/env", absl::StrCat("PYTHONPATH=", PARITY_PYTHON_CLIENT_DIR),
                PARITY_PYTHON, PARITY_ANALYSIS_FIGURES_SCRIPT, "--api-json", api_json.string(),
                "--report-md", (out / "analysis.md").string(), "--scheduler", scheduler, "--token",
                parity::testing::kTestAdminToken, "--sweep", study_.sweep_id},
               (scratch_ / "analysis-figures.log").string(), absl::Seconds(120));
  EXPECT_FALSE(python.timed_out) << python.output;
  EXPECT_EQ(python.exit_code, 0) << python.output;
}

}  // namespace
}  // namespace parity::dashboard_testing
