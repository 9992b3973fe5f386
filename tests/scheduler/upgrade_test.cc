// Upgrading in place: a database that an older binary migrated (up to 0008, before functions
// moved to server/sql/) and used keeps its data through the full migration and goes on leasing,
// completing and answering results; and the repeatables of server/sql/ are applied only when
// new or changed.
#include <pqxx/pqxx>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "core/summary_check.h"
#include "gmock/gmock.h"
#include "server/store/postgres/migrations.h"
#include "tests/scheduler/scheduler_fixture.h"
#include "tests/scheduler/schema_dump.h"

namespace parity::server::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

constexpr int kOldVersion = 8;  // the last migration before server/sql/

std::vector<std::string> Names(std::span<const Repeatable> repeatables) {
  std::vector<std::string> names;
  for (const Repeatable& repeatable : repeatables) names.emplace_back(repeatable.name);
  return names;
}

// A store and a scheduler on `url`, wired as SchedulerTest wires them; one per binary version.
struct SchedulerOn {
  explicit SchedulerOn(const std::string& url)
      : store(PostgresRunStoreOptions{url, 4}),
        scheduler(store, signal, clock, &StubPlanner, Options(), nullptr) {}
  static SchedulerOptions Options() {
    SchedulerOptions options;
    options.lease_ttl = absl::Seconds(30);
    options.retry_policy = RetryPolicy{.backoff_base = absl::Milliseconds(1),
                                       .backoff_max = absl::Milliseconds(10),
                                       .preemption_backoff_base = absl::Milliseconds(1),
                                       .preemption_backoff_max = absl::Milliseconds(10)};
    return options;
  }
  std::string Register() {
    v1::RegisterWorkerRequest request;
    request.set_hostname("upgrade-host");
    *request.add_devices() = CpuDevice();
    absl::StatusOr<v1::RegisterWorkerResponse> response = scheduler.RegisterWorker(request);
    EXPECT_TRUE(response.ok()) << response.status();
    return response.ok() ? response->worker_id() : "";
  }
  v1::LeaseRunResponse Lease(const std::string& worker) {
    v1::LeaseRunRequest request;
    request.set_worker_id(worker);
    *request.add_free_devices() = CpuDevice();
    absl::StatusOr<v1::LeaseRunResponse> leased =
        scheduler.LeaseRun(request, absl::InfiniteFuture(), {});
    EXPECT_TRUE(leased.ok() && leased->has_lease()) << "expected a run leased: " << leased.status();
    return leased.ok() ? *leased : v1::LeaseRunResponse();
  }
  absl::Status Report(const v1::LeaseRunResponse& leased, uint64_t from, uint64_t to) {
    v1::ReportMetricsRequest request;
    request.set_run_id(leased.run().run_id());
    request.set_lease_epoch(leased.lease().lease_epoch());
    request.set_lease_secret(leased.lease_secret());
    for (uint64_t step = from; step <= to; ++step) *request.add_points() = Point(step, 1.6);
    return scheduler.ReportMetrics(request).status();
  }
  absl::StatusOr<v1::CompleteRunResponse> Complete(const v1::LeaseRunResponse& leased,
                                                   double val_bpc) {
    v1::CompleteRunRequest request;
    request.set_run_id(leased.run().run_id());
    request.set_lease_epoch(leased.lease().lease_epoch());
    request.set_lease_secret(leased.lease_secret());
    *request.mutable_success() = core::PlannedSummary(leased.run().spec(), val_bpc, val_bpc);
    return scheduler.CompleteRun(request);
  }

  RealClock clock;
  WorkSignal signal;
  PostgresRunStore store;
  SchedulerUnderTest scheduler;
};

TEST(UpgradeTest, DataWrittenAtVersion8SurvivesTheFullMigrationAndTheSchedulerWorksOnIt) {
  PARITY_REQUIRE_POSTGRES();
  const std::string url = parity::testing::PostgresEnvironment::EmptyDatabase();
  std::span<const Migration> old_migrations = EmbeddedMigrations();
  while (!old_migrations.empty() && old_migrations.back().version > kOldVersion) {
    old_migrations = old_migrations.first(old_migrations.size() - 1);
  }
  ASSERT_EQ(old_migrations.size(), static_cast<size_t>(kOldVersion));
  absl::StatusOr<MigrationReport> old = ApplyMigrations(url, old_migrations, {});
  ASSERT_TRUE(old.ok()) << old.status();
  ASSERT_EQ(old->current_version, kOldVersion);
  // As the 0008 binary left it: no record of repeatables, and its own functions installed.
  Sql(url, "DROP TABLE schema_repeatables");
  ASSERT_EQ(Sql(url, "SELECT count(*) FROM pg_proc WHERE proname = 'lease_next_run'"), "1");

  std::string sweep_id, worker, leased_run;
  int64_t leased_epoch = 0;
  v1::RunSpec leased_spec;
  // This binary stands in for the 0008 one. Its reads name a column that 0011 adds
  // (runs.preemptions): the column exists while it writes and is dropped before the upgrade, so
  // the upgrade starts from the schema 0008 left. Its success goes through 0008's own
  // complete_runs_success, whose result lacks the later `reason` column.
  Sql(url, "ALTER TABLE runs ADD COLUMN preemptions integer NOT NULL DEFAULT 0");
  // Likewise its leases come with lease secrets, whose key lives in 0012's server_keys: the table
  // stands in while it leases, and the key is carried over the upgrade as a database keeps it.
  Sql(url, "CREATE TABLE server_keys (name text PRIMARY KEY, key bytea NOT NULL)");
  // And its submissions and registrations name 0013's per-owner key and worker owner: they stand
  // in while it writes and go before the upgrade, which makes them again.
  Sql(url,
      "ALTER TABLE sweeps ADD CONSTRAINT stand_in_owner_key UNIQUE (owner, idempotency_key); "
      "ALTER TABLE workers ADD COLUMN owner text");
  // And its reads name 0015's per-set columns, and its metric batches go through a wrapper of
  // 0015's signature (one more array, the per-set BPC, which 0008 drops): both go before the
  // upgrade.
  Sql(url,
      "ALTER TABLE runs ADD COLUMN final_eval_bpc jsonb; "
      "CREATE FUNCTION append_metric_arrays(uuid, bigint, boolean, bigint[], integer[], bigint[], "
      "bigint[], float8[], float8[], float8[], float8[], float8[], float8[], float8[], float8[], "
      "float8[], float8[], jsonb[], jsonb[], bigint[]) RETURNS integer LANGUAGE sql AS "
      "$$ SELECT append_metric_arrays($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, "
      "$14, $15, $16, $17, $18, $20) $$");
  // And 0016's dataset holdings and result digest, which its worker listings and run reads name.
  Sql(url,
      "ALTER TABLE workers ADD COLUMN datasets jsonb NOT NULL DEFAULT '[]'; "
      "ALTER TABLE runs ADD COLUMN dataset_digest text");
  // And 0020's lease request ids: the column its retried lease names, and a wrapper of
  // lease_runs' 0020 signature (one more array, the request ids, which 0008's ignores).
  Sql(url,
      "ALTER TABLE runs ADD COLUMN lease_request_id text; "
      "CREATE FUNCTION lease_runs(uuid[], integer[], text[], integer, bigint, bigint[], float8, "
      "text[]) RETURNS TABLE (request integer, run runs) LANGUAGE sql AS "
      "$$ SELECT * FROM lease_runs($1, $2, $3, $4, $5, $6, $7) $$");
  // And 0021's world size, which run inserts name (gangs: ranks > 1; none here).
  Sql(url, "ALTER TABLE runs ADD COLUMN ranks integer NOT NULL DEFAULT 1");
  // And 0023's device memory beside the estimate, which its run reads name, and 0024's dataset
  // pin, which its run inserts name.
  Sql(url,
      "ALTER TABLE runs ADD COLUMN peak_device_memory_bytes bigint, "
      "ADD COLUMN estimated_device_memory_bytes bigint, ADD COLUMN dataset_pin text");
  std::string leased_secret;
  {
    SchedulerOn before(url);
    v1::SubmitSweepRequest submit;
    *submit.mutable_spec() = MakeSweepSpec("upgrade", 4);
    absl::StatusOr<v1::SubmitSweepResponse> submitted = before.scheduler.SubmitSweep(submit);
    ASSERT_TRUE(submitted.ok()) << submitted.status();
    sweep_id = submitted->sweep().sweep_id();
    worker = before.Register();
    const v1::LeaseRunResponse baseline = before.Lease(worker);  // the dense baseline
    ASSERT_TRUE(before.Report(baseline, 1, 5).ok());
    const v1::RunSpec& plan = baseline.run().spec();
    EXPECT_EQ(
        Sql(url,
            absl::StrCat("SELECT outcome FROM complete_runs_success(ARRAY['",
                         baseline.run().run_id(), "']::uuid[], ARRAY[",
                         baseline.lease().lease_epoch(), "]::bigint[], '{1.5}', '{1.5}', ARRAY[",
                         plan.accounting().tokens(), "]::bigint[], ARRAY[", plan.training().steps(),
                         "]::bigint[], ARRAY[", plan.accounting().flops_per_token(),
                         "]::float8[], '{12}', '{0}', '{0}', '{NULL}', '{NULL}')")),
        "completed");
    const v1::LeaseRunResponse held = before.Lease(worker);  // still leased across the upgrade
    ASSERT_TRUE(before.Report(held, 1, 5).ok());
    leased_run = held.run().run_id();
    leased_epoch = held.lease().lease_epoch();
    leased_secret = held.lease_secret();
    leased_spec = held.run().spec();
  }
  Sql(url, "ALTER TABLE runs DROP COLUMN preemptions");
  const std::string lease_key = Sql(url, "SELECT encode(key, 'hex') FROM server_keys");
  Sql(url, "DROP TABLE server_keys");
  Sql(url,
      "ALTER TABLE sweeps DROP CONSTRAINT stand_in_owner_key; ALTER TABLE workers DROP COLUMN "
      "owner");
  Sql(url,
      "ALTER TABLE runs DROP COLUMN final_eval_bpc; "
      "DROP FUNCTION append_metric_arrays(uuid, bigint, boolean, bigint[], integer[], bigint[], "
      "bigint[], float8[], float8[], float8[], float8[], float8[], float8[], float8[], float8[], "
      "float8[], float8[], jsonb[], jsonb[], bigint[])");
  Sql(url, "ALTER TABLE workers DROP COLUMN datasets; ALTER TABLE runs DROP COLUMN dataset_digest");
  Sql(url,
      "DROP FUNCTION lease_runs(uuid[], integer[], text[], integer, bigint, bigint[], float8, "
      "text[]); ALTER TABLE runs DROP COLUMN lease_request_id");
  Sql(url, "ALTER TABLE runs DROP COLUMN ranks");
  Sql(url,
      "ALTER TABLE runs DROP COLUMN peak_device_memory_bytes, "
      "DROP COLUMN estimated_device_memory_bytes, DROP COLUMN dataset_pin");
  const std::string counts =
      "SELECT (SELECT count(*) FROM sweeps) || ' ' || (SELECT count(*) FROM runs) || ' ' || "
      "(SELECT count(*) FROM events) || ' ' || (SELECT count(*) FROM metrics) || ' ' || "
      "(SELECT count(*) FROM workers)";
  const std::string counts_before = Sql(url, counts);
  EXPECT_EQ(counts_before, "1 4 7 10 1")
      << "expected 1 sweep, 4 runs, 7 events (4 created, 2 leased, 1 succeeded), 10 "
         "points, 1 worker";

  absl::StatusOr<MigrationReport> upgrade = ApplyMigrations(url, EmbeddedMigrations());
  ASSERT_TRUE(upgrade.ok()) << upgrade.status();
  EXPECT_EQ(upgrade->applied, static_cast<int>(EmbeddedMigrations().size()) - kOldVersion);
  EXPECT_EQ(upgrade->repeatables_applied, Names(EmbeddedRepeatables()));
  EXPECT_EQ(Sql(url, counts), counts_before) << "expected every row kept";
  EXPECT_EQ(Sql(url, absl::StrCat("SELECT state || ' ' || lease_epoch || ' ' || lease_owner "
                                  "FROM runs WHERE run_id = '",
                                  leased_run, "'")),
            absl::StrCat("LEASED ", leased_epoch, " ", worker))
      << "expected the run leased before the upgrade still held by its worker";
  EXPECT_EQ(Sql(url,
                "SELECT count(*) FROM pg_proc WHERE proname IN ('lease_next_run', "
                "'complete_run_success')"),
            "0");

  Sql(url, absl::StrCat("INSERT INTO server_keys (name, key) VALUES ('lease-secret-v1', decode('",
                        lease_key, "', 'hex'))"));
  SchedulerOn after(url);
  // The lease from before the upgrade goes on: points under its epoch, then its completion.
  v1::LeaseRunResponse held;
  held.mutable_run()->set_run_id(leased_run);
  held.mutable_lease()->set_lease_epoch(leased_epoch);
  held.set_lease_secret(leased_secret);
  *held.mutable_run()->mutable_spec() = leased_spec;
  ASSERT_TRUE(after.Report(held, 6, 10).ok());
  absl::StatusOr<v1::CompleteRunResponse> done = after.Complete(held, 1.4);
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->run().state(), v1::RUN_STATE_SUCCEEDED);
  EXPECT_EQ(done->run().latest_step(), 10u);
  // New leases take the rest in grid order, and the last completion ends the sweep.
  for (const double bpc : {1.3, 1.2}) {
    const v1::LeaseRunResponse leased = after.Lease(worker);
    EXPECT_EQ(leased.lease().lease_epoch(), 1);
    ASSERT_TRUE(after.Complete(leased, bpc).ok());
  }
  EXPECT_EQ(Sql(url, absl::StrCat("SELECT state FROM sweeps WHERE sweep_id = '", sweep_id, "'")),
            "SUCCEEDED");
  v1::QueryResultsRequest query;
  query.mutable_filter()->set_sweep_id(sweep_id);
  absl::StatusOr<v1::QueryResultsResponse> results = after.scheduler.QueryResults(query);
  ASSERT_TRUE(results.ok()) << results.status();
  ASSERT_EQ(results->rows().size(), 4);
  std::vector<double> deltas;
  for (const v1::ResultRow& row : results->rows()) deltas.push_back(row.delta_bpc_vs_dense());
  EXPECT_THAT(deltas,
              ElementsAre(0, ::testing::DoubleNear(-0.1, 1e-9), ::testing::DoubleNear(-0.2, 1e-9),
                          ::testing::DoubleNear(-0.3, 1e-9)));
  EXPECT_EQ(Sql(url, "SELECT count(*) FROM metrics"), "15");

  // And the upgraded schema is the one a fresh migration builds, object for object.
  const std::string fresh = parity::testing::PostgresEnvironment::EmptyDatabase();
  ASSERT_TRUE(ApplyMigrations(fresh, EmbeddedMigrations()).ok());
  absl::StatusOr<std::string> upgraded_schema = DumpSchema(url);
  absl::StatusOr<std::string> fresh_schema = DumpSchema(fresh);
  ASSERT_TRUE(upgraded_schema.ok() && fresh_schema.ok())
      << upgraded_schema.status() << " " << fresh_schema.status();
  EXPECT_TRUE(*upgraded_schema == *fresh_schema)
      << "expected the upgraded schema to equal a fresh one: "
      << FirstDifference(*fresh_schema, *upgraded_schema);
}

TEST(UpgradeTest, MigratingAnUpToDateDatabaseAppliesNothing) {
  PARITY_REQUIRE_POSTGRES();
  const std::string url = parity::testing::PostgresEnvironment::EmptyDatabase();
  absl::StatusOr<MigrationReport> first = ApplyMigrations(url, EmbeddedMigrations());
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->repeatables_applied, Names(EmbeddedRepeatables()));
  const std::string recorded =
      "SELECT string_agg(name || checksum || applied_at, ',' ORDER BY "
      "name) FROM schema_repeatables";
  const std::string records = Sql(url, recorded);
  absl::StatusOr<MigrationReport> second = ApplyMigrations(url, EmbeddedMigrations());
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->applied, 0);
  EXPECT_THAT(second->repeatables_applied, IsEmpty());
  EXPECT_EQ(Sql(url, recorded), records) << "expected no repeatable re-recorded";
  EXPECT_EQ(Sql(url, "SELECT count(*) FROM schema_repeatables"),
            absl::StrCat(EmbeddedRepeatables().size()));
}

TEST(UpgradeTest, AChangedRepeatableIsAppliedAgainAndAloneThenRestored) {
  PARITY_REQUIRE_POSTGRES();
  const std::string url = parity::testing::PostgresEnvironment::EmptyDatabase();
  ASSERT_TRUE(ApplyMigrations(url, EmbeddedMigrations()).ok());
  const std::string others =
      "SELECT string_agg(name || checksum || applied_at, ',' ORDER BY "
      "name) FROM schema_repeatables WHERE name <> 'lease_runs.sql'";
  const std::string others_before = Sql(url, others);

  std::vector<Repeatable> edited(EmbeddedRepeatables().begin(), EmbeddedRepeatables().end());
  std::string body;
  for (Repeatable& repeatable : edited) {
    if (repeatable.name != "lease_runs.sql") continue;
    body = absl::StrReplaceAll(repeatable.sql, {{"BEGIN\n", "BEGIN\n  -- edited in place\n"}});
    repeatable.sql = body;
  }
  ASSERT_NE(body.find("edited in place"), std::string::npos);
  absl::StatusOr<MigrationReport> changed = ApplyMigrations(url, EmbeddedMigrations(), edited);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_EQ(changed->applied, 0);
  EXPECT_THAT(changed->repeatables_applied, ElementsAre("lease_runs.sql"));
  const std::string installed =
      "SELECT prosrc LIKE '%edited in place%' FROM pg_proc WHERE "
      "proname = 'lease_runs'";
  EXPECT_EQ(Sql(url, installed), "t") << "expected the edited body installed";
  EXPECT_EQ(Sql(url, others), others_before) << "expected the other files left alone";

  absl::StatusOr<MigrationReport> restored = ApplyMigrations(url, EmbeddedMigrations());
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_THAT(restored->repeatables_applied, ElementsAre("lease_runs.sql"));
  EXPECT_EQ(Sql(url, installed), "f");
}

// As server/sql/README.md says to do: a numbered migration that drops an object whose file did
// not change deletes the file's row, and the file runs again after it.
TEST(UpgradeTest, AMigrationThatDropsAViewHasItsFileAppliedAgain) {
  PARITY_REQUIRE_POSTGRES();
  const std::string url = parity::testing::PostgresEnvironment::EmptyDatabase();
  ASSERT_TRUE(ApplyMigrations(url, EmbeddedMigrations()).ok());
  std::vector<Migration> migrations(EmbeddedMigrations().begin(), EmbeddedMigrations().end());
  const int next = migrations.back().version + 1;
  migrations.push_back(Migration{next, "NNNN_drops_results.sql",
                                 "DROP VIEW results; DELETE FROM schema_repeatables WHERE name = "
                                 "'results.view.sql';"});
  absl::StatusOr<MigrationReport> report = ApplyMigrations(url, migrations);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->applied, 1);
  EXPECT_EQ(report->current_version, next);
  EXPECT_THAT(report->repeatables_applied, ElementsAre("results.view.sql"));
  EXPECT_EQ(Sql(url, "SELECT count(*) FROM results"), "0") << "expected the view back";
}

TEST(UpgradeTest, AFailingRepeatableNamesItsFileAndIsTriedAgainNextTime) {
  PARITY_REQUIRE_POSTGRES();
  const std::string url = parity::testing::PostgresEnvironment::EmptyDatabase();
  const Repeatable broken{"broken.sql", "CREATE OR REPLACE VIEW broken AS SELECT nothing"};
  absl::StatusOr<MigrationReport> first = ApplyMigrations(url, EmbeddedMigrations(), {&broken, 1});
  EXPECT_THAT(std::string(first.status().message()), ::testing::HasSubstr("server/sql/broken.sql"));
  EXPECT_EQ(Sql(url, "SELECT count(*) FROM schema_repeatables"), "0");
  const Repeatable fixed{"broken.sql", "CREATE OR REPLACE VIEW broken AS SELECT 1 AS something"};
  absl::StatusOr<MigrationReport> second = ApplyMigrations(url, EmbeddedMigrations(), {&fixed, 1});
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_THAT(second->repeatables_applied, ElementsAre("broken.sql"));
}

}  // namespace
}  // namespace parity::server::testing
