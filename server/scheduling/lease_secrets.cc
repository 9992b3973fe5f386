#include "server/scheduling/lease_secrets.h"

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "server/scheduling/secrets.h"

namespace parity::server {

LeaseSecrets::LeaseSecrets(AccessTokens& tokens)
    : LeaseSecrets([&tokens](const std::string& name, const std::string& candidate) {
        return tokens.GetOrCreateServerKey(name, candidate);
      }) {}

absl::StatusOr<std::string> LeaseSecrets::LeaseKey() {
  absl::MutexLock lock(&key_mu_);
  if (key_.empty()) {
    PARITY_ASSIGN_OR_RETURN(key_, key_store_("lease-secret-v1", RandomBytes(32)));
  }
  return key_;
}

std::string LeaseSecrets::LeaseSecret(const std::string& key, const std::string& run_id,
                                      int64_t epoch, const std::string& holder) const {
  return Base64Url(
      HmacSha256(key, absl::StrCat("parity lease\n", run_id, "\n", epoch, "\n", holder)));
}

absl::Status LeaseSecrets::CheckLeaseSecret(const std::string& run_id, int64_t epoch,
                                            const std::string& secret, const Caller& caller) {
  PARITY_ASSIGN_OR_RETURN(const std::string key, LeaseKey());
  if (ConstantTimeEquals(secret, LeaseSecret(key, run_id, epoch, caller.name))) {
    return absl::OkStatus();
  }
  return absl::PermissionDeniedError(
      absl::StrCat("lease_secret is not that of lease ", epoch, " of run ", run_id,
                   " held by this identity: only the lease's holder may write about the run"));
}

std::string LeaseSecrets::FollowerSecret(const std::string& key, const std::string& run_id,
                                         int64_t epoch, const std::string& holder) const {
  return LeaseSecret(key, run_id, epoch, absl::StrCat(holder, "\n(gang follower)"));
}

absl::StatusOr<bool> LeaseSecrets::CheckGangSecret(const std::string& run_id, int64_t epoch,
                                                   const std::string& secret,
                                                   const Caller& caller) {
  PARITY_ASSIGN_OR_RETURN(const std::string key, LeaseKey());
  if (ConstantTimeEquals(secret, LeaseSecret(key, run_id, epoch, caller.name))) return false;
  if (ConstantTimeEquals(secret, FollowerSecret(key, run_id, epoch, caller.name))) return true;
  return absl::PermissionDeniedError(
      absl::StrCat("lease_secret is not that of lease ", epoch, " of run ", run_id,
                   " held by this identity: only the lease's holders may write about the run"));
}

}  // namespace parity::server
