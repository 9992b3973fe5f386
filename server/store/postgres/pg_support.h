// Helpers shared by the PostgreSQL store's files: the one place where libpqxx exceptions become
// absl::Status (nothing from libpqxx escapes the store), the transaction wrapper, and the text
// forms of enums and timestamps used in SQL.
#pragma once

// Debian's libpqxx 6.4 build lacks PQXX_HAVE_OPTIONAL; server/CMakeLists.txt defines it so that
// std::optional parameters become NULL.
#include <pqxx/pqxx>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "google/protobuf/timestamp.pb.h"
#include "parity/v1/run.pb.h"
#include "server/store/leader_leases.h"
#include "server/store/postgres/pg_connection_pool.h"
#include "server/store/store_errors.h"

namespace parity::server::pg {

// Whether a status may carry PostgreSQL's own text (table, column and constraint names, values,
// the server's address): only for the operator (migrations at start-up), never for a client.
enum class DatabaseText { kLog, kKeep };

// Maps a libpqxx/libpq failure to the code that tells the caller what to do. With kLog (every
// store call) the message says only what kind of failure it was and a reference; the database's
// text goes to the scheduler's log under that reference (event=database_error ref=…).
absl::Status StatusFromException(const std::exception& e, DatabaseText text = DatabaseText::kLog);
// The same for a failure described by `detail` (logged, not returned).
absl::Status DatabaseFailure(absl::StatusCode code, absl::string_view kind,
                             absl::string_view detail);
// The primary line of a server error ("ERROR:  text\nCONTEXT: ..." → "text"): what a
// RAISE EXCEPTION said, without its severity and PL/pgSQL context.
std::string PrimaryMessage(const pqxx::sql_error& e);

// The leader's term that the transactions this thread runs must still hold (null: none).
// Set by UpkeepFenceScope (postgres_fenced_upkeep.cc) around an upkeep call.
const LeaderFence* CurrentUpkeepFence();
// FAILED_PRECONDITION (PreconditionFailure type LEADER_EPOCH) when `fence`'s term is over.
absl::Status CheckUpkeepFence(pqxx::work& tx, const LeaderFence& fence);

// Runs `body(pqxx::work&)` → absl::StatusOr<T> (or absl::Status) in one transaction, committed
// only when the body succeeds; any exception becomes a status.
template <typename Body>
auto WithTransaction(PgConnectionPool& pool, Body&& body)
    -> decltype(body(std::declval<pqxx::work&>())) {
  auto handle = pool.Acquire();
  if (!handle.ok()) return handle.status();
  try {
    pqxx::work tx(**handle);
    auto result = body(tx);
    // Upkeep under a leader's term (UpkeepFenceScope): the term is checked last, under a lock
    // of the leadership row held to the commit (server/sql/leader_fence_holds.sql).
    if (result.ok() && CurrentUpkeepFence() != nullptr) {
      absl::Status fence = CheckUpkeepFence(tx, *CurrentUpkeepFence());
      if (!fence.ok()) return fence;
    }
    if (result.ok()) tx.commit();
    return result;
  } catch (const std::exception& e) {
    return StatusFromException(e);
  }
}

// Runs `body(pqxx::nontransaction&)` for callers that send exactly one statement: PostgreSQL
// runs it as its own transaction (atomic), and the BEGIN and COMMIT round trips are saved.
template <typename Body>
auto WithSingleStatement(PgConnectionPool& pool, Body&& body)
    -> decltype(body(std::declval<pqxx::nontransaction&>())) {
  auto handle = pool.Acquire();
  if (!handle.ok()) return handle.status();
  try {
    pqxx::nontransaction tx(**handle);
    return body(tx);
  } catch (const std::exception& e) {
    return StatusFromException(e);
  }
}

// "RUN_STATE_PENDING" ↔ "PENDING", and the same for sweep states, failure classes and roles.
std::string RunStateText(v1::RunState state);
v1::RunState RunStateFromText(absl::string_view text);
std::string SweepStateText(v1::SweepState state);
v1::SweepState SweepStateFromText(absl::string_view text);
std::string FailureClassText(v1::FailureClass failure_class);
v1::FailureClass FailureClassFromText(absl::string_view text);
std::string RoleText(v1::RunRole role);
v1::RunRole RoleFromText(absl::string_view text);
// "dense", "1dense+SE", "all-moe" or "interleaved".
std::string LayoutText(const v1::ModelSpec& model);

// SQL expression giving microseconds since the epoch of a timestamptz column (NULL stays NULL).
google::protobuf::Timestamp TimestampFromMicros(int64_t micros);
absl::Time TimeFromMicros(int64_t micros);
// Sets `*out` from a nullable micros field; leaves it unset when NULL.
void SetTimestamp(const pqxx::field& field, google::protobuf::Timestamp* out);

// Binary data in and out of bytea columns.
pqxx::binarystring Bytes(const std::string& data);
std::string BytesOf(const pqxx::field& field);

// The contract's errors (server/store/store_errors.h), under the names this room uses.
using ::parity::server::LeaseEpochError;
using ::parity::server::NotFoundError;

}  // namespace parity::server::pg
