// AccessControl: who may call the scheduler, decided in one place for every gRPC method and
// HTTP route. Callers present a bearer token (random, shown once, stored only as its SHA-256 in
// AccessTokens); its name is the identity they act as and its role what they may do:
//
//   viewer      read sweeps, runs, results, workers, metrics and the dashboard
//   researcher  viewer + plan and submit sweeps, cancel and delete their own
//   worker      the WorkerService only
//   admin       everything, on any sweep, above the priority ceiling, and tokens
//
// kRules below maps every method and route to the permission it needs; a test checks that every
// method of every service has a rule, and an unlisted one is refused (fail closed). Ownership
// of a sweep and the priority ceiling are SweepsService's to check (server/scheduling/caller.h).
//
// Authenticated tokens are cached for `cache_ttl` (2 s) so that the lease path does not read
// the database per call; expiry is checked on every call, and a revocation through this
// scheduler evicts the token at once (another replica sees it within cache_ttl). Unknown tokens
// are cached too (negative_cache_ttl, 5 s, at most negative_cache_size, keyed by the secret's
// hash), so a client repeating a bad token costs no database lookup per call; a token shorter
// than any this scheduler issues (32 characters) is refused without one. A token created through
// this scheduler (or the bootstrap token) leaves the negative cache at once; one created through
// another replica works here within negative_cache_ttl at worst — and only if it had been
// presented before it existed, which a random secret never is.
#pragma once

#include <deque>
#include <map>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "parity/v1/token_service.pb.h"
#include "server/scheduling/caller.h"
#include "server/scheduling/clock.h"
#include "server/store/access_tokens.h"

namespace parity::server {

enum class Permission {
  kPublic,  // no token: health checks, the login page, static assets
  kRead,    // viewer, researcher, admin
  kSubmit,  // researcher, admin (ownership of a sweep: SweepsService)
  kWorker,  // worker, admin
  kAdmin,   // admin
};

// The permission of a gRPC method ("parity.v1.SweepService/SubmitSweep") or HTTP route
// ("GET /api/v1", "GET /metrics", "GET /", ...); nullopt for one without a rule.
std::optional<Permission> RequiredPermission(absl::string_view method);
bool RoleGrants(TokenRole role, Permission permission);

struct Identity {
  std::string token_id;
  std::string name;
  TokenRole role = TokenRole::kViewer;
  std::optional<absl::Time> expires_at;

  Caller AsCaller() const { return Caller{name, role == TokenRole::kAdmin}; }
};

struct AccessControlOptions {
  absl::Duration cache_ttl = absl::Seconds(2);
  // Concurrent WatchSweep/WatchRun streams one identity may hold.
  int max_watch_streams_per_identity = 16;
  absl::Duration negative_cache_ttl = absl::Seconds(5);
  size_t negative_cache_size = 10000;
};

class AccessControl {
 public:
  // `tokens` and `clock` must outlive this object.
  AccessControl(AccessTokens& tokens, const Clock& clock, AccessControlOptions options = {});

  // Makes sure an admin can log in on a fresh installation: stores `secret` as the token of
  // admin "admin" (created by "bootstrap") unless its hash is stored already. A revoked
  // bootstrap token stays revoked.
  absl::Status Bootstrap(const std::string& secret);
  // Whether any live admin token exists (the first start creates one when not).
  absl::StatusOr<bool> HasLiveAdmin() { return tokens_.HasLiveAdmin(); }

  // The identity of `secret` if it may use `method`: UNAUTHENTICATED when there is no token or
  // it is unknown, expired or revoked; PERMISSION_DENIED when its role may not (or the method
  // has no rule). Public methods return an empty identity with or without a token.
  absl::StatusOr<Identity> Authorize(absl::string_view secret, absl::string_view method);
  // The token from an `authorization` header value ("Bearer X"); empty when it is not one.
  static absl::string_view BearerToken(absl::string_view header);

  // TokenService, for an admin `by`.
  absl::StatusOr<v1::CreateTokenResponse> CreateToken(const v1::CreateTokenRequest& request,
                                                      const Identity& by);
  absl::StatusOr<v1::ListTokensResponse> ListTokens(const v1::ListTokensRequest& request);
  absl::StatusOr<v1::RevokeTokenResponse> RevokeToken(const v1::RevokeTokenRequest& request);

  // A slot for one watch stream of `who`, given back when the slot is destroyed;
  // RESOURCE_EXHAUSTED when the identity holds max_watch_streams_per_identity already.
  class WatchSlot {
   public:
    WatchSlot(WatchSlot&& other) noexcept : owner_(other.owner_), name_(std::move(other.name_)) {
      other.owner_ = nullptr;
    }
    WatchSlot(const WatchSlot&) = delete;
    ~WatchSlot();

   private:
    friend class AccessControl;
    WatchSlot(AccessControl* owner, std::string name) : owner_(owner), name_(std::move(name)) {}
    AccessControl* owner_;
    std::string name_;
  };
  absl::StatusOr<WatchSlot> AcquireWatchSlot(const Identity& who);

 private:
  struct Cached {
    Identity identity;
    std::optional<absl::Time> revoked_at;
    absl::Time fetched;
  };
  absl::StatusOr<Identity> Authenticate(absl::string_view secret);
  // Whether `hash` was found unknown less than negative_cache_ttl ago.
  bool KnownUnknown(const std::string& hash, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RememberUnknown(const std::string& hash, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  AccessTokens& tokens_;
  const Clock& clock_;
  const AccessControlOptions options_;
  absl::Mutex mu_;
  std::map<std::string, Cached> cache_ ABSL_GUARDED_BY(mu_);  // by secret hash
  // The negative cache: secret hash → when it was found unknown, and the same in that order
  // (oldest first), so the oldest entry goes when it is full.
  std::map<std::string, absl::Time> unknown_ ABSL_GUARDED_BY(mu_);
  std::deque<std::pair<std::string, absl::Time>> unknown_order_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int> watch_streams_ ABSL_GUARDED_BY(mu_);
};

}  // namespace parity::server
