// The PostgreSQL scheduler fixture: a fresh migrated database, a PostgresRunStore and the
// scheduling units wired the way SchedulerServer wires them (SchedulerUnderTest), on the real
// clock; and Sql(), to look at or change rows directly. Only for tests of what PostgreSQL itself
// does (batched statements, row locks, the stored checkpoint column, SQL errors): the scheduling
// logic is tested on the memory store and the fake clock (scheduler_logic_fixture.h), and the
// stores are held to one contract (store_contract_test.h).
#pragma once

#include <memory>
#include <pqxx/pqxx>
#include <string>

#include "gtest/gtest.h"
#include "server/store/postgres/postgres_run_store.h"
#include "tests/scheduler/scheduler_calls.h"
#include "tests/support/postgres_environment.h"

namespace parity::server::testing {

// Runs SQL and returns the first column of the first row as text ("" when none).
inline std::string Sql(const std::string& url, const std::string& sql) {
  pqxx::connection connection(url);
  pqxx::work tx(connection);
  pqxx::result result = tx.exec(sql);
  tx.commit();
  if (result.empty() || result[0][0].is_null()) return "";
  return result[0][0].c_str();
}

class SchedulerTest : public ::testing::Test, protected SchedulerCalls {
 protected:
  void SetUp() override {
    PARITY_REQUIRE_POSTGRES();
    database_url_ = parity::testing::PostgresEnvironment::FreshDatabase();
    ASSERT_FALSE(database_url_.empty());
    store_ = std::make_unique<PostgresRunStore>(PostgresRunStoreOptions{database_url_, 8});
    options_ = FastSchedulerOptions();
    scheduler_ = std::make_unique<SchedulerUnderTest>(*store_, signal_, clock_, &StubPlanner,
                                                      options_, nullptr);
    // A first reaper pass: it records the reaper's liveness with no outage (a test that wants
    // the server's start-up grace passes Upkeep::ReapPass::kStartUp), so the tests' passes
    // return what expired, charged.
    ASSERT_TRUE(scheduler_->ReapExpiredLeases().ok());
  }

  SchedulerUnderTest& under_test() override { return *scheduler_; }

  std::string database_url_;
  RealClock clock_;
  WorkSignal signal_;
  SchedulerOptions options_;
  std::unique_ptr<PostgresRunStore> store_;
  std::unique_ptr<SchedulerUnderTest> scheduler_;
};

}  // namespace parity::server::testing
