// MemoryRunStore's upkeep under a leader's term: the plain call, run while the term holds in
// the MemoryLeaderLeases given to SetLeaderLeases (its lock held, so no takeover interleaves).
#include "server/store/memory/memory_run_store.h"

namespace parity::server {
namespace {

// `call` under `fence`, or LeaderEpochError (also when no leases were given).
template <typename T, typename Call>
absl::StatusOr<T> Fenced(MemoryLeaderLeases* leases, const LeaderFence& fence, Call call) {
  if (leases == nullptr) return LeaderEpochError(fence);
  absl::StatusOr<T> result = absl::InternalError("not run");
  const absl::Status status = leases->WhileTermHolds(fence, [&] {
    result = call();
    return result.status();
  });
  if (!status.ok()) return status;
  return result;
}

}  // namespace

absl::StatusOr<ReapResult> MemoryRunStore::ReapExpiredLeasesFenced(int limit,
                                                                   const LeaderFence& fence) {
  return Fenced<ReapResult>(leader_leases_.load(), fence, [&] { return ReapExpiredLeases(limit); });
}

absl::StatusOr<ServiceLiveness> MemoryRunStore::RecordReaperPassFenced(const ReaperPass& pass,
                                                                       const LeaderFence& fence) {
  return Fenced<ServiceLiveness>(leader_leases_.load(), fence,
                                 [&] { return RecordReaperPass(pass); });
}

absl::StatusOr<RetentionResult> MemoryRunStore::ApplyRetentionFenced(const RetentionPolicy& policy,
                                                                     const LeaderFence& fence) {
  return Fenced<RetentionResult>(leader_leases_.load(), fence,
                                 [&] { return ApplyRetention(policy); });
}

}  // namespace parity::server
