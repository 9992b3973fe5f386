// MemoryLeaderLeases: LeaderLeases in memory, with an injected clock, for tests of the elector
// and of fenced upkeep without PostgreSQL. Answers as PostgresLeaderLeases does (the contract:
// tests/scheduler/leader_leases_contract_test.h). Resign calls the resign listeners, as
// PostgreSQL's NOTIFY parity_leadership wakes a PgListener. Thread-safe: one mutex.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "server/store/leader_leases.h"

namespace parity::server {

class MemoryLeaderLeases final : public LeaderLeases {
 public:
  // `now` is read for every decision; absl::Now by default.
  explicit MemoryLeaderLeases(std::function<absl::Time()> now = &absl::Now);

  absl::StatusOr<LeaderLease> AcquireOrRenew(const std::string& name, const std::string& leader_id,
                                             absl::Duration ttl) override;
  absl::StatusOr<bool> Resign(const std::string& name, const std::string& leader_id,
                              int64_t epoch) override;
  absl::StatusOr<LeaderLease> Current(const std::string& name) override;

  // Called (outside the lock) with the name after every successful Resign.
  void OnResign(std::function<void(const std::string&)> listener);
  // Runs `write` while `fence`'s term holds, holding the lock so that no takeover interleaves
  // (the memory store's fenced upkeep); LeaderEpochError without running it otherwise.
  absl::Status WhileTermHolds(const LeaderFence& fence, absl::FunctionRef<absl::Status()> write);

 private:
  struct Row {
    std::string leader_id;
    int64_t epoch = 0;
    absl::Time expires;
  };
  LeaderLease Render(const std::string& name, const Row& row, absl::Time now) const;

  const std::function<absl::Time()> now_;
  absl::Mutex mu_;
  std::map<std::string, Row> rows_ ABSL_GUARDED_BY(mu_);
  std::vector<std::function<void(const std::string&)>> listeners_ ABSL_GUARDED_BY(mu_);
};

}  // namespace parity::server
