// The schema of a database as text that can be committed and compared: `pg_dump --schema-only`
// without what varies between dumps of the same schema (version and owner comments, SET lines,
// pg_dump 15.14+'s random \restrict key), and a report of where two such texts first differ.
// server/sql/schema.snapshot.sql is one (schema_snapshot_test.cc).
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace parity::server::testing {

// How to regenerate the committed snapshot, for failure messages.
inline constexpr char kRegenerateSnapshot[] = "server/sql/update_schema_snapshot.sh";

// Runs pg_dump ($PARITY_PG_BIN, else /usr/lib/postgresql/15/bin, as the test cluster does) on
// the database at `connection_string` and returns NormalizeDump of its output.
absl::StatusOr<std::string> DumpSchema(const std::string& connection_string);

// Drops comment lines ("--"), SET and set_config lines and \restrict/\unrestrict, collapses runs
// of blank lines, and ends with exactly one newline. pg_dump orders objects by kind and name, so
// what is left depends only on the schema.
std::string NormalizeDump(absl::string_view dump);

// "" when equal; otherwise the line number where `actual` first departs from `expected` and up to
// `context` lines of each from there.
std::string FirstDifference(absl::string_view expected, absl::string_view actual, int context = 8);

}  // namespace parity::server::testing
