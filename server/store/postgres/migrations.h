// Schema migrations, in two kinds, both compiled into the binary and applied by one call under
// an advisory lock (several scheduler replicas may start at once: one applies while the others
// wait and then find nothing to do):
// - numbered migrations, migrations/NNNN_name.sql: DDL, applied once each in order, each in its
//   own transaction, recorded in schema_migrations with an md5 of its text. Forward-only.
// - repeatables, server/sql/*.sql: one function, trigger or view each, applied after the
//   numbered migrations whenever the file's md5 differs from the one recorded in
//   schema_repeatables (each in its own transaction), so that they are edited in place.
// server/sql/README.md says how to change them.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace parity::server {

struct Migration {
  int version = 0;         // NNNN of the file name
  absl::string_view name;  // the file name
  absl::string_view sql;
};

// A file of server/sql/: one CREATE OR REPLACE of a function, trigger or view.
struct Repeatable {
  absl::string_view name;  // the file name, e.g. "lease_runs.sql"
  absl::string_view sql;
};

// The migrations compiled in from migrations/, by version.
std::span<const Migration> EmbeddedMigrations();

// The repeatables compiled in from server/sql/, in the order they are applied: functions, then
// views (*.view.sql), then triggers (*.trigger.sql), by file name within each.
std::span<const Repeatable> EmbeddedRepeatables();

struct MigrationReport {
  int applied = 0;          // numbered migrations applied by this call
  int current_version = 0;  // highest version now applied
  // The repeatables this call applied (new or changed since last applied), in order.
  std::vector<std::string> repeatables_applied;
};

// Applies every numbered migration not yet recorded, then every repeatable whose text is new or
// changed, in the order given. FAILED_PRECONDITION when an applied migration's text changed
// (they are forward-only) or the database is at a version this binary does not know (then no
// repeatable is applied either: they are written for the newest schema); UNAVAILABLE when the
// database cannot be reached. A prefix of EmbeddedMigrations() with no repeatables builds the
// schema as an older binary left it (upgrade tests).
absl::StatusOr<MigrationReport> ApplyMigrations(
    const std::string& database_url, std::span<const Migration> migrations,
    std::span<const Repeatable> repeatables = EmbeddedRepeatables());

}  // namespace parity::server
