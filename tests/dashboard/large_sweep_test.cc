// The sweep page at a lab's size: a 10,000-run sweep (the API's cap per sweep) opened in headless
// Chromium (large_sweep.mjs). The study seeder makes the 54-run dashboard study through the real
// gRPC API, then SQL copies its runs (as bench/load/seed_copies.sh does, without the metric
// points: the copies have no curves) up to 10,000, some of the copies FAILED with one of two
// reasons and some CANCELLED, so the page has every kind of row. Seeding 10,000 runs through
// CompleteRun would take minutes on this machine; the copies take about a second.
//
// What must hold: the first page of the runs table is drawn within a bound, the table holds one
// page of rows, next page / previous / sort / filter / page size each ask the server (the
// request carries page_token, order_by or state), no request lists the whole sweep, each
// response stays small, and the counts and the failure banner match what was seeded.
#include <httplib.h>

#include <filesystem>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/spec_loader.h"
#include "gtest/gtest.h"
#include "server/scheduler_server.h"
#include "tests/dashboard/child_runner.h"
#include "tests/dashboard/study_seeder.h"
#include "tests/support/postgres_environment.h"
#include "tests/support/test_tokens.h"

namespace parity::dashboard_testing {
namespace {

using nlohmann::json;

constexpr int kSweepRuns = 10000;
// Distinct failures among the copies (failure_class, message), by copy number modulo 20.
constexpr char kOutOfMemory[] = "CUDA out of memory: tried to allocate 2.00 GiB";
constexpr char kDiverged[] = "loss diverged to infinity at step 120";

std::string Chromium() {
  const char* path = std::getenv("PARITY_CHROMIUM");
  return path != nullptr ? path : "/usr/bin/chromium";
}

// Copies the sweep's runs in SQL until it holds kSweepRuns: new ids, ordinals after the
// originals, seeds shifted per copy (each copy's MoE runs find their own copy's dense baseline in
// the results view). A sweep in mid-flight: every tenth copy as its original ended, copies 3 and
// 13 (mod 20) FAILED with kOutOfMemory or kDiverged, copies 7 (mod 20) CANCELLED, the rest
// PENDING. (With 7,860 runs finished the analysis takes the server ~19 s and 1.7 MB; it is not
// what this test is about, and while it runs it holds one of the HTTP server's threads.)
void GrowSweep(const std::string& database_url, const std::string& sweep_id) {
  pqxx::connection connection(database_url);
  pqxx::work tx(connection);
  tx.exec_params(R"sql(
CREATE TEMP TABLE originals ON COMMIT DROP AS SELECT * FROM runs WHERE sweep_id = $1;
)sql",
                 sweep_id);
  tx.exec_params(R"sql(
CREATE TEMP TABLE new_runs ON COMMIT DROP AS
  SELECT o.*, gen_random_uuid() AS new_id, c AS copy_no
  FROM originals o CROSS JOIN generate_series(1, 1000) AS c
  ORDER BY c, o.ordinal
  LIMIT $1 - (SELECT count(*) FROM originals);
)sql",
                 kSweepRuns);
  tx.exec(R"sql(
UPDATE new_runs SET run_id = new_id,
    ordinal = ordinal + copy_no * (SELECT max(ordinal) + 1 FROM originals),
    seed = seed + copy_no * 1000000, name = name || '-copy' || copy_no;
UPDATE new_runs SET state = 'PENDING', lease_owner = NULL, lease_epoch = 0,
    lease_expires_at = NULL, device_indices = '{}', latest_step = 0, latest_val_bpc = NULL,
    final_train_bpc = NULL, final_val_bpc = NULL, final_eval_bpc = NULL,
    measured_flops_per_token = NULL, wall_seconds = NULL, started_at = NULL, ended_at = NULL
  WHERE state NOT IN ('SUCCEEDED', 'FAILED', 'CANCELLED') OR copy_no % 10 <> 0;
UPDATE new_runs SET state = 'FAILED', failure_class = 'OUT_OF_MEMORY', failure_code = 8,
    failure_message = 'CUDA out of memory: tried to allocate 2.00 GiB',
    final_val_bpc = NULL, final_eval_bpc = NULL
  WHERE copy_no % 20 = 3;
UPDATE new_runs SET state = 'FAILED', failure_class = 'DIVERGED', failure_code = 9,
    failure_message = 'loss diverged to infinity at step 120', final_val_bpc = NULL, final_eval_bpc = NULL
  WHERE copy_no % 20 = 13;
UPDATE new_runs SET state = 'CANCELLED', final_val_bpc = NULL, final_eval_bpc = NULL
  WHERE copy_no % 20 = 7;
ALTER TABLE new_runs DROP COLUMN new_id, DROP COLUMN copy_no;
INSERT INTO runs SELECT * FROM new_runs;
ANALYZE runs;
)sql");
  tx.commit();
}

// {"pending": N, ...} as the database counts the sweep's runs by state.
json CountsInDatabase(const std::string& database_url, const std::string& sweep_id) {
  pqxx::connection connection(database_url);
  pqxx::work tx(connection);
  json counts = json::object();
  for (const auto& row :
       tx.exec_params("SELECT lower(state), count(*) FROM runs WHERE sweep_id = $1 GROUP BY state",
                      sweep_id)) {
    counts[row[0].c_str()] = row[1].as<int>();
  }
  return counts;
}

class LargeSweepTest : public ::testing::Test {
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
    absl::StatusOr<std::unique_ptr<server::SchedulerServer>> started =
        server::SchedulerServer::Start(options, &PlanWithDenseSizes);
    ASSERT_TRUE(started.ok()) << started.status();
    server_ = std::move(*started);
    absl::StatusOr<v1::SweepSpec> spec =
        core::LoadSweepSpecFile("tests/dashboard/dashboard_sweep.yaml");
    ASSERT_TRUE(spec.ok()) << spec.status();
    StudySeeder seeder(parity::testing::TokenChannel(server_->port()));
    absl::StatusOr<SeededStudy> study = seeder.Seed(*spec);
    ASSERT_TRUE(study.ok()) << study.status();
    sweep_id_ = study->sweep_id;
    const absl::Time grow_start = absl::Now();
    GrowSweep(database_url_, sweep_id_);
    std::cout << "grew the sweep to " << kSweepRuns << " runs in SQL in "
              << absl::FormatDuration(absl::Now() - grow_start) << "\n";
    http_ = std::make_unique<httplib::Client>("127.0.0.1", server_->http_port());
    http_->set_bearer_token_auth(parity::testing::kTestAdminToken);
    http_->set_read_timeout(60);
    scratch_ =
        std::filesystem::path(::testing::TempDir()) / absl::StrCat("dashboard-large-", getpid());
    std::filesystem::create_directories(scratch_);
  }

  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown(absl::Seconds(2));
    std::filesystem::remove_all(scratch_);
  }

  // GET a document: {status, body, parsed} and how long the scheduler took.
  json Get(const std::string& path, std::string* body = nullptr) {
    const absl::Time start = absl::Now();
    httplib::Result result = http_->Get(path.c_str());
    if (!result) {
      ADD_FAILURE() << "GET " << path << " failed: " << httplib::to_string(result.error());
      return json();
    }
    std::cout << "GET " << path << ": " << result->status << ", " << result->body.size()
              << " bytes in " << absl::FormatDuration(absl::Now() - start) << "\n";
    EXPECT_EQ(result->status, 200) << path << ": " << result->body.substr(0, 400);
    if (body != nullptr) *body = result->body;
    return json::parse(result->body);
  }

  std::unique_ptr<server::SchedulerServer> server_;
  std::string database_url_;
  std::string sweep_id_;
  std::unique_ptr<httplib::Client> http_;
  std::filesystem::path scratch_;
};

// One test (one seeding, ~10 s) to keep the label's wall time down: the documents over HTTP,
// then the page in Chromium.
TEST_F(LargeSweepTest, TheSweepPageServesAndShowsOnePageAtATime) {
  const std::string sweep = absl::StrCat("/api/v1/sweeps/", sweep_id_);
  const json counts = CountsInDatabase(database_url_, sweep_id_);
  json doc = Get(sweep);
  EXPECT_EQ(doc["sweep"]["counts"]["total"], kSweepRuns);
  for (const auto& [state, n] : counts.items())
    EXPECT_EQ(doc["sweep"]["counts"][state], n) << state;

  std::string body;
  json first = Get(sweep + "/table?page_size=100", &body);
  ASSERT_EQ(first["rows"].size(), 100u);
  EXPECT_LT(body.size(), 500u * 1000) << "one page of 100 rows, not the sweep";
  EXPECT_EQ(first["rows"][0]["run"]["run_id"], first["rows"][0]["result"]["run_id"]);
  ASSERT_TRUE(first["next_page_token"].is_string());
  json second = Get(absl::StrCat(
      sweep, "/table?page_size=100&page_token=", first["next_page_token"].get<std::string>()));
  ASSERT_EQ(second["rows"].size(), 100u);
  EXPECT_NE(second["rows"][0]["run"]["run_id"], first["rows"][0]["run"]["run_id"]);

  json failed = Get(sweep + "/table?page_size=200&state=FAILED&order_by=compute_flops%20desc");
  ASSERT_EQ(failed["rows"].size(), 200u);
  double previous = 1e300;
  for (const json& row : failed["rows"]) {
    EXPECT_EQ(row["run"]["state"], "RUN_STATE_FAILED");
    const double flops = row["result"]["compute_flops"].get<double>();
    EXPECT_LE(flops, previous) << "order_by=compute_flops desc";
    previous = flops;
  }

  json summary = Get(sweep + "/summary");
  EXPECT_EQ(summary["runs"], kSweepRuns);
  EXPECT_EQ(summary["failed_runs"], counts["failed"]);
  ASSERT_EQ(summary["failures"].size(), 2u) << summary.dump();
  EXPECT_EQ(summary["failures"][0]["runs"].get<int>() + summary["failures"][1]["runs"].get<int>(),
            counts["failed"].get<int>());
  EXPECT_EQ(summary["other_failed_runs"], 0);
  EXPECT_EQ(summary["compute_budgets"], json::array({"C1", "C2"})) << summary.dump();

  ASSERT_TRUE(std::filesystem::exists(Chromium()))
      << Chromium() << " is missing: install Debian's chromium (deploy/setup.sh does)";
  const ChildResult result =
      RunChild({PARITY_NODE_BIN,  PARITY_BROWSER_SCRIPT,
                "--mode",         "large",
                "--node-modules", PARITY_NODE_MODULES,
                "--chromium",     Chromium(),
                "--screenshots",  PARITY_SCREENSHOT_DIR,
                "--base-url",     absl::StrCat("http://127.0.0.1:", server_->http_port()),
                "--token",        parity::testing::kTestAdminToken,
                "--sweep",        sweep_id_,
                "--runs",         std::to_string(kSweepRuns),
                "--counts",       counts.dump(),
                "--failures",     json::array({kOutOfMemory, kDiverged}).dump()},
               (scratch_ / "browser-large.log").string(), absl::Seconds(120));
  std::cout << result.output;
  EXPECT_FALSE(result.timed_out);
  EXPECT_EQ(result.exit_code, 0) << result.output;
}

}  // namespace
}  // namespace parity::dashboard_testing
