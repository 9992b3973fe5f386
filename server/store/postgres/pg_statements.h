// Every SQL statement of PostgresRunStore, named and prepared once per connection, so the SQL is
// reviewed in one place and parsed once. Parameters are positional ($1...) as commented.
#pragma once

#include <pqxx/connection>

namespace parity::server::pg {

// Column list of a Run (table alias `r`), read by RunFromRow().
extern const char* const kRunColumns;
// Column list of a Sweep with its counts (alias `s`, lateral `c`), read by SweepFromRow().
extern const char* const kSweepSelect;

void PrepareStatements(pqxx::connection& connection);

}  // namespace parity::server::pg
