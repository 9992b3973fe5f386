// LeaseSecrets: the proof that a write about a run comes from the holder of its current lease.
// A lease secret is an HMAC-SHA-256 of the run, the lease epoch and the holder's name under a key
// every scheduler replica shares: LeaseRun hands it out with the lease, and Heartbeat,
// ReportMetrics and CompleteRun must carry it (LeasesService). Nothing is stored per lease; the
// key is stored once, through the one store call this unit makes
// (AccessTokens::GetOrCreateServerKey), and then held. Thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/scheduling/caller.h"
#include "server/store/access_tokens.h"

namespace parity::server {

class LeaseSecrets {
 public:
  // The key stored under `name`, storing `candidate` first when there is none: the signature of
  // AccessTokens::GetOrCreateServerKey.
  using KeyStore = std::function<absl::StatusOr<std::string>(const std::string& name,
                                                             const std::string& candidate)>;
  explicit LeaseSecrets(KeyStore key_store) : key_store_(std::move(key_store)) {}
  // Over `tokens`' GetOrCreateServerKey, which must outlive this object.
  explicit LeaseSecrets(AccessTokens& tokens);

  // The key lease secrets are signed with: loaded from (or first stored in) the store once.
  absl::StatusOr<std::string> LeaseKey();
  // The secret of lease `epoch` of `run_id` held by `holder`, signed with `key`.
  std::string LeaseSecret(const std::string& key, const std::string& run_id, int64_t epoch,
                          const std::string& holder) const;
  // PERMISSION_DENIED unless `secret` is that of lease `epoch` of `run_id` held by `caller`.
  absl::Status CheckLeaseSecret(const std::string& run_id, int64_t epoch, const std::string& secret,
                                const Caller& caller);
  // A gang's workers other than rank 0's get a follower secret: the same HMAC over the holder's
  // name marked as a follower's. Calls any rank may make (heartbeats, rendezvous check-ins,
  // failures) accept it; those only rank 0 may make (metrics, the rendezvous post, a success)
  // check CheckLeaseSecret, which refuses it: a gang's curve and result are stored once.
  std::string FollowerSecret(const std::string& key, const std::string& run_id, int64_t epoch,
                             const std::string& holder) const;
  // Either secret: false for the lease holder's, true for a follower's; else PERMISSION_DENIED.
  absl::StatusOr<bool> CheckGangSecret(const std::string& run_id, int64_t epoch,
                                       const std::string& secret, const Caller& caller);

 private:
  const KeyStore key_store_;
  absl::Mutex key_mu_;
  std::string key_ ABSL_GUARDED_BY(key_mu_);  // empty until loaded
};

}  // namespace parity::server
