// Every SQL statement of PostgresRunStore, by name. The text lives in server/sql/statements/*.sql
// (server/sql/README.md says how a file is laid out), compiled into the binary by
// server/CMakeLists.txt, so the SQL is reviewed as SQL in one place; parameters are positional
// ($1...) as each statement's comment says. Statements are prepared once per connection unless
// their comment marks them "unprepared" (run only when asked, or with a part filled in per call).
#pragma once

#include <pqxx/connection>
#include <span>
#include <string>

#include "absl/strings/string_view.h"

namespace parity::server::pg {

struct StatementFile {
  absl::string_view name;  // e.g. "sweeps.sql"
  absl::string_view text;
};

// The files of server/sql/statements/, by name (generated: statements_embedded.cc).
std::span<const StatementFile> EmbeddedStatementFiles();

// The text of statement `name`, its {{fragments}} filled in. A name no file defines is a
// programmer error: the process aborts saying which.
const std::string& Statement(absl::string_view name);

// Prepares every statement not marked unprepared on `connection`, under its own name.
void PrepareStatements(pqxx::connection& connection);

}  // namespace parity::server::pg
