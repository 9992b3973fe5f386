// MemoryRunStore's AccessTokens and the owner load read, as postgres_access_tokens.cc answers.
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/status_macros.h"
#include "server/store/memory/memory_run_store.h"

namespace parity::server {
namespace {

bool Live(const StoredAccessToken& token, absl::Time now) {
  return !token.revoked_at.has_value() &&
         (!token.expires_at.has_value() || *token.expires_at > now);
}

}  // namespace

absl::StatusOr<StoredAccessToken> MemoryRunStore::CreateToken(const NewAccessToken& token) {
  absl::MutexLock lock(&mu_);
  for (const TokenRow& row : tokens_) {
    if (row.secret_sha256 == token.secret_sha256) {
      return absl::AlreadyExistsError("a token with this secret exists");
    }
  }
  TokenRow& row = tokens_.emplace_back();
  row.secret_sha256 = token.secret_sha256;
  row.seq = next_seq_++;
  row.token.token_id = NewId();
  row.token.name = token.name;
  row.token.role = token.role;
  row.token.created_by = token.created_by;
  row.token.created_at = now_();
  row.token.expires_at = token.expires_at;
  return row.token;
}

absl::StatusOr<std::optional<StoredAccessToken>> MemoryRunStore::FindToken(
    const std::string& secret_sha256) {
  absl::MutexLock lock(&mu_);
  for (const TokenRow& row : tokens_) {
    if (row.secret_sha256 == secret_sha256) return std::optional<StoredAccessToken>(row.token);
  }
  return std::optional<StoredAccessToken>();
}

absl::StatusOr<Page<StoredAccessToken>> MemoryRunStore::ListTokens(bool include_inactive,
                                                                   const PageRequest& page) {
  uint64_t before = UINT64_MAX;
  if (!page.page_token.empty()) {
    PARITY_ASSIGN_OR_RETURN(const std::string text, DecodePageToken(page.page_token));
    if (!absl::SimpleAtoi(text, &before)) return BadPageToken();
  }
  absl::MutexLock lock(&mu_);
  const absl::Time now = now_();
  Page<StoredAccessToken> result;
  uint64_t last_seq = 0;
  for (auto it = tokens_.rbegin(); it != tokens_.rend(); ++it) {  // newest first
    if (it->seq >= before || (!include_inactive && !Live(it->token, now))) continue;
    if (result.items.size() == page.page_size) {
      result.next_page_token = EncodePageToken(absl::StrCat(last_seq));
      break;
    }
    result.items.push_back(it->token);
    last_seq = it->seq;
  }
  return result;
}

absl::StatusOr<uint32_t> MemoryRunStore::RevokeTokens(const TokenRevocation& which) {
  absl::MutexLock lock(&mu_);
  uint32_t revoked = 0;
  for (TokenRow& row : tokens_) {
    const bool match = which.token_id.empty() ? row.token.name == which.name
                                              : row.token.token_id == which.token_id;
    if (match && !row.token.revoked_at.has_value()) {
      row.token.revoked_at = now_();
      ++revoked;
    }
  }
  return revoked;
}

absl::StatusOr<bool> MemoryRunStore::HasLiveAdmin() {
  absl::MutexLock lock(&mu_);
  const absl::Time now = now_();
  for (const TokenRow& row : tokens_) {
    if (row.token.role == TokenRole::kAdmin && Live(row.token, now)) return true;
  }
  return false;
}

absl::StatusOr<std::string> MemoryRunStore::GetOrCreateServerKey(const std::string& name,
                                                                 const std::string& candidate) {
  absl::MutexLock lock(&mu_);
  return server_keys_.try_emplace(name, candidate).first->second;
}

absl::StatusOr<OwnerLoad> MemoryRunStore::CountOwnerLoad(const std::string& owner) {
  absl::MutexLock lock(&mu_);
  OwnerLoad load;
  for (const auto& [id, sweep] : sweeps_) {
    if (sweep.owner != owner || sweep.state != v1::SWEEP_STATE_ACTIVE) continue;
    ++load.open_sweeps;
    for (const std::string& run_id : sweep.run_ids) {
      const v1::RunState state = runs_.at(run_id).run.state();
      load.queued_runs += state == v1::RUN_STATE_PENDING || state == v1::RUN_STATE_LEASED ||
                          state == v1::RUN_STATE_RUNNING;
    }
  }
  return load;
}

}  // namespace parity::server
