// What a client learns of a database failure: the kind and a reference, never PostgreSQL's own
// text; and every store statement has a deadline.
#include <pqxx/pqxx>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/store/postgres/pg_support.h"
#include "server/store/postgres/postgres_run_store.h"
#include "tests/scheduler/scheduler_fixture.h"

namespace parity::server::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(PostgresErrorsTest, AClientSeesTheKindAndAReferenceNotTheDatabasesText) {
  const pqxx::sql_error error("ERROR:  relation \"secret_table\" does not exist",
                              "SELECT * FROM secret_table", "42P01");
  const absl::Status status = pg::StatusFromException(error);
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(status.message()), HasSubstr("database error (scheduler log ref "));
  EXPECT_THAT(std::string(status.message()), Not(HasSubstr("secret_table")));

  const pqxx::broken_connection gone("connection to server at \"10.1.2.3\", port 5432 failed");
  const absl::Status unreachable = pg::StatusFromException(gone);
  EXPECT_EQ(unreachable.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(unreachable.message()), Not(HasSubstr("10.1.2.3")));

  EXPECT_THAT(std::string(pg::StatusFromException(error, pg::DatabaseText::kKeep).message()),
              HasSubstr("secret_table"))
      << "the operator's migrations keep the text";
}

TEST(PostgresErrorsTest, AStatementPastTheTimeoutIsUnavailableAndHoldsNothing) {
  PARITY_REQUIRE_POSTGRES();
  const std::string url = parity::testing::PostgresEnvironment::FreshDatabase();
  PostgresRunStore store(PostgresRunStoreOptions{url, 1, absl::Milliseconds(300)});
  pqxx::connection locker(url);
  pqxx::work lock(locker);
  lock.exec("LOCK TABLE sweeps IN ACCESS EXCLUSIVE MODE");  // every read of sweeps now waits
  const absl::Time start = absl::Now();
  const absl::Status waited = store.GetSweep("00000000-0000-0000-0000-000000000001").status();
  const absl::Duration took = absl::Now() - start;
  EXPECT_EQ(waited.code(), absl::StatusCode::kUnavailable) << waited;
  EXPECT_THAT(std::string(waited.message()), HasSubstr("timed out"));
  EXPECT_LT(took, absl::Seconds(5)) << "the statement should be cancelled at its timeout";
  lock.commit();
  EXPECT_EQ(store.GetSweep("00000000-0000-0000-0000-000000000001").status().code(),
            absl::StatusCode::kNotFound)
      << "the connection is usable again once the lock is gone";
}

}  // namespace
}  // namespace parity::server::testing
