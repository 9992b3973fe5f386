// RunSupervisor's engine invocation (a run's, or one rank's of a gang) and its share of a gang
// (issue #27): a follower's wait for the rendezvous and the supervisor loop's pass over the local
// ranks (worker/README.md, "A gang, followed through the room").
#include <signal.h>

#include <algorithm>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "spdlog/spdlog.h"
#include "worker/run_supervisor.h"

namespace parity::worker {

absl::StatusOr<std::unique_ptr<ChildProcess>> RunSupervisor::StartEngine(
    const std::string& spec_path, const std::string& resume_from, uint32_t rank,
    const EngineRendezvous& rendezvous) {
  EngineInvocation invocation{.binary = options_.train_binary,
                              .run_json_path = spec_path,
                              .checkpoint_dir = checkpoint_dir_,
                              .metrics_fd = options_.metrics_fd,
                              .threads = grant_.threads,
                              .resume_from = resume_from,
                              .max_corpus_bytes = options_.dataset_limits.max_bytes};
  std::vector<uint32_t> gpus = grant_.gpu_indices;
  if (gang_ != nullptr) GangInvocation(rank, rendezvous, invocation, gpus);
  SpawnOptions spawn;
  spawn.argv = EngineArgv(invocation);
  spawn.env = {{"PARITY_RUN_ID", run_.run_id()},
               {"PARITY_ATTEMPT", absl::StrCat(run_.attempt())},
               {"OMP_NUM_THREADS", absl::StrCat(invocation.threads)},
               {"OPENBLAS_NUM_THREADS", absl::StrCat(invocation.threads)},
               {"CUDA_VISIBLE_DEVICES", absl::StrJoin(gpus, ",")}};
  // A rank > 0 gets the gang's token in its environment: argv is world-readable in /proc.
  if (gang_ != nullptr && rank > 0) spawn.env.emplace_back(kRendezvousTokenEnv, rendezvous.token);
  spawn.env.insert(spawn.env.end(), options_.engine_env.begin(), options_.engine_env.end());
  // The engine trains a researcher's spec: it gets none of the worker's credentials.
  spawn.remove_env = {kEngineWithheldEnv.begin(), kEngineWithheldEnv.end()};
  spawn.working_dir = work_dir_;
  spawn.log_path =
      gang_ != nullptr && rank != gang_->primary_rank() ? RankLog(rank) : work_dir_ + "/engine.log";
  spawn.output_fd = options_.metrics_fd;
  spdlog::info("run {}: starting {}{}", run_.run_id(), absl::StrJoin(spawn.argv, " "),
               resume_from.empty() ? "" : " (resuming)");
  return ChildProcess::Spawn(spawn);
}

std::string RunSupervisor::RankLog(uint32_t rank) const {
  return absl::StrCat(work_dir_, "/engine-rank-", rank, ".log");
}

void RunSupervisor::GangInvocation(uint32_t rank, const EngineRendezvous& rendezvous,
                                   EngineInvocation& invocation,
                                   std::vector<uint32_t>& gpus) const {
  const parity::v1::GangLease& gang = gang_->lease();
  invocation.rank = rank;
  invocation.world_size = gang.world_size();
  invocation.gang_epoch = gang.gang_epoch();
  if (rank == 0) {
    invocation.rendezvous_listen = options_.rendezvous_host;
  } else {
    invocation.rendezvous_address = rendezvous.address;
    invocation.resume_from.clear();  // rank 0 reads the checkpoint and broadcasts it
  }
  // The grant holds every local rank's threads; each rank takes its share.
  const uint32_t local = std::max(1, gang.ranks_size());
  invocation.threads = std::max<uint32_t>(1, grant_.threads / local);
  if (!gpus.empty()) gpus = gang_->DevicesOf(rank);
  if (rank != gang_->primary_rank()) {
    // Ranks > 0 create --out and never write it: keep it out of the checkpoint store, where a
    // scan for the run's checkpoints would meet it.
    invocation.checkpoint_dir = absl::StrCat(work_dir_, "/rank-", rank);
  }
}

std::optional<EngineRendezvous> RunSupervisor::AwaitRelease(ChildEnd& end) {
  absl::Time next_heartbeat = absl::Now();  // at once: the slot is held from the grant on
  absl::Time next_check_in = absl::Now();
  for (;;) {
    const absl::Time now = absl::Now();
    if (PreemptRequested()) {
      end.preempted = true;
      return std::nullopt;
    }
    if (now >= next_heartbeat) {
      bool cancel = false;
      absl::Status s = SendHeartbeat(&cancel);
      if (s.ok()) {
        heartbeat_backoff_.Reset();
        next_heartbeat = now + options_.heartbeat_interval;
        if (cancel) {
          end.cancelled = true;
          return std::nullopt;
        }
      } else if (LeaseRefused(s)) {
        spdlog::warn("run {}: gang slot refused before the rendezvous ({})", run_.run_id(),
                     s.ToString());
        end.lease_lost = true;
        return std::nullopt;
      } else {
        next_heartbeat =
            now + std::min(heartbeat_backoff_.NextDelay(), options_.heartbeat_interval);
      }
    }
    if (now >= next_check_in) {
      next_check_in = now + absl::Seconds(1);
      absl::StatusOr<std::optional<EngineRendezvous>> released = gang_->CheckInOnce();
      if (released.ok() && released->has_value()) {
        spdlog::info("run {}: gang epoch {} released; starting rank(s) from {}", run_.run_id(),
                     gang_->lease().gang_epoch(), gang_->primary_rank());
        return **released;
      }
      if (!released.ok() && LeaseRefused(released.status())) {
        spdlog::warn("run {}: rendezvous refused ({}); the gang was failed", run_.run_id(),
                     released.status().ToString());
        end.lease_lost = true;
        return std::nullopt;
      }
      if (!released.ok() && released.status().code() == absl::StatusCode::kInvalidArgument) {
        end.not_started = StartFailure{.failure_class = parity::v1::FAILURE_CLASS_INFRASTRUCTURE,
                                       .message = std::string(released.status().message())};
        return std::nullopt;
      }
      if (!released.ok()) {
        spdlog::warn("run {}: check-in failed ({}), retrying", run_.run_id(),
                     released.status().ToString());
      }
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
}

bool RunSupervisor::AwaitReleaseIfFollower(std::optional<EngineRendezvous>& released) {
  if (gang_ == nullptr || gang_->hosts_rank0()) return true;
  ChildEnd end;
  released = AwaitRelease(end);
  if (released) return true;
  const ExitStatus never{.kind = ExitStatus::Kind::kExited, .code = 127};
  const RunOutcome outcome = end.lease_lost  ? RunOutcome::kLeaseLost
                             : end.cancelled ? RunOutcome::kCancelled
                                             : Finish(never, end);
  spdlog::info("run {}: {}", run_.run_id(), RunOutcomeName(outcome));
  SetOutcome(outcome);
  return false;
}

bool RunSupervisor::FollowerSucceeded(const ChildEnd& end) const {
  return gang_ != nullptr && !gang_->hosts_rank0() && end.exit.success() && !end.failed_rank &&
         !end.preempted && !end.hung && !end.not_started;
}

void RunSupervisor::PollGang(ChildProcess& child, ChildEnd& end, absl::Time now) {
  GangRanks::Tick tick = gang_->Poll(now);
  if (!tick.lost.ok()) {
    // The scheduler failed the gang (another rank died, its epoch moved): every local rank
    // stops at once, whatever it was doing.
    spdlog::warn("run {}: gang refused ({}); killing every local rank", run_.run_id(),
                 tick.lost.ToString());
    (void)child.SignalGroup(SIGKILL);
    gang_->KillOthers();
    end.killed_by_us = true;
    end.lease_lost = true;
    return;
  }
  if (tick.failed && !end.failed_rank) {
    spdlog::warn("run {}: gang rank {} failed ({}); stopping every local rank", run_.run_id(),
                 tick.failed_rank, tick.failed->ToString());
    end.failed_rank = tick.failed_rank;
    end.exit = *tick.failed;
    end.failed_detail = tick.failed_message;
    (void)child.SignalGroup(SIGKILL);
    gang_->KillOthers();
  }
}

}  // namespace parity::worker
