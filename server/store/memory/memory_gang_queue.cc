// MemoryRunStore's GangQueue half, as postgres_gang_queue.cc does it: the pool of waiting
// workers, whole-or-nothing placement by PlaceGang (gang_placement.h) with the reservation of a
// starving gang, the rendezvous, follower heartbeats, lapsed gangs and whole-gang restarts, every
// write fenced by the gang epoch (CheckLeaseEpoch).
#include <algorithm>
#include <tuple>

#include "absl/algorithm/container.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/proto_time.h"
#include "server/store/gang_placement.h"
#include "server/store/memory/memory_run_store.h"
#include "server/store/store_errors.h"

namespace parity::server {
namespace {

// The digests of the dataset copies a worker registered.
std::vector<std::string> Digests(const v1::Worker& worker) {
  std::vector<std::string> digests;
  for (const v1::DatasetHolding& d : worker.datasets()) digests.push_back(d.digest());
  return digests;
}

bool IsLive(v1::RunState state) {
  return state == v1::RUN_STATE_LEASED || state == v1::RUN_STATE_RUNNING;
}

constexpr int kGangsTried = 16;  // pending gangs one WaitForGang looks at, as the SQL's LIMIT

// The run of a gang row if it still exists (a deleted sweep's runs go; PostgreSQL cascades) and
// is live under the gang's epoch; null otherwise.
template <typename Runs>
const typename Runs::mapped_type* LiveRunOf(const Runs& runs, const std::string& run_id,
                                            int64_t epoch) {
  auto it = runs.find(run_id);
  if (it == runs.end() || !IsLive(it->second.run.state()) || it->second.lease_epoch != epoch) {
    return nullptr;
  }
  return &it->second;
}

}  // namespace

absl::StatusOr<GangWait> MemoryRunStore::WaitForGang(const GangOffer& offer) {
  absl::MutexLock lock(&mu_);
  auto worker = workers_.find(offer.worker_id);
  if (worker == workers_.end())
    return NotFoundError("worker", offer.worker_id, "is not registered");
  const absl::Time now = now_();
  if (offer.leaving) {
    gang_pool_.erase(offer.worker_id);
  } else {
    gang_pool_[offer.worker_id] = {offer.offer, now + offer.waiting_for};
  }
  GangWait wait;
  if ((wait.grant = DeliverSlots(offer.worker_id, offer.request_id))) {
    gang_pool_.erase(offer.worker_id);
    return wait;
  }
  if (offer.leaving) return wait;
  // Pending gangs: priority desc, then eligible longest (created or not_before, the later), id.
  using Key = std::tuple<int32_t, absl::Time, std::string>;
  std::vector<std::pair<Key, RunRow*>> pending;
  for (auto& [run_id, run] : runs_) {
    if (run.ranks <= 1 || run.run.state() != v1::RUN_STATE_PENDING || run.not_before > now ||
        sweeps_.at(run.run.sweep_id()).ended) {
      continue;
    }
    const absl::Time since = std::max(FromProtoTime(run.run.create_time()), run.not_before);
    pending.push_back({Key{-run.run.priority(), since, run_id}, &run});
  }
  std::sort(pending.begin(), pending.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  if (pending.size() > kGangsTried) pending.resize(kGangsTried);
  for (auto& [key, run] : pending) {
    if (PlaceOver(*run, offer)) {
      wait.grant = DeliverSlots(offer.worker_id, offer.request_id);
      for (const GangSlotRow& slot : gangs_.at(run->run.run_id()).slots) {
        if (slot.slot.worker_id != offer.worker_id &&
            !absl::c_linear_search(wait.placed_workers, slot.slot.worker_id)) {
          wait.placed_workers.push_back(slot.slot.worker_id);
        }
      }
      return wait;
    }
    if (now - std::get<1>(key) <= offer.reservation_after) continue;
    // Starving: no gang behind it is tried, and a worker it could use is kept for it, unless
    // the live fleet could never host it (then holding workers would only starve the rest).
    const GangAsk ask = AskOf(run->run.spec());
    std::vector<GangCandidate> fleet;
    for (const auto& [id, row] : workers_) {
      if (row.last_seen < now - absl::Minutes(1)) continue;
      fleet.push_back({id, OfferOfDevices(row.worker.devices()), Digests(row.worker)});
    }
    const GangCandidate me{offer.worker_id, offer.offer, Digests(worker->second.worker)};
    wait.reserved = !RankDevices(ask, me).empty() && PlaceGang(ask, fleet).has_value();
    return wait;
  }
  return wait;
}

bool MemoryRunStore::PlaceOver(RunRow& run, const GangOffer& offer) {
  const absl::Time now = now_();
  std::vector<GangCandidate> pool;
  for (const auto& [worker_id, waiter] : gang_pool_) {
    if (waiter.until <= now) continue;
    const auto worker = workers_.find(worker_id);
    pool.push_back(
        {worker_id, waiter.offer,
         worker == workers_.end() ? std::vector<std::string>{} : Digests(worker->second.worker)});
  }
  const std::optional<std::vector<GangSlot>> slots = PlaceGang(AskOf(run.run.spec()), pool);
  if (!slots) return false;
  run.run.set_state(v1::RUN_STATE_LEASED);
  ++run.lease_epoch;
  run.lease_owner = slots->front().worker_id;
  run.lease_request_id.clear();
  run.lease_expires = now + offer.lease_ttl;
  run.run.set_cancel_requested(false);
  run.devices = slots->front().device_indices;
  AddEvent(run, v1::RUN_STATE_PENDING, run.run.attempt(),
           absl::StrCat("leased as a gang of ", slots->size(), " ranks"), run.lease_owner);
  GangRow& gang = gangs_[run.run.run_id()];
  gang = GangRow();
  gang.lease_epoch = run.lease_epoch;
  gang.deadline = now + offer.rendezvous_timeout;
  gang.placed = now;
  for (const GangSlot& slot : *slots) {
    GangSlotRow row;
    row.slot = slot;
    row.expires = now + offer.lease_ttl;
    gang.slots.push_back(std::move(row));
    gang_pool_.erase(slot.worker_id);
  }
  return true;
}

std::optional<GangGrant> MemoryRunStore::DeliverSlots(const std::string& worker_id,
                                                      const std::string& request_id) {
  for (auto& [run_id, gang] : gangs_) {
    const RunRow* run = LiveRunOf(runs_, run_id, gang.lease_epoch);
    if (run == nullptr) continue;
    GangGrant grant;
    for (GangSlotRow& slot : gang.slots) {
      if (slot.slot.worker_id != worker_id || slot.delivered) continue;
      slot.delivered = true;
      slot.delivered_request_id = request_id;
      grant.slots.push_back(slot.slot);
    }
    if (grant.slots.empty()) continue;
    grant.run = RenderRun(*run);
    grant.lease_epoch = gang.lease_epoch;
    grant.world_size = static_cast<uint32_t>(gang.slots.size());
    grant.rendezvous_deadline = gang.deadline;
    return grant;
  }
  return std::nullopt;
}

absl::StatusOr<std::optional<GangGrant>> MemoryRunStore::AnswerGangAgain(
    const std::string& worker_id, const std::string& request_id, absl::Duration lease_ttl) {
  if (request_id.empty()) return std::nullopt;
  absl::MutexLock lock(&mu_);
  const absl::Time now = now_();
  for (auto& [run_id, gang] : gangs_) {
    if (LiveRunOf(runs_, run_id, gang.lease_epoch) == nullptr || gang.deadline <= now) continue;
    GangGrant grant;
    bool checked_in = false;
    for (const GangSlotRow& slot : gang.slots) {
      if (slot.slot.worker_id != worker_id) continue;
      checked_in = checked_in || slot.checked_in;
      if (slot.delivered && slot.delivered_request_id == request_id) {
        grant.slots.push_back(slot.slot);
      }
    }
    if (grant.slots.empty() || checked_in) continue;
    RunRow& run = runs_.at(run_id);
    for (GangSlotRow& slot : gang.slots) {
      if (slot.slot.worker_id == worker_id) slot.expires = std::max(slot.expires, now + lease_ttl);
    }
    if (run.lease_owner == worker_id) {
      run.lease_expires = std::max(run.lease_expires, now + lease_ttl);
    }
    grant.run = RenderRun(run);
    grant.lease_epoch = gang.lease_epoch;
    grant.world_size = static_cast<uint32_t>(gang.slots.size());
    grant.rendezvous_deadline = gang.deadline;
    return grant;
  }
  return std::nullopt;
}

absl::Status MemoryRunStore::LeaveGangPool(const std::string& worker_id) {
  absl::MutexLock lock(&mu_);
  gang_pool_.erase(worker_id);
  return absl::OkStatus();
}

absl::StatusOr<MemoryRunStore::GangRow*> MemoryRunStore::LiveGang(const std::string& run_id,
                                                                  int64_t epoch) {
  auto run = runs_.find(run_id);
  if (run == runs_.end()) return NotFoundError("run", run_id);
  if (absl::Status fenced = CheckLeaseEpoch(run_id, epoch, run->second.lease_epoch); !fenced.ok()) {
    return fenced;
  }
  auto gang = gangs_.find(run_id);
  if (!IsLive(run->second.run.state()) || gang == gangs_.end() ||
      gang->second.lease_epoch != epoch) {
    return LeaseEpochError(run_id, "the gang is no longer placed under this epoch");
  }
  return &gang->second;
}

namespace {

RendezvousState StateOf(const auto& gang) {
  RendezvousState state;
  state.world_size = static_cast<uint32_t>(gang.slots.size());
  for (const auto& slot : gang.slots) state.checked_in += slot.checked_in;
  state.released = gang.released;
  if (gang.released) state.address = gang.address;
  state.deadline = gang.deadline;
  state.placed_at = gang.placed;
  return state;
}

}  // namespace

absl::StatusOr<RendezvousState> MemoryRunStore::PostRendezvous(const RendezvousCall& call) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<GangRow*> gang = LiveGang(call.run_id, call.lease_epoch);
  if (!gang.ok()) return gang.status();
  GangSlotRow& rank0 = (*gang)->slots.front();
  if (rank0.slot.worker_id != call.worker_id) {
    return LeaseEpochError(call.run_id, "this worker does not hold rank 0 of the gang");
  }
  if ((*gang)->released && (*gang)->address != call.address) {
    return absl::FailedPreconditionError(
        absl::StrCat("run ", call.run_id,
                     ": the rendezvous was released with another address; a new "
                     "address needs a new gang epoch (fail the gang and let it restart)"));
  }
  (*gang)->address = call.address;
  if (!rank0.checked_in) rank0.checked_in_at = now_();
  rank0.checked_in = true;
  const RendezvousState state = StateOf(**gang);
  const bool was = (*gang)->released;
  (*gang)->released = was || state.checked_in == state.world_size;
  if (!was && (*gang)->released) (*gang)->released_at = now_();
  RendezvousState after = StateOf(**gang);
  after.released_now = !was && after.released;
  return after;
}

absl::StatusOr<RendezvousState> MemoryRunStore::CheckInRendezvous(const RendezvousCall& call) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<GangRow*> gang = LiveGang(call.run_id, call.lease_epoch);
  if (!gang.ok()) return gang.status();
  if (call.rank >= (*gang)->slots.size() ||
      (*gang)->slots[call.rank].slot.worker_id != call.worker_id) {
    return LeaseEpochError(call.run_id, absl::StrCat("this worker does not hold rank ", call.rank));
  }
  // Rank 0 checks in by posting its address (PostRendezvous); it may ask here for the state.
  if (GangSlotRow& slot = (*gang)->slots[call.rank]; call.rank != 0 && !slot.checked_in) {
    slot.checked_in = true;
    slot.checked_in_at = now_();  // the first check-in counts
  }
  const RendezvousState state = StateOf(**gang);
  const bool was = (*gang)->released;
  (*gang)->released = was || (!(*gang)->address.empty() && state.checked_in == state.world_size);
  if (!was && (*gang)->released) (*gang)->released_at = now_();
  RendezvousState after = StateOf(**gang);
  after.released_now = !was && after.released;
  return after;
}

absl::StatusOr<HeartbeatResult> MemoryRunStore::HeartbeatFollower(const HeartbeatUpdate& update) {
  absl::MutexLock lock(&mu_);
  auto run = runs_.find(update.run_id);
  if (run == runs_.end()) return NotFoundError("run", update.run_id);
  if (absl::Status fenced =
          CheckLeaseEpoch(update.run_id, update.lease_epoch, run->second.lease_epoch);
      !fenced.ok()) {
    return fenced;
  }
  const absl::Time now = now_();
  if (run->second.run.state() == v1::RUN_STATE_CANCELLED) return HeartbeatResult{now, true};
  absl::StatusOr<GangRow*> gang = LiveGang(update.run_id, update.lease_epoch);
  if (!gang.ok()) return gang.status();
  bool holds = false;
  for (GangSlotRow& slot : (*gang)->slots) {
    if (slot.slot.worker_id != update.worker_id) continue;
    holds = true;
    slot.expires = now + update.ttl;
  }
  if (!holds) return LeaseEpochError(update.run_id, "this worker holds no rank of the gang");
  if (auto worker = workers_.find(update.worker_id); worker != workers_.end()) {
    worker->second.last_seen = now;
  }
  return HeartbeatResult{now + update.ttl, run->second.run.cancel_requested()};
}

absl::StatusOr<std::vector<LapsedGang>> MemoryRunStore::ListLapsedGangs(int limit) {
  absl::MutexLock lock(&mu_);
  const absl::Time now = now_();
  std::vector<LapsedGang> lapsed;
  for (const auto& [run_id, gang] : gangs_) {
    if (static_cast<int>(lapsed.size()) >= limit) break;
    const RunRow* found = LiveRunOf(runs_, run_id, gang.lease_epoch);
    if (found == nullptr) continue;
    const RunRow& run = *found;
    LapsedGang entry;
    entry.run_id = run_id;
    entry.lease_epoch = gang.lease_epoch;
    entry.attempt = run.run.attempt();
    entry.max_attempts = run.run.max_attempts();
    entry.preemptions = run.run.preemptions();
    for (const GangSlotRow& slot : gang.slots) {
      if (!gang.released && now > gang.deadline && !slot.checked_in) {
        entry.why = LapsedGang::Why::kRendezvousTimeout;
        entry.ranks.push_back(slot.slot.rank);
      }
    }
    for (const GangSlotRow& slot : gang.slots) {
      if (!entry.ranks.empty()) break;
      if (slot.slot.worker_id != run.lease_owner && slot.expires < now) {
        entry.ranks.push_back(slot.slot.rank);
      }
    }
    if (!entry.ranks.empty()) lapsed.push_back(std::move(entry));
  }
  return lapsed;
}

absl::StatusOr<v1::Run> MemoryRunStore::FailGang(const GangFailure& failure) {
  absl::MutexLock lock(&mu_);
  auto it = runs_.find(failure.run_id);
  if (it == runs_.end()) return NotFoundError("run", failure.run_id);
  RunRow& run = it->second;
  if (absl::Status fenced = CheckLeaseEpoch(failure.run_id, failure.lease_epoch, run.lease_epoch);
      !fenced.ok()) {
    return fenced;
  }
  if (!IsLive(run.run.state())) return RenderRun(run);
  if (run.run.attempt() != failure.decided_at_attempt) {
    return absl::AbortedError(absl::StrCat("run ", failure.run_id, " is at attempt ",
                                           run.run.attempt(),
                                           "; the gang's failure was decided "
                                           "for ",
                                           failure.decided_at_attempt));
  }
  const absl::Time now = now_();
  RetryDecision decision = failure.retry;
  if (run.run.cancel_requested()) {
    decision = {v1::RUN_STATE_CANCELLED, run.run.attempt(), {}, failure.retry.next_preemptions};
  }
  const v1::RunState from = run.run.state();
  run.run.set_state(decision.next_state);
  run.run.set_preemptions(decision.next_preemptions);
  run.run.set_attempt(decision.next_attempt);
  run.not_before = now + decision.delay;
  run.run.set_failure_class(failure.failure_class);
  run.run.mutable_failure()->set_code(failure.failure_status.code());
  run.run.mutable_failure()->set_message(failure.failure_status.message());
  if (failure.checkpoint) {
    run.run.mutable_checkpoint()->set_step(failure.checkpoint->step());
    run.run.mutable_checkpoint()->set_uri(failure.checkpoint->uri());
  }
  ++run.lease_epoch;  // every rank's writes under the old epoch are refused from now on
  const std::string class_name = FailureClassName(failure.failure_class);
  AddEvent(run, from, decision.next_attempt,
           absl::StrCat("gang ", class_name, ": ", failure.failure_status.message()),
           run.lease_owner);
  run.lease_owner.clear();
  run.lease_request_id.clear();
  run.devices.clear();
  run.run.set_cancel_requested(false);
  gangs_.erase(failure.run_id);
  if (run.run.state() == v1::RUN_STATE_PENDING) {
    run.run.clear_end_time();
  } else {
    *run.run.mutable_end_time() = ToProtoTime(now);
    EndSweepIfDone(sweeps_.at(run.run.sweep_id()));
  }
  return RenderRun(run);
}

absl::StatusOr<GangCounts> MemoryRunStore::CountGangs() {
  absl::MutexLock lock(&mu_);
  const absl::Time now = now_();
  GangCounts counts;
  for (const auto& [run_id, run] : runs_) {
    if (run.ranks <= 1) continue;
    if (run.run.state() == v1::RUN_STATE_PENDING && run.not_before <= now) ++counts.waiting_gangs;
    if (IsLive(run.run.state())) ++counts.placed_gangs;
  }
  for (const auto& [worker_id, waiter] : gang_pool_) counts.waiting_workers += waiter.until > now;
  for (const auto& [run_id, gang] : gangs_) {
    if (LiveRunOf(runs_, run_id, gang.lease_epoch) == nullptr) continue;
    for (const GangSlotRow& slot : gang.slots) counts.undelivered_slots += !slot.delivered;
  }
  return counts;
}

}  // namespace parity::server
