// LeasesService's gangs (docs/architecture.md "Gangs"): a parked LeaseRun call joins the gang
// pool (GangQueue::WaitForGang) while gangs wait, is answered with its slots when a placement
// gives it some, or is kept for a starving gang; the rendezvous RPCs; whole-gang restarts from a
// rank's failure or the upkeep's lapse pass. A fresh LeaseRun's first try never comes here: the
// ordinary lease path is unchanged.
#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/proto_time.h"
#include "core/status_macros.h"
#include "server/scheduling/leases_service.h"
#include "server/scheduling/request_validation.h"
#include "spdlog/spdlog.h"

namespace parity::server {

bool LeasesService::GangsActive() {
  if (gangs_ == nullptr) return false;
  const absl::Time now = clock_.Now();
  const uint64_t generation = work_signal_.generation();
  {
    absl::MutexLock lock(&gang_counts_mu_);
    // Fresh after a wake-up (a submission may have brought a gang), at most every 50 ms; else
    // once an interval. The others use the last counts.
    const bool news =
        generation != gang_counts_generation_ && now >= gang_counts_read_ + absl::Milliseconds(50);
    if (!news && now < gang_counts_read_ + options_.idle_poll_interval) {
      return gang_counts_.waiting_gangs + gang_counts_.undelivered_slots > 0;
    }
    gang_counts_read_ = now;
    gang_counts_generation_ = generation;
  }
  absl::StatusOr<GangCounts> counts = gangs_->CountGangs();
  if (!counts.ok()) return false;  // the ordinary lease goes on; the next interval asks again
  if (observer_ != nullptr) observer_->OnGangCounts(*counts);
  absl::MutexLock lock(&gang_counts_mu_);
  gang_counts_ = *counts;
  return counts->waiting_gangs + counts->undelivered_slots > 0;
}

bool LeasesService::GangsWaitingAfterPlacement() {
  {
    absl::MutexLock lock(&gang_counts_mu_);
    gang_counts_read_ = absl::InfinitePast();  // the counts changed: the next reader reads them
  }
  if (!GangsActive()) return false;
  absl::MutexLock lock(&gang_counts_mu_);
  return gang_counts_.waiting_gangs > 0;
}

GangOffer LeasesService::GangOfferOf(const LeaseRequest& request, bool leaving) const {
  GangOffer offer;
  offer.worker_id = request.worker_id;
  offer.offer = request.offer;
  offer.request_id = request.request_id;
  offer.lease_ttl = options_.lease_ttl;
  // Past its next re-check, with room for a slow one: a worker whose call went away drops out.
  offer.waiting_for = 3 * options_.idle_poll_interval;
  offer.leaving = leaving;
  offer.rendezvous_timeout = options_.gang_rendezvous_timeout;
  offer.reservation_after = options_.gang_reservation_after;
  return offer;
}

bool LeasesService::TryGang(std::unique_ptr<PendingLease>& lease) {
  if (gangs_ == nullptr) return false;
  const uint64_t generation = work_signal_.generation();
  const absl::Time now = clock_.Now();
  const bool leaving = now >= lease->deadline || lease->cancelled();
  absl::StatusOr<GangWait> wait = gangs_->WaitForGang(GangOfferOf(lease->request, leaving));
  if (!wait.ok()) {  // the ordinary try goes on; the next one asks the pool again
    spdlog::warn("event=gang_wait_failed worker={} error=\"{}\"", lease->request.worker_id,
                 wait.status().ToString());
    return false;
  }
  // Their parked calls collect their slots now — only theirs while no other gang waits: a lone
  // placement is R workers' news, not every parked call's. With a backlog every pool worker
  // tries again, so that placements go on in parallel (a few pool tries chained one after the
  // other died out whenever concurrent tries skipped each other's locked rows).
  if (wait->placed_others()) long_polls_.WakeWorkers(wait->placed_workers);
  const bool placed_now =
      wait->placed_others() || (wait->grant && wait->grant->slots.front().rank == 0);
  if (placed_now && GangsWaitingAfterPlacement()) work_signal_.Notify();
  if (wait->grant) {
    AnswerGang(std::move(lease), *wait->grant);
    return true;
  }
  if (leaving) {
    lease->in_gang_pool = false;
    return false;
  }
  if (!wait->reserved) return false;
  // Kept for a starving gang: no ordinary run, back to waiting for the gang's placement.
  const absl::Time retry_at = std::min(lease->deadline, now + options_.idle_poll_interval);
  long_polls_.Park(std::move(lease), generation, retry_at);
  return true;
}

bool LeasesService::AnswerGangAgain(std::unique_ptr<PendingLease>& lease) {
  if (gangs_ == nullptr || !lease->request.retry || !lease->accepts_gangs) return false;
  absl::StatusOr<std::optional<GangGrant>> again = gangs_->AnswerGangAgain(
      lease->request.worker_id, lease->request.request_id, options_.lease_ttl);
  if (!again.ok()) {  // the retry goes on as an ordinary try; the gang's timeout is the backstop
    spdlog::warn("event=gang_answer_again_failed worker={} error=\"{}\"", lease->request.worker_id,
                 again.status().ToString());
    return false;
  }
  if (!again->has_value()) return false;
  spdlog::info("event=gang_answered_again run={} worker={} epoch={}", (*again)->run.run_id(),
               lease->request.worker_id, (*again)->lease_epoch);
  AnswerGang(std::move(lease), **again, /*again=*/true);
  return true;
}

void LeasesService::AnswerGang(std::unique_ptr<PendingLease> lease, const GangGrant& grant,
                               bool again) {
  const bool rank0 = grant.slots.front().rank == 0;
  if (observer_ != nullptr && rank0 && !again) {
    observer_->OnRunLeased(grant.run, clock_.Now() - lease->start);  // one lease per gang
  }
  v1::LeaseRunResponse response;
  absl::StatusOr<std::string> key = secrets_.LeaseKey();  // loaded by LeaseRun: no store call
  if (key.ok()) {
    const int64_t epoch = grant.lease_epoch;
    const std::string& run_id = grant.run.run_id();
    response.set_lease_secret(rank0 ? secrets_.LeaseSecret(*key, run_id, epoch, lease->holder)
                                    : secrets_.FollowerSecret(*key, run_id, epoch, lease->holder));
  }
  *response.mutable_lease() = grant.run.lease();
  *response.mutable_run() = grant.run;
  v1::GangLease* gang = response.mutable_gang();
  gang->set_world_size(grant.world_size);
  gang->set_gang_epoch(grant.lease_epoch);
  for (const GangSlot& slot : grant.slots) {
    v1::GangRank* rank = gang->add_ranks();
    rank->set_rank(slot.rank);
    for (uint32_t index : slot.device_indices) rank->add_device_indices(index);
  }
  *gang->mutable_rendezvous_deadline() = ToProtoTime(grant.rendezvous_deadline);
  lease->done(std::move(response));
}

void LeasesService::LeaveGangPool(const LeaseRequest& request) {
  absl::StatusOr<GangWait> left = gangs_->WaitForGang(GangOfferOf(request, /*leaving=*/true));
  if (!left.ok() || !left->grant) return;  // not collected: its row lapses within seconds
  // A placement raced this worker's ordinary lease: the gang goes back, nothing charged.
  const GangGrant& grant = *left->grant;
  Completion undo;
  undo.run_id = grant.run.run_id();
  undo.lease_epoch = grant.lease_epoch;
  undo.failure_class = v1::FAILURE_CLASS_INFRASTRUCTURE;
  undo.failure_status.set_code(static_cast<int>(absl::StatusCode::kAborted));
  undo.failure_status.set_message(absl::StrCat("gang placement raced an ordinary lease of worker ",
                                               request.worker_id, "; requeued, nothing charged"));
  undo.retry = {v1::RUN_STATE_PENDING, grant.run.attempt(), absl::ZeroDuration(),
                grant.run.preemptions()};
  undo.decided_at_attempt = grant.run.attempt();
  absl::StatusOr<CompletionResult> undone = FailGang(undo);
  if (!undone.ok()) {
    spdlog::warn("event=gang_undo_failed run={} error=\"{}\"", undo.run_id,
                 undone.status().ToString());
  }
}

absl::StatusOr<CompletionResult> LeasesService::FailGang(const Completion& decided) {
  GangFailure failure;
  failure.run_id = decided.run_id;
  failure.lease_epoch = decided.lease_epoch;
  failure.failure_class = decided.failure_class;
  failure.failure_status = decided.failure_status;
  failure.checkpoint = decided.checkpoint;
  failure.retry = decided.retry;
  failure.decided_at_attempt = decided.decided_at_attempt;
  PARITY_ASSIGN_OR_RETURN(v1::Run run, gangs_->FailGang(failure));
  CompletionResult result;
  if (run.state() == v1::RUN_STATE_PENDING) {
    result.retry_delay = decided.retry.delay;
    work_signal_.Notify();
  }
  if (observer_ != nullptr) {
    observer_->OnGangRestarted(
        run, decided.failure_status.code() == static_cast<int>(absl::StatusCode::kAborted)
                 ? "placement_raced"
                 : "rank_failed");
  }
  result.run = std::move(run);
  return result;
}

absl::StatusOr<int> LeasesService::FailLapsedGangs() {
  if (gangs_ == nullptr) return 0;
  PARITY_ASSIGN_OR_RETURN(const std::vector<LapsedGang> lapsed,
                          gangs_->ListLapsedGangs(options_.reap_batch));
  int failed = 0;
  for (const LapsedGang& gang : lapsed) {
    const bool timeout = gang.why == LapsedGang::Why::kRendezvousTimeout;
    // A rank that never checked in is a machine or network that failed the placement, not the
    // run: decided as a preemption is. A rank that stopped heartbeating is a lapse: an attempt.
    const AttemptCounts counts{gang.attempt, gang.max_attempts, gang.preemptions};
    GangFailure failure;
    failure.run_id = gang.run_id;
    failure.lease_epoch = gang.lease_epoch;
    failure.failure_class =
        timeout ? v1::FAILURE_CLASS_INFRASTRUCTURE : v1::FAILURE_CLASS_LEASE_EXPIRED;
    failure.failure_status.set_code(static_cast<int>(absl::StatusCode::kDeadlineExceeded));
    failure.failure_status.set_message(
        timeout ? absl::StrCat("gang rendezvous timed out: ranks ", absl::StrJoin(gang.ranks, ", "),
                               " never checked in")
                : absl::StrCat("gang ranks ", absl::StrJoin(gang.ranks, ", "),
                               " stopped heartbeating"));
    failure.retry = DecideRetry(
        options_.retry_policy,
        timeout ? v1::FAILURE_CLASS_PREEMPTED : v1::FAILURE_CLASS_INFRASTRUCTURE, counts);
    failure.decided_at_attempt = gang.attempt;
    absl::StatusOr<v1::Run> run = gangs_->FailGang(failure);
    if (!run.ok()) continue;  // another replica or rank got there first: stale, or re-decide next
    ++failed;
    if (observer_ != nullptr) {
      observer_->OnGangRestarted(*run, timeout ? "rendezvous_timeout" : "slot_lapsed");
    }
  }
  if (failed > 0) work_signal_.Notify();
  return failed;
}

absl::StatusOr<v1::RendezvousResponse> LeasesService::RendezvousAnswer(
    absl::StatusOr<RendezvousState> state) const {
  if (!state.ok()) return state.status();
  if (state->released_now && observer_ != nullptr) {
    observer_->OnGangRendezvous(std::max(absl::ZeroDuration(), clock_.Now() - state->placed_at));
  }
  v1::RendezvousResponse response;
  response.set_released(state->released);
  response.set_address(state->address);
  response.set_checked_in(state->checked_in);
  response.set_world_size(state->world_size);
  *response.mutable_deadline() = ToProtoTime(state->deadline);
  return response;
}

namespace {

constexpr size_t kMaxRendezvousAddressBytes = 1024;

void CheckRendezvousCall(Violations& violations, const std::string& run_id, int64_t epoch,
                         const std::string& worker_id) {
  violations.RequireUuid("run_id", run_id);
  violations.RequireUuid("worker_id", worker_id);
  if (epoch <= 0) violations.Add("lease_epoch", "must be positive");
}

}  // namespace

absl::StatusOr<v1::RendezvousResponse> LeasesService::PostRendezvous(
    const v1::PostRendezvousRequest& request, const Caller& caller) {
  Violations violations;
  CheckRendezvousCall(violations, request.run_id(), request.lease_epoch(), request.worker_id());
  if (request.address().empty()) violations.Add("address", "required: rank 0's address");
  if (request.address().size() > kMaxRendezvousAddressBytes) {
    violations.Add("address", absl::StrCat("longer than ", kMaxRendezvousAddressBytes, " bytes"));
  }
  PARITY_RETURN_IF_ERROR(violations.ToStatus("invalid PostRendezvous request"));
  if (gangs_ == nullptr) return absl::UnimplementedError("this scheduler places no gangs");
  PARITY_RETURN_IF_ERROR(CheckWorkerOwner(request.worker_id(), caller, "post a rendezvous"));
  // Rank 0's worker holds the lease secret; a follower's is refused here.
  PARITY_RETURN_IF_ERROR(secrets_.CheckLeaseSecret(request.run_id(), request.lease_epoch(),
                                                   request.lease_secret(), caller));
  return RendezvousAnswer(gangs_->PostRendezvous(
      {request.run_id(), request.lease_epoch(), request.worker_id(), 0, request.address()}));
}

absl::StatusOr<v1::RendezvousResponse> LeasesService::CheckInRendezvous(
    const v1::CheckInRendezvousRequest& request, const Caller& caller) {
  Violations violations;
  CheckRendezvousCall(violations, request.run_id(), request.lease_epoch(), request.worker_id());
  PARITY_RETURN_IF_ERROR(violations.ToStatus("invalid CheckInRendezvous request"));
  if (gangs_ == nullptr) return absl::UnimplementedError("this scheduler places no gangs");
  PARITY_RETURN_IF_ERROR(CheckWorkerOwner(request.worker_id(), caller, "check in"));
  PARITY_RETURN_IF_ERROR(
      secrets_
          .CheckGangSecret(request.run_id(), request.lease_epoch(), request.lease_secret(), caller)
          .status());
  return RendezvousAnswer(gangs_->CheckInRendezvous(
      {request.run_id(), request.lease_epoch(), request.worker_id(), request.rank(), ""}));
}

}  // namespace parity::server
