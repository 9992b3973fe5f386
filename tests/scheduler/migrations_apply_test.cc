// Applying the embedded migrations to a database: a second run applies none, and a migration
// whose text changed after it was applied is refused. Needs PostgreSQL because migrations are
// PostgreSQL's own (schema_migrations, the DDL of server/sql/); the memory store has no schema.
// (Moved from scheduler_queries_test.cc when the scheduler's logic tests went to the memory store.)
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "server/store/postgres/migrations.h"
#include "tests/scheduler/scheduler_fixture.h"
#include "tests/support/postgres_environment.h"

namespace parity::server::testing {
namespace {

TEST(MigrationsTest, ApplyToEmptyDatabaseThenReapplyIsANoOp) {
  PARITY_REQUIRE_POSTGRES();
  const std::string url = parity::testing::PostgresEnvironment::EmptyDatabase();
  absl::StatusOr<MigrationReport> first = ApplyMigrations(url, EmbeddedMigrations());
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->applied, static_cast<int>(EmbeddedMigrations().size()));
  absl::StatusOr<MigrationReport> second = ApplyMigrations(url, EmbeddedMigrations());
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->applied, 0);
  EXPECT_EQ(second->current_version, first->current_version);
  EXPECT_EQ(Sql(url, "SELECT count(*) FROM schema_migrations"),
            absl::StrCat(EmbeddedMigrations().size()));
  EXPECT_EQ(Sql(url, "SELECT count(*) FROM results"), "0");
}

TEST(MigrationsTest, ChangedMigrationIsFailedPrecondition) {
  PARITY_REQUIRE_POSTGRES();
  const std::string url = parity::testing::PostgresEnvironment::EmptyDatabase();
  ASSERT_TRUE(ApplyMigrations(url, EmbeddedMigrations()).ok());
  Migration edited = EmbeddedMigrations()[0];
  edited.sql = "SELECT 1";
  EXPECT_EQ(ApplyMigrations(url, {&edited, 1}).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace parity::server::testing
