// GangQueue: the leases of gangs — runs with resources.ranks > 1, trained by several processes
// (ranks) at once — which the ordinary lease (RunQueue::LeaseNextRuns) never takes. A gang is
// placed whole or not at all, in one transaction, over the workers whose LeaseRun long poll is
// parked now (the pool): one slot (worker, rank, devices) per rank, and one epoch — the run's
// lease_epoch, bumped by the placement — that every rank writes under (CheckLeaseEpoch,
// store_errors.h). Rank 0's worker holds the run's ordinary lease (lease_owner, its heartbeat
// renews lease_expires_at); every other worker's slots lapse unless it heartbeats them
// (HeartbeatFollower). Rank 0 posts the rendezvous address; it is released to a rank only once
// every rank checked in under the current epoch. The placement rule is PlaceGang
// (gang_placement.h), which both stores call. docs/architecture.md "Gangs" has the whole design.
//
// Implementations: PostgresRunStore (postgres_gang_queue.cc) and MemoryRunStore
// (memory_gang_queue.cc), held to tests/scheduler/gang_contract_test.h. Every method is one
// transaction; errors as in run_store.h (a stale epoch: FAILED_PRECONDITION, LEASE_EPOCH).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "google/rpc/status.pb.h"
#include "parity/v1/run.pb.h"
#include "server/store/run_queue.h"

namespace parity::server {

// A parked LeaseRun call's worker: what it has free, and how long it stays a candidate.
struct GangOffer {
  std::string worker_id;
  ResourceOffer offer;
  // The LeaseRun attempt's id (LeaseRunRequest.request_id), recorded with the slots it is
  // answered with (AnswerGangAgain); empty = none.
  std::string request_id;
  absl::Duration lease_ttl;    // rank 0's lease and every slot's, from the placement
  absl::Duration waiting_for;  // a candidate until now + this (its next re-check and more)
  bool leaving = false;        // the call's last try: take its slots, else leave the pool
  absl::Duration rendezvous_timeout = absl::Minutes(5);
  // A pending gang eligible (not_before passed) for longer reserves the pool (see GangWait).
  absl::Duration reservation_after = absl::Minutes(2);
};

// One rank of a placed gang.
struct GangSlot {
  uint32_t rank = 0;
  std::string worker_id;
  std::vector<uint32_t> device_indices;
};

// What a worker gets of a placed gang: the run (LEASED, its lease rank 0's) and its own slots.
struct GangGrant {
  v1::Run run;
  int64_t lease_epoch = 0;
  uint32_t world_size = 0;
  std::vector<GangSlot> slots;  // this worker's, lowest rank first
  absl::Time rendezvous_deadline;
};

struct GangWait {
  std::optional<GangGrant> grant;  // the asking worker's slots, placed now or before
  // Other waiting workers given slots by a placement in this call (ids, each once): their calls
  // must be woken to collect them.
  std::vector<std::string> placed_workers;
  bool placed_others() const { return !placed_workers.empty(); }
  // A gang has waited past reservation_after, cannot be placed, could be on the live fleet, and
  // this worker could host one of its ranks: it is kept for the gang (no ordinary runs).
  bool reserved = false;
};

struct RendezvousCall {
  std::string run_id;
  int64_t lease_epoch = 0;
  std::string worker_id;
  uint32_t rank = 0;
  std::string address;  // PostRendezvous only
};

struct RendezvousState {
  bool released = false;
  std::string address;  // set once released
  uint32_t checked_in = 0;
  uint32_t world_size = 0;
  absl::Time deadline;
  absl::Time placed_at;       // when the gang was placed (the rendezvous time counts from it)
  bool released_now = false;  // this call released it
};

// A placed gang the upkeep must fail: its rendezvous deadline passed unreleased, or a follower's
// slot lapsed (no heartbeat for a TTL). What the retry decision needs of the run comes with it.
struct LapsedGang {
  enum class Why { kRendezvousTimeout, kSlotLapsed };
  std::string run_id;
  int64_t lease_epoch = 0;
  Why why = Why::kSlotLapsed;
  std::vector<uint32_t> ranks;  // the ranks that never checked in, or whose slots lapsed
  uint32_t attempt = 0;
  uint32_t max_attempts = 0;
  uint32_t preemptions = 0;
};

// A whole-gang restart (or end), decided by the scheduling logic and applied under the run's
// lock: epoch + 1 (every rank's writes under the old one are refused), slots freed, the run to
// retry.next_state. A live run at another attempt: ABORTED (decide again); a run that is no longer
// live (already failed by another rank): returned as it is.
struct GangFailure {
  std::string run_id;
  int64_t lease_epoch = 0;
  v1::FailureClass failure_class = v1::FAILURE_CLASS_INFRASTRUCTURE;
  google::rpc::Status failure_status;
  std::optional<v1::Checkpoint> checkpoint;
  RetryDecision retry;
  uint32_t decided_at_attempt = 0;
};

struct GangCounts {
  uint32_t waiting_gangs = 0;      // pending gangs (eligible now)
  uint32_t placed_gangs = 0;       // live gangs
  uint32_t waiting_workers = 0;    // workers in the pool
  uint32_t undelivered_slots = 0;  // slots of live gangs their workers have not yet collected
};

class GangQueue {
 public:
  virtual ~GangQueue() = default;

  // One transaction: records the worker in the pool (or, leaving, takes it out), then answers the
  // slots a placement gave it; else places the best pending gang (priority desc, then the
  // longest eligible, then run id) over the pool whole, or nothing. Past a starving gang (waited
  // past reservation_after) no other gang is tried. NOT_FOUND: unknown worker.
  virtual absl::StatusOr<GangWait> WaitForGang(const GangOffer& offer) = 0;
  // A retry (same worker, same request id, LeaseRunRequest.retry) of a LeaseRun call that was
  // answered with slots and whose answer was lost: the same grant again, under the same epoch,
  // with rank 0's lease and the worker's slots renewed to now + lease_ttl — while the gang is live
  // under that epoch, none of the worker's ranks has checked in (it started nothing) and the
  // rendezvous deadline has not passed. nullopt otherwise (the call goes on as a fresh one; the
  // gang's rendezvous timeout restarts it). An empty request id: nullopt.
  virtual absl::StatusOr<std::optional<GangGrant>> AnswerGangAgain(const std::string& worker_id,
                                                                   const std::string& request_id,
                                                                   absl::Duration lease_ttl) = 0;
  // Takes the worker out of the pool (its call ended without a last try: cancelled).
  virtual absl::Status LeaveGangPool(const std::string& worker_id) = 0;
  // Rank 0's worker posts the address (and checks rank 0 in). Fenced by the epoch; the worker
  // must hold rank 0 of the live gang (else FAILED_PRECONDITION, LEASE_EPOCH).
  virtual absl::StatusOr<RendezvousState> PostRendezvous(const RendezvousCall& call) = 0;
  // A rank's worker checks the rank in; the address comes back once every rank has and rank 0
  // posted. Fenced as PostRendezvous; the worker must hold that rank.
  virtual absl::StatusOr<RendezvousState> CheckInRendezvous(const RendezvousCall& call) = 0;
  // A worker that holds ranks other than rank 0's worker's renews its slots. Fenced; a run no
  // longer live under the epoch: FAILED_PRECONDITION (stop the ranks). cancel_requested: stop
  // them too (rank 0's heartbeat records the cancellation).
  virtual absl::StatusOr<HeartbeatResult> HeartbeatFollower(const HeartbeatUpdate& update) = 0;
  // Live gangs past their rendezvous deadline unreleased, or with a follower's slot lapsed.
  virtual absl::StatusOr<std::vector<LapsedGang>> ListLapsedGangs(int limit) = 0;
  virtual absl::StatusOr<v1::Run> FailGang(const GangFailure& failure) = 0;
  virtual absl::StatusOr<GangCounts> CountGangs() = 0;
};

}  // namespace parity::server
