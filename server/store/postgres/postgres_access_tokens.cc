// PostgresRunStore's AccessTokens (access_tokens, server_keys: migration 0012) and the owner load
// read that the per-identity limits check at submission. Not on the lease path: the API caches
// what FindToken returns (server/api/access_control.h), so their statements
// (server/sql/statements/access_tokens.sql, count_owner_load in sweeps.sql) run unprepared.
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/status_macros.h"
#include "server/store/postgres/pg_statements.h"
#include "server/store/postgres/pg_support.h"
#include "server/store/postgres/postgres_run_store.h"

namespace parity::server {
namespace {

using pg::WithTransaction;

StoredAccessToken TokenFromRow(const pqxx::row& row) {
  StoredAccessToken token;
  token.token_id = row[0].c_str();
  token.name = row[1].c_str();
  token.role = TokenRoleFromName(row[2].c_str());
  token.created_by = row[3].c_str();
  token.created_at = pg::TimeFromMicros(row[4].as<int64_t>());
  if (!row[5].is_null()) token.expires_at = pg::TimeFromMicros(row[5].as<int64_t>());
  if (!row[6].is_null()) token.revoked_at = pg::TimeFromMicros(row[6].as<int64_t>());
  return token;
}

std::optional<int64_t> MicrosOf(const std::optional<absl::Time>& time) {
  if (!time.has_value()) return std::nullopt;
  return absl::ToUnixMicros(*time);
}

}  // namespace

absl::StatusOr<StoredAccessToken> PostgresRunStore::CreateToken(const NewAccessToken& token) {
  return WithTransaction(*pool_, [&](pqxx::work& tx) -> absl::StatusOr<StoredAccessToken> {
    const pqxx::result rows = tx.exec_params(
        pg::Statement("create_token"), token.name, TokenRoleName(token.role),
        pg::Bytes(token.secret_sha256), token.created_by, MicrosOf(token.expires_at));
    if (rows.empty()) return absl::AlreadyExistsError("a token with this secret exists");
    return TokenFromRow(rows[0]);
  });
}

absl::StatusOr<std::optional<StoredAccessToken>> PostgresRunStore::FindToken(
    const std::string& secret_sha256) {
  return WithTransaction(
      *pool_, [&](pqxx::work& tx) -> absl::StatusOr<std::optional<StoredAccessToken>> {
        const pqxx::result rows =
            tx.exec_params(pg::Statement("find_token"), pg::Bytes(secret_sha256));
        if (rows.empty()) return std::optional<StoredAccessToken>();
        return std::optional<StoredAccessToken>(TokenFromRow(rows[0]));
      });
}

absl::StatusOr<Page<StoredAccessToken>> PostgresRunStore::ListTokens(bool include_inactive,
                                                                     const PageRequest& page) {
  // Keyset paging on (created_at, token_id), newest first.
  std::optional<int64_t> after_micros;
  std::string after_id;
  if (!page.page_token.empty()) {
    PARITY_ASSIGN_OR_RETURN(const std::string text, DecodePageToken(page.page_token));
    std::vector<std::string> parts = absl::StrSplit(text, '|');
    int64_t micros = 0;
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &micros) || parts[1].size() != 36) {
      return BadPageToken();
    }
    after_micros = micros;
    after_id = parts[1];
  }
  return WithTransaction(*pool_, [&](pqxx::work& tx) -> absl::StatusOr<Page<StoredAccessToken>> {
    const pqxx::result rows =
        tx.exec_params(pg::Statement("list_tokens"), include_inactive, after_micros, after_id,
                       static_cast<int>(page.page_size) + 1);
    Page<StoredAccessToken> result;
    for (const pqxx::row& row : rows) {
      if (result.items.size() == page.page_size) {
        const StoredAccessToken& last = result.items.back();
        result.next_page_token =
            EncodePageToken(absl::StrCat(absl::ToUnixMicros(last.created_at), "|", last.token_id));
        break;
      }
      result.items.push_back(TokenFromRow(row));
    }
    return result;
  });
}

absl::StatusOr<uint32_t> PostgresRunStore::RevokeTokens(const TokenRevocation& which) {
  return WithTransaction(*pool_, [&](pqxx::work& tx) -> absl::StatusOr<uint32_t> {
    const pqxx::result rows =
        which.token_id.empty()
            ? tx.exec_params(pg::Statement("revoke_tokens_by_name"), which.name)
            : tx.exec_params(pg::Statement("revoke_token_by_id"), which.token_id);
    return static_cast<uint32_t>(rows.size());
  });
}

absl::StatusOr<bool> PostgresRunStore::HasLiveAdmin() {
  return WithTransaction(*pool_, [&](pqxx::work& tx) -> absl::StatusOr<bool> {
    return !tx.exec(pg::Statement("has_live_admin")).empty();
  });
}

absl::StatusOr<std::string> PostgresRunStore::GetOrCreateServerKey(const std::string& name,
                                                                   const std::string& candidate) {
  return WithTransaction(*pool_, [&](pqxx::work& tx) -> absl::StatusOr<std::string> {
    tx.exec_params(pg::Statement("insert_server_key"), name, pg::Bytes(candidate));
    const pqxx::result rows = tx.exec_params(pg::Statement("server_key"), name);
    if (rows.empty()) return absl::InternalError(absl::StrCat("server key ", name, " vanished"));
    return pg::BytesOf(rows[0][0]);
  });
}

absl::StatusOr<OwnerLoad> PostgresRunStore::CountOwnerLoad(const std::string& owner) {
  return WithTransaction(*pool_, [&](pqxx::work& tx) -> absl::StatusOr<OwnerLoad> {
    const pqxx::result rows = tx.exec_params(pg::Statement("count_owner_load"), owner);
    OwnerLoad load;
    load.open_sweeps = rows[0][0].as<uint32_t>();
    load.queued_runs = rows[0][1].as<uint64_t>();
    return load;
  });
}

}  // namespace parity::server
