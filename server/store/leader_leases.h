// LeaderLeases: the store's side of electing one replica for upkeep (server/leadership/). One
// row per named leadership ("upkeep"): who holds it, its epoch and when it expires. Times are the
// store's clock (PostgreSQL's now()), so replicas' clocks may disagree; a holder learns how long
// it has left as a duration, never as a wall-clock time to compare with its own.
//
// The epoch rises by one whenever the leadership passes to a new term (another holder, or the
// same holder after its lease expired or it resigned); a renewal keeps it. Upkeep writes carry a
// LeaderFence (the name and the epoch of the term that decided them) and the store refuses them
// (FAILED_PRECONDITION, nothing written) once that term is over: a deposed leader that has not
// noticed yet cannot act on the queue.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "google/rpc/error_details.pb.h"

namespace parity::server {

// The term an upkeep write was decided under (RunQueue::ReapExpiredLeasesFenced,
// RecordReaperPassFenced and TelemetryRetention::ApplyRetentionFenced).
struct LeaderFence {
  std::string name;
  int64_t epoch = 0;
};

struct LeaderLease {
  std::string name;
  std::string leader_id;  // the holder; empty when nobody holds it (never, expired, resigned)
  int64_t epoch = 0;      // the current (or last) term; 0 = never held
  bool held = false;      // AcquireOrRenew: the caller holds it now
  absl::Time expires;     // in the store's clock, for display only
  absl::Duration remaining = absl::ZeroDuration();  // until it expires, judged by the store
};

// FAILED_PRECONDITION carrying a google.rpc.PreconditionFailure of type LEADER_EPOCH: an upkeep
// write under a term that is over. Every store gives this one; nothing was written.
inline absl::Status LeaderEpochError(const LeaderFence& fence) {
  const std::string description = absl::StrCat(
      "term ", fence.epoch, " of leadership '", fence.name,
      "' is over (another replica leads now, or this one could not renew in time); the upkeep "
      "write was refused and nothing changed");
  absl::Status status = absl::FailedPreconditionError(description);
  google::rpc::PreconditionFailure failure;
  auto* violation = failure.add_violations();
  violation->set_type("LEADER_EPOCH");
  violation->set_subject(absl::StrCat("leadership/", fence.name));
  violation->set_description(description);
  status.SetPayload("type.googleapis.com/google.rpc.PreconditionFailure",
                    absl::Cord(failure.SerializeAsString()));
  return status;
}

class LeaderLeases {
 public:
  virtual ~LeaderLeases() = default;

  // Takes `name` for `leader_id` when nobody holds it or its lease expired (a new term: epoch + 1),
  // or renews it when `leader_id` holds it and it has not expired (same epoch); either way it then
  // expires `ttl` after the store's now. When another holds it, nothing changes and the answer
  // says who, with held = false.
  virtual absl::StatusOr<LeaderLease> AcquireOrRenew(const std::string& name,
                                                     const std::string& leader_id,
                                                     absl::Duration ttl) = 0;
  // Ends `leader_id`'s term `epoch` of `name` now (the row keeps its epoch, so the next term is
  // higher) and tells the other candidates at once. false: it did not hold that term.
  virtual absl::StatusOr<bool> Resign(const std::string& name, const std::string& leader_id,
                                      int64_t epoch) = 0;
  // Who holds `name` now (leader_id empty when nobody: never held, expired or resigned).
  virtual absl::StatusOr<LeaderLease> Current(const std::string& name) = 0;
};

}  // namespace parity::server
