#include "server/store/memory/memory_leader_leases.h"

#include <utility>

namespace parity::server {

MemoryLeaderLeases::MemoryLeaderLeases(std::function<absl::Time()> now) : now_(std::move(now)) {}

LeaderLease MemoryLeaderLeases::Render(const std::string& name, const Row& row,
                                       absl::Time now) const {
  LeaderLease lease;
  lease.name = name;
  lease.leader_id = row.expires > now ? row.leader_id : "";
  lease.epoch = row.epoch;
  lease.expires = row.expires;
  lease.remaining = std::max(row.expires - now, absl::ZeroDuration());
  return lease;
}

absl::StatusOr<LeaderLease> MemoryLeaderLeases::AcquireOrRenew(const std::string& name,
                                                               const std::string& leader_id,
                                                               absl::Duration ttl) {
  if (name.empty() || leader_id.empty() || ttl <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "leadership: a name, a leader id and a positive TTL are needed (--leader-ttl)");
  }
  absl::MutexLock lock(&mu_);
  const absl::Time now = now_();
  Row& row = rows_[name];
  const bool live = row.epoch > 0 && row.expires > now && !row.leader_id.empty();
  if (!live || row.leader_id == leader_id) {
    if (!live) ++row.epoch;  // a new term; a renewal keeps it
    row.leader_id = leader_id;
    row.expires = now + ttl;
  }
  LeaderLease lease = Render(name, row, now);
  lease.held = lease.leader_id == leader_id;
  return lease;
}

absl::StatusOr<bool> MemoryLeaderLeases::Resign(const std::string& name,
                                                const std::string& leader_id, int64_t epoch) {
  std::vector<std::function<void(const std::string&)>> listeners;
  {
    absl::MutexLock lock(&mu_);
    auto it = rows_.find(name);
    const absl::Time now = now_();
    if (it == rows_.end() || it->second.leader_id != leader_id || it->second.epoch != epoch ||
        it->second.expires <= now) {
      return false;
    }
    it->second.leader_id.clear();
    it->second.expires = now;
    listeners = listeners_;
  }
  for (const auto& listener : listeners) listener(name);
  return true;
}

absl::StatusOr<LeaderLease> MemoryLeaderLeases::Current(const std::string& name) {
  absl::MutexLock lock(&mu_);
  auto it = rows_.find(name);
  if (it == rows_.end()) {
    LeaderLease never;
    never.name = name;
    return never;
  }
  return Render(name, it->second, now_());
}

void MemoryLeaderLeases::OnResign(std::function<void(const std::string&)> listener) {
  absl::MutexLock lock(&mu_);
  listeners_.push_back(std::move(listener));
}

absl::Status MemoryLeaderLeases::WhileTermHolds(const LeaderFence& fence,
                                                absl::FunctionRef<absl::Status()> write) {
  absl::MutexLock lock(&mu_);
  auto it = rows_.find(fence.name);
  if (it == rows_.end() || it->second.epoch != fence.epoch || it->second.leader_id.empty() ||
      it->second.expires <= now_()) {
    return LeaderEpochError(fence);
  }
  return write();
}

}  // namespace parity::server
