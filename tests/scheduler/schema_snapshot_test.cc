// The schema a fresh `parity-scheduler migrate` builds, against the committed
// server/sql/schema.snapshot.sql: any change to a migration or to a file of server/sql/ must come
// with the regenerated snapshot, so that a review shows what it does to the schema.
// PARITY_WRITE_SCHEMA_SNAPSHOT=1 writes the snapshot instead
// (server/sql/update_schema_snapshot.sh).
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <pqxx/pqxx>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "gtest/gtest.h"
#include "server/store/postgres/migrations.h"
#include "tests/scheduler/schema_dump.h"
#include "tests/support/postgres_environment.h"

namespace parity::server::testing {
namespace {

const std::string kSnapshotPath = PARITY_SOURCE_DIR "/server/sql/schema.snapshot.sql";

// A freshly migrated database with `repeatables`, dumped.
std::string MigrateAndDump(std::span<const Repeatable> repeatables) {
  const std::string url = parity::testing::PostgresEnvironment::EmptyDatabase();
  absl::StatusOr<MigrationReport> report = ApplyMigrations(url, EmbeddedMigrations(), repeatables);
  EXPECT_TRUE(report.ok()) << report.status();
  absl::StatusOr<std::string> dump = DumpSchema(url);
  EXPECT_TRUE(dump.ok()) << dump.status();
  return dump.ok() ? *dump : "";
}

std::string ReadSnapshot() {
  std::ifstream file(kSnapshotPath);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

TEST(SchemaSnapshotTest, FreshlyMigratedSchemaMatchesTheCommittedSnapshot) {
  PARITY_REQUIRE_POSTGRES();
  const std::string dump = MigrateAndDump(EmbeddedRepeatables());
  ASSERT_FALSE(dump.empty());
  if (std::getenv("PARITY_WRITE_SCHEMA_SNAPSHOT") != nullptr) {
    std::ofstream(kSnapshotPath) << dump;
    std::cout << "wrote " << kSnapshotPath << "\n";
    return;
  }
  const std::string snapshot = ReadSnapshot();
  ASSERT_FALSE(snapshot.empty()) << "expected a schema snapshot at " << kSnapshotPath
                                 << "; create it with " << kRegenerateSnapshot;
  EXPECT_TRUE(dump == snapshot)
      << "the schema a fresh migration builds is not server/sql/schema.snapshot.sql: "
      << FirstDifference(snapshot, dump)
      << "\nIf the change is intended, regenerate the snapshot with " << kRegenerateSnapshot
      << " and commit it with the change.";
}

// The check above would catch an edit of a function body that comes without the snapshot: the
// body is in the dump, and the difference is reported at the edited line.
TEST(SchemaSnapshotTest, AnEditedFunctionBodyIsDrift) {
  PARITY_REQUIRE_POSTGRES();
  std::vector<Repeatable> edited(EmbeddedRepeatables().begin(), EmbeddedRepeatables().end());
  std::string body;
  for (Repeatable& repeatable : edited) {
    if (repeatable.name != "lease_runs.sql") continue;
    body =
        absl::StrReplaceAll(repeatable.sql, {{"v_round integer := 0;", "v_round integer := 1;"}});
    repeatable.sql = body;
  }
  ASSERT_FALSE(body.empty()) << "expected lease_runs.sql among the repeatables";
  const std::string dump = MigrateAndDump(edited);
  const std::string snapshot = ReadSnapshot();
  const std::string difference = FirstDifference(snapshot, dump);
  EXPECT_TRUE(absl::StrContains(difference, "v_round integer := 1;"))
      << "expected the edited line reported, got: " << difference;
}

// Functions live in server/sql/, one file each, and nothing else installs one: a migration that
// created a function, or one left behind when its file was removed, shows up here.
TEST(SchemaSnapshotTest, InstalledFunctionsAreExactlyTheFilesOfServerSql) {
  PARITY_REQUIRE_POSTGRES();
  const std::string url = parity::testing::PostgresEnvironment::EmptyDatabase();
  ASSERT_TRUE(ApplyMigrations(url, EmbeddedMigrations()).ok());
  std::set<std::string> files;
  for (const Repeatable& repeatable : EmbeddedRepeatables()) {
    if (absl::EndsWith(repeatable.name, ".view.sql") ||
        absl::EndsWith(repeatable.name, ".trigger.sql")) {
      continue;
    }
    files.insert(std::string(absl::StripSuffix(repeatable.name, ".sql")));
  }
  std::set<std::string> installed;
  pqxx::connection connection(url);
  pqxx::read_transaction tx(connection);
  for (const auto& row :
       tx.exec("SELECT proname FROM pg_proc WHERE pronamespace = 'public'::regnamespace")) {
    installed.insert(row[0].c_str());
  }
  EXPECT_EQ(installed, files) << "expected one function per file of server/sql/ and no other";
}

}  // namespace
}  // namespace parity::server::testing
