#include "server/store/postgres/migrations.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "server/store/postgres/pg_support.h"
#include "spdlog/spdlog.h"

namespace parity::server {
namespace {

// "parity" in ASCII: the advisory lock taken while migrating.
constexpr int64_t kMigrationLockKey = 0x706172697479;

// A failed file's status names the file: the SQL error alone does not say which one ran.
absl::Status InFile(const absl::Status& status, absl::string_view file) {
  return absl::Status(status.code(), absl::StrCat(file, ": ", status.message()));
}

}  // namespace

absl::StatusOr<MigrationReport> ApplyMigrations(const std::string& database_url,
                                                std::span<const Migration> migrations,
                                                std::span<const Repeatable> repeatables) {
  try {
    pqxx::connection connection(database_url);
    pqxx::nontransaction session(connection);
    session.exec("SET client_min_messages = warning");
    session.exec(absl::StrCat("SELECT pg_advisory_lock(", kMigrationLockKey, ")"));
    // Released when the connection closes, even if a migration throws.
    session.exec(
        "CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY, name text "
        "NOT NULL, checksum text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())");
    session.exec(
        "CREATE TABLE IF NOT EXISTS schema_repeatables (name text PRIMARY KEY, checksum text "
        "NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())");
    std::map<int, std::string> applied;
    for (const auto& row : session.exec("SELECT version, checksum FROM schema_migrations")) {
      applied[row[0].as<int>()] = row[1].c_str();
    }
    session.commit();

    MigrationReport report;
    for (const Migration& migration : migrations) {
      const std::string sql(migration.sql);
      pqxx::work tx(connection);
      const std::string checksum = tx.exec_params1("SELECT md5($1)", sql)[0].c_str();
      if (auto it = applied.find(migration.version); it != applied.end()) {
        if (it->second != checksum) {
          return absl::FailedPreconditionError(
              absl::StrCat("migration ", migration.name,
                           " changed after it was applied; migrations are forward-only: add a "
                           "new file instead"));
        }
        report.current_version = std::max(report.current_version, migration.version);
        continue;
      }
      try {
        tx.exec(sql);
      } catch (const pqxx::sql_error& e) {
        return InFile(pg::StatusFromException(e, pg::DatabaseText::kKeep),
                      absl::StrCat("migrations/", migration.name));
      }
      tx.exec_params("INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, $3)",
                     migration.version, std::string(migration.name), checksum);
      tx.commit();
      ++report.applied;
      report.current_version = migration.version;
    }
    for (const auto& [version, checksum] : applied) {
      if (version > report.current_version) {
        return absl::FailedPreconditionError(
            absl::StrCat("the database is at schema version ", version,
                         ", newer than this binary knows (", report.current_version, ")"));
      }
    }

    // Repeatables: CREATE OR REPLACE, so applying one again is harmless; skipped when unchanged
    // so that a start-up replaces no function (and invalidates no cached plan) for nothing.
    // Read after the numbered migrations: one that drops an object deletes its file's row.
    std::map<std::string, std::string> applied_repeatables;
    {
      pqxx::read_transaction tx(connection);
      for (const auto& row : tx.exec("SELECT name, checksum FROM schema_repeatables")) {
        applied_repeatables[row[0].c_str()] = row[1].c_str();
      }
    }
    for (const Repeatable& repeatable : repeatables) {
      const std::string sql(repeatable.sql);
      const std::string name(repeatable.name);
      pqxx::work tx(connection);
      const std::string checksum = tx.exec_params1("SELECT md5($1)", sql)[0].c_str();
      if (auto it = applied_repeatables.find(name);
          it != applied_repeatables.end() && it->second == checksum) {
        continue;
      }
      try {
        tx.exec(sql);
      } catch (const pqxx::sql_error& e) {
        return InFile(pg::StatusFromException(e, pg::DatabaseText::kKeep),
                      absl::StrCat("server/sql/", name));
      }
      tx.exec_params(
          "INSERT INTO schema_repeatables (name, checksum) VALUES ($1, $2) ON CONFLICT (name) DO "
          "UPDATE SET checksum = excluded.checksum, applied_at = now()",
          name, checksum);
      tx.commit();
      // The one trace in the logs of a function replaced under running replicas.
      spdlog::info("event=sql_applied file=server/sql/{} checksum={}", name, checksum);
      report.repeatables_applied.push_back(name);
    }
    return report;
  } catch (const std::exception& e) {
    return pg::StatusFromException(e, pg::DatabaseText::kKeep);
  }
}

}  // namespace parity::server
