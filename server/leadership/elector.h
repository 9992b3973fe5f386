// Elector: competes for one named leadership ("upkeep") through LeaderLeases and tells its
// observer when this replica gains or loses it. The anchor is River's elector
// (riverqueue/river internal/leadership): a lease row with an expiry and an epoch, renewed by
// its holder, resigned on shutdown, taken over once it expires.
//
//   - A candidate tries every ttl/3, or at once when Wake() says a leader resigned (the server
//     wires a PgListener on parity_leadership to it), or when the holder's lease runs out (the
//     store says how long it has left, by its own clock).
//   - The leader renews every ttl/3. Its deadline is judged by its own monotonic clock: the time
//     it *sent* the last successful renewal + ttl − margin. The store set the expiry from its own
//     now, which came after that send, so the leader's deadline falls before anyone else can take
//     over. Past its deadline fence() is empty at once (upkeep stops even while a renewal hangs)
//     and the loop reports the loss.
//   - Stop() resigns: the row expires now and the others are woken, so a rolling restart moves
//     the leadership within one round trip instead of one TTL.
//
// A takeover after a leader's death takes at most ttl (the lease running out) plus one
// candidate's wake-up; the epoch of the new term is higher, and the store refuses the old
// term's upkeep writes (LeaderFence).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/store/leader_leases.h"

namespace parity::server {

class LeadershipObserver {
 public:
  virtual ~LeadershipObserver() = default;
  // Called on the elector's thread, in order, never concurrently.
  virtual void OnLeadershipGained(const LeaderFence& fence) {}
  virtual void OnLeadershipLost(const LeaderFence& fence, absl::string_view why) {}
};

struct ElectorOptions {
  std::string name = "upkeep";
  std::string leader_id;  // unique per replica (host:pid by default, see DefaultReplicaId)
  absl::Duration ttl = absl::Seconds(10);
  // How much earlier than ttl after its last renewal the leader gives up when it could not renew
  // (clock rates differ a little; a renewal answer travels). Zero: ttl / 10.
  absl::Duration margin = absl::ZeroDuration();
};

// "hostname:pid": unique among the replicas of one database.
std::string DefaultReplicaId();

class Elector {
 public:
  // `leases` and `observer` (may be null) must outlive the elector.
  Elector(LeaderLeases& leases, ElectorOptions options, LeadershipObserver* observer = nullptr);
  // Stops (and resigns) if still running.
  ~Elector();
  Elector(const Elector&) = delete;
  Elector& operator=(const Elector&) = delete;

  // One attempt on the calling thread (so a lone replica leads before it serves), then the loop
  // on its own thread.
  void Start();
  // Ends the loop, then resigns if this elector leads. Idempotent.
  void Stop();
  // A candidate tries again now (a leader resigned).
  void Wake();

  // The current term while this elector leads and its own deadline has not passed.
  std::optional<LeaderFence> fence() const;
  bool is_leader() const { return fence().has_value(); }
  const ElectorOptions& options() const { return options_; }

 private:
  using SteadyTime = std::chrono::steady_clock::time_point;
  // What one attempt changed, reported to the observer after the lock is released.
  struct Change {
    std::optional<LeaderFence> lost;
    std::string why;
    std::optional<LeaderFence> gained;
  };
  bool Wakeable() const ABSL_SHARED_LOCKS_REQUIRED(mu_) { return stop_ || woken_; }
  // One AcquireOrRenew; returns how long to wait before the next attempt.
  absl::Duration Attempt();
  void Report(const Change& change);

  LeaderLeases& leases_;
  const ElectorOptions options_;
  LeadershipObserver* const observer_;
  mutable absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool woken_ ABSL_GUARDED_BY(mu_) = false;
  bool leading_ ABSL_GUARDED_BY(mu_) = false;
  int64_t epoch_ ABSL_GUARDED_BY(mu_) = 0;
  SteadyTime deadline_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
  bool started_ = false;
  bool stopped_ = false;
};

}  // namespace parity::server
