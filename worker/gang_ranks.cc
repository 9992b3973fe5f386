#include "worker/gang_ranks.h"

#include <signal.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace parity::worker {
namespace {

// A check-in or post about once a second (docs/api.md): often enough that the gang forms within
// a second of its last rank, rare enough for a scheduler serving many gangs.
constexpr absl::Duration kRendezvousPoll = absl::Seconds(1);

}  // namespace

bool LeaseRefused(const absl::Status& s) {
  return s.code() == absl::StatusCode::kFailedPrecondition ||
         s.code() == absl::StatusCode::kNotFound || s.code() == absl::StatusCode::kPermissionDenied;
}

GangRanks::GangRanks(SchedulerClient& client, parity::v1::GangLease gang, std::string run_id,
                     std::string worker_id, std::string lease_secret, SpawnRank spawn)
    : client_(client),
      gang_(std::move(gang)),
      run_id_(std::move(run_id)),
      worker_id_(std::move(worker_id)),
      lease_secret_(std::move(lease_secret)),
      spawn_(std::move(spawn)) {}

std::vector<uint32_t> GangRanks::DevicesOf(uint32_t rank) const {
  for (const parity::v1::GangRank& r : gang_.ranks()) {
    if (r.rank() == rank) return {r.device_indices().begin(), r.device_indices().end()};
  }
  return {};
}

void GangRanks::SetRendezvous(EngineRendezvous rendezvous) {
  absl::MutexLock lock(&mu_);
  if (!rendezvous_) rendezvous_ = std::move(rendezvous);
}

absl::Status GangRanks::Post() {
  EngineRendezvous r;
  {
    absl::MutexLock lock(&mu_);
    if (!rendezvous_) return absl::OkStatus();  // not listening yet (Poll does not ask then)
    r = *rendezvous_;
  }
  parity::v1::PostRendezvousRequest req;
  req.set_run_id(run_id_);
  req.set_lease_epoch(gang_.gang_epoch());
  req.set_worker_id(worker_id_);
  req.set_address(RendezvousRelay(r));
  req.set_lease_secret(lease_secret_);
  absl::StatusOr<parity::v1::RendezvousResponse> resp = client_.PostRendezvous(req);
  if (!resp.ok()) return resp.status();
  posted_ = true;
  spdlog::info("run {}: gang epoch {} rendezvous posted ({} of {} ranks checked in)", run_id_,
               gang_.gang_epoch(), resp->checked_in(), resp->world_size());
  return absl::OkStatus();
}

absl::StatusOr<std::optional<EngineRendezvous>> GangRanks::CheckInOnce() {
  std::optional<std::string> relayed;
  for (const parity::v1::GangRank& r : gang_.ranks()) {
    if (r.rank() == 0) continue;  // rank 0 checks in by posting
    parity::v1::CheckInRendezvousRequest req;
    req.set_run_id(run_id_);
    req.set_lease_epoch(gang_.gang_epoch());
    req.set_worker_id(worker_id_);
    req.set_rank(r.rank());
    req.set_lease_secret(lease_secret_);
    absl::StatusOr<parity::v1::RendezvousResponse> resp = client_.CheckInRendezvous(req);
    if (!resp.ok()) return resp.status();
    if (resp->released()) relayed = resp->address();
  }
  if (!relayed) return std::nullopt;
  absl::StatusOr<EngineRendezvous> parsed = ParseRendezvousRelay(*relayed);
  if (!parsed.ok()) return parsed.status();
  return std::optional<EngineRendezvous>(*std::move(parsed));
}

absl::Status GangRanks::StartOthers(const EngineRendezvous& rendezvous) {
  others_started_ = true;
  for (const parity::v1::GangRank& r : gang_.ranks()) {
    if (r.rank() == primary_rank()) continue;
    absl::StatusOr<std::unique_ptr<ChildProcess>> child = spawn_(r.rank(), rendezvous);
    if (!child.ok()) {
      Tick failed;
      failed.failed = ExitStatus{.kind = ExitStatus::Kind::kExited, .code = 127};
      failed.failed_rank = r.rank();
      failed.failed_message =
          absl::StrCat("the worker could not start the rank: ", child.status().message());
      start_failure_ = failed;
      return absl::Status(child.status().code(),
                          absl::StrCat("rank ", r.rank(), ": ", child.status().message()));
    }
    Started(r.rank(), *std::move(child));
  }
  return absl::OkStatus();
}

void GangRanks::Started(uint32_t rank, std::unique_ptr<ChildProcess> child) {
  spdlog::info("run {}: gang epoch {} rank {} started (pid {})", run_id_, gang_.gang_epoch(), rank,
               child->pid());
  others_.push_back(Other{.rank = rank, .child = std::move(child), .exit = std::nullopt});
}

GangRanks::Tick GangRanks::Poll(absl::Time now) {
  Tick tick;
  const bool others_waiting = !others_started_ && gang_.ranks_size() > 1;
  bool listening = false;  // rank 0's engine has printed its rendezvous line
  {
    absl::MutexLock lock(&mu_);
    listening = rendezvous_.has_value();
  }
  // Posted the moment rank 0 listens; check-ins about once a second after that.
  if (now >= next_call_ && hosts_rank0() && listening && (!posted_ || others_waiting)) {
    next_call_ = now + kRendezvousPoll;
    absl::Status s = posted_ ? absl::OkStatus() : Post();
    if (s.ok() && posted_ && others_waiting) {
      absl::StatusOr<std::optional<EngineRendezvous>> released = CheckInOnce();
      s = released.status();
      if (released.ok() && released->has_value()) (void)StartOthers(**released);
    }
    if (LeaseRefused(s)) {
      tick.lost = s;
      return tick;
    }
    if (!s.ok())
      spdlog::warn("run {}: rendezvous call failed ({}), retrying", run_id_, s.ToString());
  }
  if (start_failure_) {
    tick = *std::move(start_failure_);
    start_failure_.reset();
    return tick;
  }
  for (Other& o : others_) {
    if (o.exit || o.child == nullptr) continue;
    o.exit = o.child->TryWait();
    if (o.exit && !o.exit->success() && !tick.failed) {
      spdlog::warn("run {}: gang rank {} {}", run_id_, o.rank, o.exit->ToString());
      tick.failed = o.exit;
      tick.failed_rank = o.rank;
    }
  }
  return tick;
}

void GangRanks::SignalOthers(int signal) {
  for (Other& o : others_) {
    if (o.child != nullptr && !o.exit) (void)o.child->SignalGroup(signal);
  }
}

void GangRanks::KillOthers() {
  SignalOthers(SIGKILL);
  for (Other& o : others_) {
    if (o.child != nullptr && !o.exit) o.exit = o.child->WaitFor(absl::Seconds(10));
  }
}

void GangRanks::ReapOthers(absl::Duration grace) {
  const absl::Time deadline = absl::Now() + grace;
  for (Other& o : others_) {
    if (o.child == nullptr || o.exit) continue;
    o.exit = o.child->WaitFor(std::max(absl::ZeroDuration(), deadline - absl::Now()));
  }
  KillOthers();
}

}  // namespace parity::worker
