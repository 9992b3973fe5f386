// This worker's share of a gang (LeaseRunResponse.gang, issue #27): its ranks, the rendezvous
// through the scheduler, and the engines of every local rank but the one RunSupervisor watches
// as "the" engine (the primary: rank 0 where this worker hosts it, else its lowest rank).
//
// The rendezvous, as the worker sees it (docs/api.md, "Gangs"):
//   - rank 0's worker starts rank 0 at once (`--rendezvous-listen HOST`); its reader thread hands
//     the engine's "rendezvous" line here (SetRendezvous) and the supervisor's next Tick posts
//     "HOST:PORT#TOKEN" with PostRendezvous (counts as rank 0's check-in);
//   - every other local rank is checked in with CheckInRendezvous about once a second until the
//     answer is `released`, and only then started with `--rendezvous HOST:PORT` and the token in
//     PARITY_RENDEZVOUS_TOKEN (a follower worker does this before its primary starts,
//     RunSupervisor::AwaitRelease; rank 0's worker from its Tick);
//   - a refusal (FAILED_PRECONDITION, NOT_FOUND, PERMISSION_DENIED: the gang was failed, its
//     epoch moved) comes back as `lost`; the caller SIGKILLs every local rank at once.
// The scheduler bounds the wait (GangLease.rendezvous_deadline: it fails the gang after it, and
// the next check-in is refused).
//
// Not thread-safe except SetRendezvous: the supervisor thread makes every other call (and so
// spawns every rank: PR_SET_PDEATHSIG follows the spawning thread).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "parity/v1/worker_service.pb.h"
#include "worker/child_process.h"
#include "worker/engine_protocol.h"
#include "worker/scheduler_client.h"

namespace parity::worker {

class GangRanks {
 public:
  // Starts the engine of `rank`; for ranks > 0 with rank 0's address and token.
  using SpawnRank = std::function<absl::StatusOr<std::unique_ptr<ChildProcess>>(
      uint32_t rank, const EngineRendezvous& rendezvous)>;

  GangRanks(SchedulerClient& client, parity::v1::GangLease gang, std::string run_id,
            std::string worker_id, std::string lease_secret, SpawnRank spawn);
  GangRanks(const GangRanks&) = delete;
  GangRanks& operator=(const GangRanks&) = delete;

  const parity::v1::GangLease& lease() const { return gang_; }
  bool hosts_rank0() const { return !gang_.ranks().empty() && gang_.ranks(0).rank() == 0; }
  // The rank RunSupervisor starts and reads: the lowest local one.
  uint32_t primary_rank() const { return gang_.ranks().empty() ? 0 : gang_.ranks(0).rank(); }
  // The device indices the scheduler gave `rank` (GPUs, or the CPU device).
  std::vector<uint32_t> DevicesOf(uint32_t rank) const;

  // Reader thread: rank 0's engine is listening.
  void SetRendezvous(EngineRendezvous rendezvous);

  // One check-in of every local rank but rank 0 (whose check-in is the post): the relayed
  // rendezvous once released, nullopt while not, or the scheduler's error (the caller tells a
  // refusal from an outage).
  absl::StatusOr<std::optional<EngineRendezvous>> CheckInOnce();

  // The supervisor loop's share, called every few milliseconds: posts rank 0's rendezvous, checks
  // the other local ranks in and starts them once released, reaps them.
  struct Tick {
    absl::Status lost;                 // a refusal: the gang was failed; stop every rank
    std::optional<ExitStatus> failed;  // a local rank (not the primary) failed with this
    uint32_t failed_rank = 0;
    std::string failed_message;  // why, when the worker could not start it
  };
  Tick Poll(absl::Time now);

  // Starts every local rank but the primary, now (a follower after its release). A rank that
  // cannot be started is also reported by the next Poll as failed.
  absl::Status StartOthers(const EngineRendezvous& rendezvous);

  // To every started local rank but the primary (their process groups).
  void SignalOthers(int signal);
  // SIGKILLs and reaps them (the primary is the caller's). Idempotent.
  void KillOthers();
  // Waits up to `grace` for the others to end by themselves (after the primary succeeded), then
  // kills what is left.
  void ReapOthers(absl::Duration grace);

 private:
  absl::Status Post();
  void Started(uint32_t rank, std::unique_ptr<ChildProcess> child);

  SchedulerClient& client_;
  const parity::v1::GangLease gang_;
  const std::string run_id_;
  const std::string worker_id_;
  const std::string lease_secret_;  // never logged
  const SpawnRank spawn_;
  bool posted_ = false;
  bool others_started_ = false;
  absl::Time next_call_ = absl::InfinitePast();
  struct Other {
    uint32_t rank = 0;
    std::unique_ptr<ChildProcess> child;
    std::optional<ExitStatus> exit;
  };
  std::vector<Other> others_;
  std::optional<Tick> start_failure_;  // a rank that could not be started, for the next Poll

  absl::Mutex mu_;
  std::optional<EngineRendezvous> rendezvous_ ABSL_GUARDED_BY(mu_);
};

// PERMISSION_DENIED, FAILED_PRECONDITION or NOT_FOUND: the scheduler will never take a write of
// this lease again (another epoch, another holder).
bool LeaseRefused(const absl::Status& status);

}  // namespace parity::worker
