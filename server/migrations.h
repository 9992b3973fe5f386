// Schema migrations: the numbered SQL files of migrations/ (NNNN_name.sql), compiled into the
// binary, applied in order, each in its own transaction, and recorded in schema_migrations with
// an md5 of its text. Forward-only. Several scheduler replicas may start at once: an advisory
// lock makes one apply while the others wait and then find nothing to do.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace parity::server {

struct Migration {
  int version = 0;         // NNNN of the file name
  absl::string_view name;  // the file name
  absl::string_view sql;
};

// The migrations compiled in from migrations/, by version.
std::span<const Migration> EmbeddedMigrations();

struct MigrationReport {
  int applied = 0;          // migrations applied by this call
  int current_version = 0;  // highest version now applied
};

// Applies every migration not yet recorded. FAILED_PRECONDITION when an applied migration's text
// changed (they are forward-only) or the database is at a version this binary does not know;
// UNAVAILABLE when the database cannot be reached.
absl::StatusOr<MigrationReport> ApplyMigrations(const std::string& database_url,
                                                std::span<const Migration> migrations);

}  // namespace parity::server
