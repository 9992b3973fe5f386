// The upkeep calls of PostgresRunStore under a leader's term (LeaderFence): each runs the plain
// call with the fence set for this thread, and pg::WithTransaction checks the term last in the
// same transaction (server/sql/leader_fence_holds.sql), rolling everything back when it is over.
#include "server/store/postgres/pg_support.h"
#include "server/store/postgres/postgres_run_store.h"

namespace parity::server {
namespace {

thread_local const LeaderFence* upkeep_fence = nullptr;

// Sets the fence for the transactions this thread runs until it goes out of scope.
class UpkeepFenceScope {
 public:
  explicit UpkeepFenceScope(const LeaderFence& fence) : previous_(upkeep_fence) {
    upkeep_fence = &fence;
  }
  ~UpkeepFenceScope() { upkeep_fence = previous_; }
  UpkeepFenceScope(const UpkeepFenceScope&) = delete;
  UpkeepFenceScope& operator=(const UpkeepFenceScope&) = delete;

 private:
  const LeaderFence* previous_;
};

}  // namespace

namespace pg {

const LeaderFence* CurrentUpkeepFence() { return upkeep_fence; }

absl::Status CheckUpkeepFence(pqxx::work& tx, const LeaderFence& fence) {
  const bool holds =
      tx.exec_prepared("leader_fence_holds", fence.name, fence.epoch)[0][0].as<bool>();
  return holds ? absl::OkStatus() : LeaderEpochError(fence);
}

}  // namespace pg

absl::StatusOr<ReapResult> PostgresRunStore::ReapExpiredLeasesFenced(int limit,
                                                                     const LeaderFence& fence) {
  UpkeepFenceScope scope(fence);
  return ReapExpiredLeases(limit);
}

absl::StatusOr<ServiceLiveness> PostgresRunStore::RecordReaperPassFenced(const ReaperPass& pass,
                                                                         const LeaderFence& fence) {
  UpkeepFenceScope scope(fence);
  return RecordReaperPass(pass);
}

absl::StatusOr<RetentionResult> PostgresRunStore::ApplyRetentionFenced(
    const RetentionPolicy& policy, const LeaderFence& fence) {
  UpkeepFenceScope scope(fence);
  return ApplyRetention(policy);
}

}  // namespace parity::server
