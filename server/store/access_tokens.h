// AccessTokens: the bearer tokens the API authenticates with, and the keys the scheduler signs
// with (server/api/access_control.h is their one user). A token is stored as the SHA-256 of its
// secret, never the secret, with its name (the identity it acts as), role, expiry and revocation.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "server/store/paging.h"

namespace parity::server {

enum class TokenRole { kViewer, kResearcher, kWorker, kAdmin };

// "viewer", "researcher", "worker", "admin": the text access_tokens.role holds and messages say.
inline const char* TokenRoleName(TokenRole role) {
  switch (role) {
    case TokenRole::kViewer:
      return "viewer";
    case TokenRole::kResearcher:
      return "researcher";
    case TokenRole::kWorker:
      return "worker";
    case TokenRole::kAdmin:
      return "admin";
  }
  return "viewer";
}
inline TokenRole TokenRoleFromName(absl::string_view name) {
  for (TokenRole role : {TokenRole::kResearcher, TokenRole::kWorker, TokenRole::kAdmin}) {
    if (name == TokenRoleName(role)) return role;
  }
  return TokenRole::kViewer;
}

struct NewAccessToken {
  std::string name;
  TokenRole role = TokenRole::kViewer;
  std::string secret_sha256;  // 32 raw bytes
  std::string created_by;
  std::optional<absl::Time> expires_at;  // none = never
};

struct StoredAccessToken {
  std::string token_id;
  std::string name;
  TokenRole role = TokenRole::kViewer;
  std::string created_by;
  absl::Time created_at;
  std::optional<absl::Time> expires_at;
  std::optional<absl::Time> revoked_at;
};

struct TokenRevocation {
  std::string token_id;  // one token, or
  std::string name;      // every live token of a name
};

class AccessTokens {
 public:
  virtual ~AccessTokens() = default;

  // Stores a token; ALREADY_EXISTS if the hash is taken (a secret made twice: never by chance).
  virtual absl::StatusOr<StoredAccessToken> CreateToken(const NewAccessToken& token) = 0;
  // The token with this secret hash, revoked and expired ones included (the caller decides);
  // nullopt when none has it.
  virtual absl::StatusOr<std::optional<StoredAccessToken>> FindToken(
      const std::string& secret_sha256) = 0;
  // Newest first; revoked and expired ones only with include_inactive.
  virtual absl::StatusOr<Page<StoredAccessToken>> ListTokens(bool include_inactive,
                                                             const PageRequest& page) = 0;
  // Revokes the matching live tokens; returns how many.
  virtual absl::StatusOr<uint32_t> RevokeTokens(const TokenRevocation& which) = 0;
  // Whether any live (unrevoked, unexpired) admin token exists: the bootstrap asks.
  virtual absl::StatusOr<bool> HasLiveAdmin() = 0;
  // The key stored under `name`, storing `candidate` first when there is none (the first
  // scheduler to ask wins; every later one gets that key).
  virtual absl::StatusOr<std::string> GetOrCreateServerKey(const std::string& name,
                                                           const std::string& candidate) = 0;
};

}  // namespace parity::server
