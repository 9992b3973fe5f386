#include "server/api/access_control.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/field_violation.h"
#include "core/proto_time.h"
#include "core/status_macros.h"
#include "server/scheduling/request_validation.h"
#include "server/scheduling/secrets.h"
#include "spdlog/spdlog.h"

namespace parity::server {
namespace {

using P = Permission;

// Every gRPC method and HTTP route, and what it needs. Reads need a reading role, every write
// a role that may make it; nothing is public but liveness, the login page and static files.
constexpr std::pair<absl::string_view, Permission> kRules[] = {
    {"parity.v1.SweepService/PlanSweep", P::kSubmit},
    {"parity.v1.SweepService/SubmitSweep", P::kSubmit},
    {"parity.v1.SweepService/CancelSweep", P::kSubmit},
    {"parity.v1.SweepService/DeleteSweep", P::kSubmit},
    {"parity.v1.SweepService/GetSweep", P::kRead},
    {"parity.v1.SweepService/ListSweeps", P::kRead},
    {"parity.v1.SweepService/ListRuns", P::kRead},
    {"parity.v1.SweepService/GetRun", P::kRead},
    {"parity.v1.SweepService/WatchSweep", P::kRead},
    {"parity.v1.SweepService/WatchRun", P::kRead},
    {"parity.v1.SweepService/QueryResults", P::kRead},
    {"parity.v1.SweepService/AnalyzeSweep", P::kRead},
    {"parity.v1.SweepService/ListWorkers", P::kRead},
    {"parity.v1.WorkerService/RegisterWorker", P::kWorker},
    {"parity.v1.WorkerService/LeaseRun", P::kWorker},
    {"parity.v1.WorkerService/Heartbeat", P::kWorker},
    {"parity.v1.WorkerService/ReportMetrics", P::kWorker},
    {"parity.v1.WorkerService/CompleteRun", P::kWorker},
    {"parity.v1.WorkerService/CheckpointRetention", P::kWorker},
    {"parity.v1.WorkerService/PostRendezvous", P::kWorker},
    {"parity.v1.WorkerService/CheckInRendezvous", P::kWorker},
    {"parity.v1.TokenService/CreateToken", P::kAdmin},
    {"parity.v1.TokenService/ListTokens", P::kAdmin},
    {"parity.v1.TokenService/RevokeToken", P::kAdmin},
    // The web port (http_server.cc).
    {"GET /api/v1", P::kRead},
    {"GET /metrics", P::kRead},
    {"GET /pages", P::kRead},  // index.html for /, /sweeps/ID, /runs/ID
    {"GET /assets", P::kPublic},
    {"GET /healthz", P::kPublic},
    {"GET /login", P::kPublic},
    {"POST /login", P::kPublic},
    {"POST /logout", P::kPublic},
};

constexpr char kTokenPrefix[] = "parity_";
// No token this scheduler accepts is shorter: issued ones are kTokenPrefix + 43 characters, and
// Bootstrap refuses a shorter bootstrap secret.
constexpr size_t kMinTokenBytes = 32;

bool ValidName(absl::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  for (const char c : name) {
    if (!(absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '@' ||
          c == '-')) {
      return false;
    }
  }
  return true;
}

std::optional<TokenRole> RoleOf(v1::Role role) {
  switch (role) {
    case v1::ROLE_VIEWER:
      return TokenRole::kViewer;
    case v1::ROLE_RESEARCHER:
      return TokenRole::kResearcher;
    case v1::ROLE_WORKER:
      return TokenRole::kWorker;
    case v1::ROLE_ADMIN:
      return TokenRole::kAdmin;
    default:
      return std::nullopt;
  }
}

v1::Role ProtoRole(TokenRole role) {
  switch (role) {
    case TokenRole::kViewer:
      return v1::ROLE_VIEWER;
    case TokenRole::kResearcher:
      return v1::ROLE_RESEARCHER;
    case TokenRole::kWorker:
      return v1::ROLE_WORKER;
    case TokenRole::kAdmin:
      return v1::ROLE_ADMIN;
  }
  return v1::ROLE_UNSPECIFIED;
}

v1::AccessToken ProtoToken(const StoredAccessToken& token) {
  v1::AccessToken out;
  out.set_token_id(token.token_id);
  out.set_name(token.name);
  out.set_role(ProtoRole(token.role));
  *out.mutable_create_time() = ToProtoTime(token.created_at);
  if (token.expires_at) *out.mutable_expire_time() = ToProtoTime(*token.expires_at);
  if (token.revoked_at) *out.mutable_revoke_time() = ToProtoTime(*token.revoked_at);
  out.set_created_by(token.created_by);
  return out;
}

}  // namespace

std::optional<Permission> RequiredPermission(absl::string_view method) {
  for (const auto& [name, permission] : kRules) {
    if (name == method) return permission;
  }
  return std::nullopt;
}

bool RoleGrants(TokenRole role, Permission permission) {
  switch (permission) {
    case P::kPublic:
      return true;
    case P::kRead:
      return role != TokenRole::kWorker;
    case P::kSubmit:
      return role == TokenRole::kResearcher || role == TokenRole::kAdmin;
    case P::kWorker:
      return role == TokenRole::kWorker || role == TokenRole::kAdmin;
    case P::kAdmin:
      return role == TokenRole::kAdmin;
  }
  return false;
}

AccessControl::AccessControl(AccessTokens& tokens, const Clock& clock, AccessControlOptions options)
    : tokens_(tokens), clock_(clock), options_(options) {}

absl::string_view AccessControl::BearerToken(absl::string_view header) {
  if (header.size() > 7 && absl::StartsWithIgnoreCase(header, "Bearer ")) {
    return absl::StripAsciiWhitespace(header.substr(7));
  }
  return {};
}

absl::Status AccessControl::Bootstrap(const std::string& secret) {
  if (secret.size() < 32) {
    return absl::InvalidArgumentError(
        "the bootstrap admin token must be at least 32 characters (make one with "
        "`openssl rand -base64 32`, or let the scheduler create the file)");
  }
  PARITY_ASSIGN_OR_RETURN(const std::optional<StoredAccessToken> found,
                          tokens_.FindToken(Sha256(secret)));
  if (found.has_value()) {
    if (found->revoked_at.has_value()) {
      spdlog::warn("event=bootstrap_token_revoked token_id={}: it stays revoked", found->token_id);
    }
    return absl::OkStatus();
  }
  NewAccessToken token{"admin", TokenRole::kAdmin, Sha256(secret), "bootstrap", std::nullopt};
  absl::StatusOr<StoredAccessToken> stored = tokens_.CreateToken(token);
  {
    absl::MutexLock lock(&mu_);
    unknown_.erase(token.secret_sha256);  // presented before it existed: it works now
  }
  // ALREADY_EXISTS: another replica, starting at the same time, stored the same token first.
  if (absl::IsAlreadyExists(stored.status())) return absl::OkStatus();
  if (!stored.ok()) return stored.status();
  spdlog::info("event=bootstrap_token_stored token_id={} name=admin role=admin", stored->token_id);
  return absl::OkStatus();
}

absl::StatusOr<Identity> AccessControl::Authenticate(absl::string_view secret) {
  if (secret.empty()) {
    return absl::UnauthenticatedError(
        "no bearer token: send `authorization: Bearer <token>` (the CLI and worker take "
        "--token, PARITY_TOKEN or PARITY_TOKEN_FILE)");
  }
  if (secret.size() > 256 || secret.size() < kMinTokenBytes) {
    return absl::UnauthenticatedError("the bearer token is not valid");
  }
  const std::string hash = Sha256(secret);
  const absl::Time now = clock_.Now();
  std::optional<Cached> cached;
  {
    absl::MutexLock lock(&mu_);
    auto it = cache_.find(hash);
    if (it != cache_.end() && now - it->second.fetched < options_.cache_ttl) cached = it->second;
    if (!cached.has_value() && KnownUnknown(hash, now)) {
      return absl::UnauthenticatedError("the bearer token is not valid");
    }
  }
  if (!cached.has_value()) {
    PARITY_ASSIGN_OR_RETURN(const std::optional<StoredAccessToken> found, tokens_.FindToken(hash));
    if (!found.has_value()) {
      absl::MutexLock lock(&mu_);
      RememberUnknown(hash, now);
      return absl::UnauthenticatedError("the bearer token is not valid");
    }
    cached = Cached{
        {found->token_id, found->name, found->role, found->expires_at}, found->revoked_at, now};
    absl::MutexLock lock(&mu_);
    if (cache_.size() >= 10000) cache_.clear();  // bounded: a burst of new tokens resets it
    cache_[hash] = *cached;
  }
  if (cached->revoked_at.has_value()) {
    return absl::UnauthenticatedError("the bearer token was revoked");
  }
  if (cached->identity.expires_at.has_value() && *cached->identity.expires_at <= now) {
    return absl::UnauthenticatedError("the bearer token has expired");
  }
  return cached->identity;
}

bool AccessControl::KnownUnknown(const std::string& hash, absl::Time now) {
  auto it = unknown_.find(hash);
  if (it == unknown_.end()) return false;
  if (now - it->second < options_.negative_cache_ttl) return true;
  unknown_.erase(it);  // its unknown_order_ entry goes when it reaches the front
  return false;
}

void AccessControl::RememberUnknown(const std::string& hash, absl::Time now) {
  if (options_.negative_cache_size == 0) return;
  while (unknown_order_.size() >= options_.negative_cache_size) {
    const auto& [oldest, at] = unknown_order_.front();
    // A hash remembered again later has a newer time: only its newest entry removes it.
    if (auto it = unknown_.find(oldest); it != unknown_.end() && it->second == at) {
      unknown_.erase(it);
    }
    unknown_order_.pop_front();
  }
  unknown_[hash] = now;
  unknown_order_.emplace_back(hash, now);
}

absl::StatusOr<Identity> AccessControl::Authorize(absl::string_view secret,
                                                  absl::string_view method) {
  const std::optional<Permission> permission = RequiredPermission(method);
  if (!permission.has_value()) {
    return absl::PermissionDeniedError(absl::StrCat(method, " has no access rule"));
  }
  if (*permission == P::kPublic) return Identity{};
  PARITY_ASSIGN_OR_RETURN(Identity identity, Authenticate(secret));
  if (!RoleGrants(identity.role, *permission)) {
    return absl::PermissionDeniedError(absl::StrCat(
        "'", identity.name, "' (role ", TokenRoleName(identity.role), ") may not call ", method));
  }
  return identity;
}

absl::StatusOr<v1::CreateTokenResponse> AccessControl::CreateToken(
    const v1::CreateTokenRequest& request, const Identity& by) {
  Violations violations;
  if (!ValidName(request.name())) {
    violations.Add("name", "1 to 64 characters of A-Z a-z 0-9 . _ @ -");
  }
  const std::optional<TokenRole> role = RoleOf(request.role());
  if (!role.has_value()) violations.Add("role", "viewer, researcher, worker or admin");
  std::optional<absl::Time> expires;
  if (request.has_lifetime()) {
    const absl::Duration lifetime = FromProtoDuration(request.lifetime());
    if (lifetime < absl::Seconds(1) || lifetime > absl::Hours(24 * 3653)) {
      violations.Add("lifetime", "between 1 s and 10 years");
    } else {
      expires = clock_.Now() + lifetime;
    }
  }
  PARITY_RETURN_IF_ERROR(violations.ToStatus("invalid CreateToken request"));
  const std::string secret = RandomSecret(kTokenPrefix);
  NewAccessToken token{request.name(), *role, Sha256(secret), by.name, expires};
  PARITY_ASSIGN_OR_RETURN(const StoredAccessToken stored, tokens_.CreateToken(token));
  {
    absl::MutexLock lock(&mu_);
    unknown_.erase(token.secret_sha256);  // a new secret is never there, but keep the rule whole
  }
  spdlog::info("event=token_created token_id={} name={} role={} by={}", stored.token_id,
               stored.name, TokenRoleName(stored.role), by.name);
  v1::CreateTokenResponse response;
  *response.mutable_token() = ProtoToken(stored);
  response.set_secret(secret);
  return response;
}

absl::StatusOr<v1::ListTokensResponse> AccessControl::ListTokens(
    const v1::ListTokensRequest& request) {
  Violations violations;
  const PageRequest page{violations.PageSize("page_size", request.page_size(), 100, 1000),
                         request.page_token()};
  PARITY_RETURN_IF_ERROR(violations.ToStatus("invalid ListTokens request"));
  PARITY_ASSIGN_OR_RETURN(const Page<StoredAccessToken> tokens,
                          tokens_.ListTokens(request.include_inactive(), page));
  v1::ListTokensResponse response;
  for (const StoredAccessToken& token : tokens.items) *response.add_tokens() = ProtoToken(token);
  response.set_next_page_token(tokens.next_page_token);
  return response;
}

absl::StatusOr<v1::RevokeTokenResponse> AccessControl::RevokeToken(
    const v1::RevokeTokenRequest& request) {
  Violations violations;
  if (request.token_id().empty() == request.name().empty()) {
    violations.Add("token_id", "give exactly one of token_id and name");
  } else if (!request.token_id().empty()) {
    violations.RequireUuid("token_id", request.token_id());
  } else if (!ValidName(request.name())) {
    violations.Add("name", "1 to 64 characters of A-Z a-z 0-9 . _ @ -");
  }
  PARITY_RETURN_IF_ERROR(violations.ToStatus("invalid RevokeToken request"));
  PARITY_ASSIGN_OR_RETURN(const uint32_t revoked,
                          tokens_.RevokeTokens({request.token_id(), request.name()}));
  if (revoked == 0) {
    return absl::NotFoundError(request.token_id().empty()
                                   ? absl::StrCat("no live token named '", request.name(), "'")
                                   : absl::StrCat("no live token ", request.token_id()));
  }
  {
    // Refused at once: every cached identity of what was revoked goes.
    absl::MutexLock lock(&mu_);
    for (auto it = cache_.begin(); it != cache_.end();) {
      const Identity& identity = it->second.identity;
      const bool match = request.token_id().empty() ? identity.name == request.name()
                                                    : identity.token_id == request.token_id();
      it = match ? cache_.erase(it) : std::next(it);
    }
  }
  spdlog::info("event=token_revoked token_id={} name={} revoked={}", request.token_id(),
               request.name(), revoked);
  v1::RevokeTokenResponse response;
  response.set_revoked(revoked);
  return response;
}

absl::StatusOr<AccessControl::WatchSlot> AccessControl::AcquireWatchSlot(const Identity& who) {
  absl::MutexLock lock(&mu_);
  int& held = watch_streams_[who.name];
  if (held >= options_.max_watch_streams_per_identity) {
    return absl::ResourceExhaustedError(absl::StrCat("'", who.name, "' holds ", held,
                                                     " watch streams, the most one identity may "
                                                     "hold at once; end one first"));
  }
  ++held;
  return WatchSlot(this, who.name);
}

AccessControl::WatchSlot::~WatchSlot() {
  if (owner_ == nullptr) return;
  absl::MutexLock lock(&owner_->mu_);
  if (--owner_->watch_streams_[name_] <= 0) owner_->watch_streams_.erase(name_);
}

}  // namespace parity::server
