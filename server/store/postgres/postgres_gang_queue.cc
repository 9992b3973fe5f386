// PostgresRunStore's GangQueue: the statements of server/sql/statements/gangs.sql in one
// transaction per call. Where ranks go is PlaceGang's (gang_placement.h), the function the memory
// store calls too; this file reads the pool (locked, SKIP LOCKED), asks it, and writes what it
// chose. Every write about a placed gang locks the run row first and checks the gang epoch
// (CheckLeaseEpoch) before anything is written.
#include <google/protobuf/util/json_util.h>

#include <nlohmann/json.hpp>
#include <optional>

#include "absl/algorithm/container.h"
#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "server/store/gang_placement.h"
#include "server/store/postgres/pg_rows.h"
#include "server/store/postgres/pg_support.h"
#include "server/store/postgres/postgres_run_store.h"
#include "server/store/store_errors.h"
#include "server/store/uuid.h"

namespace parity::server {
namespace {

using pg::WithTransaction;

double Seconds(absl::Duration d) { return absl::ToDoubleSeconds(d); }

bool IsLive(v1::RunState state) {
  return state == v1::RUN_STATE_LEASED || state == v1::RUN_STATE_RUNNING;
}

// The run row every writer locks first (lock_run, statements/run_queue.sql).
struct LockedRun {
  std::string sweep_id;
  v1::RunState state;
  int64_t lease_epoch;
  std::string lease_owner;
  bool cancel_requested;
  uint32_t attempt;
};

absl::StatusOr<LockedRun> LockRun(pqxx::work& tx, const std::string& run_id) {
  if (!IsUuid(run_id)) return pg::NotFoundError("run", run_id);
  const pqxx::result rows = tx.exec_prepared("lock_run", run_id);
  if (rows.empty()) return pg::NotFoundError("run", run_id);
  const pqxx::row& row = rows[0];
  return LockedRun{row[1].c_str(),       pg::RunStateFromText(row[2].c_str()),
                   row[3].as<int64_t>(), row[4].is_null() ? "" : row[4].c_str(),
                   row[5].as<bool>(),    row[6].as<uint32_t>()};
}

// The live gang's locked run under `epoch`, or the refusal.
absl::StatusOr<LockedRun> LockLiveGang(pqxx::work& tx, const std::string& run_id, int64_t epoch) {
  PARITY_ASSIGN_OR_RETURN(LockedRun run, LockRun(tx, run_id));
  PARITY_RETURN_IF_ERROR(CheckLeaseEpoch(run_id, epoch, run.lease_epoch));
  if (!IsLive(run.state)) {
    return pg::LeaseEpochError(run_id, "the gang is no longer placed under this epoch");
  }
  return run;
}

std::vector<uint32_t> Uint32s(const std::string& literal) { return pg::ParseIntArray(literal); }

std::vector<uint64_t> Uint64s(const std::string& literal) {
  std::vector<uint64_t> values;
  const nlohmann::json array =
      nlohmann::json::parse("[" + literal.substr(1, literal.size() - 2) + "]", nullptr, false);
  if (array.is_array()) {
    for (const nlohmann::json& value : array) values.push_back(value.get<uint64_t>());
  }
  return values;
}

// The digests in a worker's registered datasets (workers.datasets: DatasetHolding as JSON).
std::vector<std::string> Digests(const char* datasets_json) {
  std::vector<std::string> digests;
  const nlohmann::json array = nlohmann::json::parse(datasets_json, nullptr, false);
  for (const nlohmann::json& held : array.is_array() ? array : nlohmann::json::array()) {
    if (held.is_object() && held.contains("digest") && held["digest"].is_string()) {
      digests.push_back(held["digest"].get<std::string>());
    }
  }
  return digests;
}

GangCandidate CandidateFromRow(const pqxx::row& row) {
  GangCandidate candidate;
  candidate.worker_id = row["worker_id"].c_str();
  candidate.offer.cpu_threads = row["cpu_threads"].as<uint32_t>();
  candidate.offer.host_memory_bytes = row["host_memory_bytes"].as<uint64_t>();
  candidate.offer.cpu_device_index = row["cpu_device"].as<uint32_t>();
  const std::vector<uint32_t> indices = Uint32s(row["gpu_indices"].c_str());
  const std::vector<uint64_t> memory = Uint64s(row["gpu_memory"].c_str());
  for (size_t i = 0; i < indices.size() && i < memory.size(); ++i) {
    candidate.offer.gpus.push_back({indices[i], memory[i]});
  }
  candidate.datasets = Digests(row["datasets"].c_str());
  return candidate;
}

// The grant of `rows` (slots of one worker, by run then rank): the first gang's.
GangGrant GrantOf(pqxx::work& tx, const pqxx::result& rows, const std::string& worker_id) {
  GangGrant grant;
  const std::string run_id = rows[0]["run_id"].c_str();
  grant.lease_epoch = rows[0]["lease_epoch"].as<int64_t>();
  for (const pqxx::row& row : rows) {
    if (run_id != row["run_id"].c_str()) break;
    grant.slots.push_back({row["rank"].as<uint32_t>(), worker_id, Uint32s(row["devices"].c_str())});
  }
  const pqxx::row rendezvous = tx.exec_prepared("gang_rendezvous_of", run_id)[0];
  grant.world_size = rendezvous["world_size"].as<uint32_t>();
  grant.rendezvous_deadline = pg::TimeFromMicros(rendezvous["deadline_us"].as<int64_t>());
  grant.run = pg::RunFromRow(tx.exec_prepared("get_run", run_id)[0]);
  return grant;
}

// The worker's undelivered slots of a live gang, delivered now (to `request_id`'s attempt).
std::optional<GangGrant> DeliverSlots(pqxx::work& tx, const std::string& worker_id,
                                      const std::string& request_id) {
  const pqxx::result rows = tx.exec_prepared("gang_undelivered_slots", worker_id);
  if (rows.empty()) return std::nullopt;
  GangGrant grant = GrantOf(tx, rows, worker_id);
  tx.exec_prepared("gang_mark_delivered", grant.run.run_id(), worker_id, grant.lease_epoch,
                   request_id);
  return grant;
}

// Writes a placement chosen by PlaceGang: the run leased under epoch + 1, its slots, its
// rendezvous deadline, an event; the placed workers out of the pool.
void WritePlacement(pqxx::work& tx, const std::string& run_id, const std::vector<GangSlot>& slots,
                    const GangOffer& offer) {
  const pqxx::row leased = tx.exec_prepared("gang_lease", run_id, slots.front().worker_id,
                                            pg::IntArrayLiteral(slots.front().device_indices),
                                            Seconds(offer.lease_ttl))[0];
  const int64_t epoch = leased["lease_epoch"].as<int64_t>();
  tx.exec_prepared("gang_clear", run_id);
  pg::ArrayLiteral ranks, workers, devices;
  for (const GangSlot& slot : slots) {
    ranks.Add(static_cast<int64_t>(slot.rank));
    workers.AddQuoted(slot.worker_id);
    devices.AddQuoted(pg::IntArrayLiteral(slot.device_indices));
  }
  const std::string worker_ids = workers.Take();
  tx.exec_prepared("gang_insert_slots", run_id, epoch, ranks.Take(), worker_ids, devices.Take(),
                   Seconds(offer.lease_ttl), Seconds(offer.rendezvous_timeout));
  tx.exec_prepared("gang_pool_leave_all", worker_ids);
  tx.exec_prepared("insert_event", run_id, leased["sweep_id"].c_str(), "PENDING", "LEASED",
                   leased["attempt"].as<int64_t>(), epoch, slots.front().worker_id,
                   absl::StrCat("leased as a gang of ", slots.size(), " ranks"));
}

// Whether the live fleet, every registered device free, could host the gang at all.
bool FleetCouldHost(pqxx::work& tx, const GangAsk& ask) {
  std::vector<GangCandidate> fleet;
  for (const pqxx::row& row : tx.exec_prepared("gang_live_fleet")) {
    std::vector<v1::Device> devices;
    const nlohmann::json array = nlohmann::json::parse(row["devices"].c_str(), nullptr, false);
    for (const nlohmann::json& device : array.is_array() ? array : nlohmann::json::array()) {
      v1::Device parsed;
      if (google::protobuf::util::JsonStringToMessage(device.dump(), &parsed).ok()) {
        devices.push_back(std::move(parsed));
      }
    }
    fleet.push_back(
        {row["worker_id"].c_str(), OfferOfDevices(devices), Digests(row["datasets"].c_str())});
  }
  return PlaceGang(ask, fleet).has_value();
}

// Places the best pending gang over the pool, or finds the worker reserved for a starving one.
void TryPlace(pqxx::work& tx, const GangOffer& offer, GangWait& wait) {
  const pqxx::result pending = tx.exec_prepared("gang_pending");
  if (pending.empty()) return;
  std::vector<GangCandidate> pool;
  for (const pqxx::row& row : tx.exec_prepared("gang_pool")) pool.push_back(CandidateFromRow(row));
  for (const pqxx::row& gang : pending) {
    const std::string run_id = gang["run_id"].c_str();
    v1::RunSpec spec;
    spec.ParseFromString(pg::BytesOf(gang["spec_bytes"]));
    const GangAsk ask = AskOf(spec);
    if (std::optional<std::vector<GangSlot>> slots = PlaceGang(ask, pool)) {
      if (!tx.exec_prepared("gang_lock_pending", run_id).empty()) {
        WritePlacement(tx, run_id, *slots, offer);
        wait.grant = DeliverSlots(tx, offer.worker_id, offer.request_id);
        for (const GangSlot& slot : *slots) {
          if (slot.worker_id != offer.worker_id &&
              !absl::c_linear_search(wait.placed_workers, slot.worker_id)) {
            wait.placed_workers.push_back(slot.worker_id);
          }
        }
        return;
      }
    }
    const absl::Duration waited = absl::Microseconds(gang["waited_us"].as<int64_t>());
    if (waited <= offer.reservation_after) continue;
    const auto self = absl::c_find_if(
        pool, [&](const GangCandidate& c) { return c.worker_id == offer.worker_id; });
    const GangCandidate me{offer.worker_id, offer.offer,
                           self == pool.end() ? std::vector<std::string>{} : self->datasets};
    wait.reserved = !RankDevices(ask, me).empty() && FleetCouldHost(tx, ask);
    return;
  }
}

RendezvousState StateOf(const pqxx::row& rendezvous, uint32_t checked_in, bool released) {
  RendezvousState state;
  state.placed_at = pg::TimeFromMicros(rendezvous["placed_us"].as<int64_t>());
  state.released_now = released && !rendezvous["released"].as<bool>();
  state.world_size = rendezvous["world_size"].as<uint32_t>();
  state.checked_in = checked_in;
  state.released = released;
  if (released) state.address = rendezvous["address"].c_str();
  state.deadline = pg::TimeFromMicros(rendezvous["deadline_us"].as<int64_t>());
  return state;
}

}  // namespace

absl::StatusOr<GangWait> PostgresRunStore::WaitForGang(const GangOffer& offer) {
  return WithTransaction(*pool_, [&](pqxx::work& tx) -> absl::StatusOr<GangWait> {
    if (!IsUuid(offer.worker_id) ||
        tx.exec_prepared("gang_worker_exists", offer.worker_id).empty()) {
      return pg::NotFoundError("worker", offer.worker_id, "is not registered");
    }
    std::vector<uint32_t> indices;
    std::vector<uint64_t> memory;
    for (const ResourceOffer::Gpu& gpu : GpusLargestFirst(offer.offer)) {
      indices.push_back(gpu.index);
      memory.push_back(gpu.memory_bytes);
    }
    pg::ArrayLiteral memory_literal;
    for (uint64_t bytes : memory) memory_literal.Add(static_cast<int64_t>(bytes));
    const std::string memory_text = memory.empty() ? "{}" : memory_literal.Take();
    tx.exec_prepared("gang_pool_join", offer.worker_id, offer.offer.cpu_threads,
                     static_cast<int64_t>(offer.offer.host_memory_bytes),
                     offer.offer.cpu_device_index, pg::IntArrayLiteral(indices), memory_text,
                     Seconds(offer.waiting_for));
    GangWait wait;
    if ((wait.grant = DeliverSlots(tx, offer.worker_id, offer.request_id)) || offer.leaving) {
      tx.exec_prepared("gang_pool_leave", offer.worker_id);
      return wait;
    }
    TryPlace(tx, offer, wait);
    return wait;
  });
}

absl::StatusOr<std::optional<GangGrant>> PostgresRunStore::AnswerGangAgain(
    const std::string& worker_id, const std::string& request_id, absl::Duration lease_ttl) {
  if (request_id.empty() || !IsUuid(worker_id)) return std::nullopt;
  return WithTransaction(*pool_, [&](pqxx::work& tx) -> absl::StatusOr<std::optional<GangGrant>> {
    const pqxx::result rows = tx.exec_prepared("gang_slots_answered_to", worker_id, request_id);
    if (rows.empty()) return std::nullopt;
    const std::string run_id = rows[0]["run_id"].c_str();
    tx.exec_prepared("gang_renew_answered", run_id, worker_id, rows[0]["lease_epoch"].as<int64_t>(),
                     Seconds(lease_ttl));
    return GrantOf(tx, rows, worker_id);  // read after the renewal: the lease as it is now
  });
}

absl::Status PostgresRunStore::LeaveGangPool(const std::string& worker_id) {
  if (!IsUuid(worker_id)) return absl::OkStatus();
  return WithTransaction(*pool_, [&](pqxx::work& tx) -> absl::Status {
    tx.exec_prepared("gang_pool_leave", worker_id);
    return absl::OkStatus();
  });
}

absl::StatusOr<RendezvousState> PostgresRunStore::PostRendezvous(const RendezvousCall& call) {
  return WithTransaction(*pool_, [&](pqxx::work& tx) -> absl::StatusOr<RendezvousState> {
    PARITY_RETURN_IF_ERROR(LockLiveGang(tx, call.run_id, call.lease_epoch).status());
    const pqxx::result rendezvous = tx.exec_prepared("gang_lock_rendezvous", call.run_id);
    const pqxx::result holder =
        tx.exec_prepared("gang_slot_holder", call.run_id, 0, call.lease_epoch);
    if (rendezvous.empty() || holder.empty() || holder[0][0].c_str() != call.worker_id) {
      return pg::LeaseEpochError(call.run_id, "this worker does not hold rank 0 of the gang");
    }
    const bool released = rendezvous[0]["released"].as<bool>();
    if (released && rendezvous[0]["address"].c_str() != call.address) {
      return absl::FailedPreconditionError(
          absl::StrCat("run ", call.run_id,
                       ": the rendezvous was released with another address; a new "
                       "address needs a new gang epoch (fail the gang and let it restart)"));
    }
    tx.exec_prepared("gang_post_address", call.run_id, call.address);
    tx.exec_prepared("gang_check_in", call.run_id, 0);
    const uint32_t in =
        tx.exec_prepared("gang_checked_in", call.run_id, call.lease_epoch)[0][0].as<uint32_t>();
    const bool now_released = released || in == rendezvous[0]["world_size"].as<uint32_t>();
    if (now_released) tx.exec_prepared("gang_release", call.run_id);
    RendezvousState state = StateOf(rendezvous[0], in, now_released);
    state.address = now_released ? call.address : "";
    return state;
  });
}

absl::StatusOr<RendezvousState> PostgresRunStore::CheckInRendezvous(const RendezvousCall& call) {
  return WithTransaction(*pool_, [&](pqxx::work& tx) -> absl::StatusOr<RendezvousState> {
    PARITY_RETURN_IF_ERROR(LockLiveGang(tx, call.run_id, call.lease_epoch).status());
    const pqxx::result rendezvous = tx.exec_prepared("gang_lock_rendezvous", call.run_id);
    const pqxx::result holder = tx.exec_prepared("gang_slot_holder", call.run_id,
                                                 static_cast<int>(call.rank), call.lease_epoch);
    if (rendezvous.empty() || holder.empty() || holder[0][0].c_str() != call.worker_id) {
      return pg::LeaseEpochError(call.run_id,
                                 absl::StrCat("this worker does not hold rank ", call.rank));
    }
    // Rank 0 checks in by posting its address; it may ask here for the state.
    if (call.rank != 0) tx.exec_prepared("gang_check_in", call.run_id, static_cast<int>(call.rank));
    const uint32_t in =
        tx.exec_prepared("gang_checked_in", call.run_id, call.lease_epoch)[0][0].as<uint32_t>();
    bool released = rendezvous[0]["released"].as<bool>();
    if (!released && !rendezvous[0]["address"].is_null() &&
        in == rendezvous[0]["world_size"].as<uint32_t>()) {
      tx.exec_prepared("gang_release", call.run_id);
      released = true;
    }
    return StateOf(rendezvous[0], in, released);
  });
}

absl::StatusOr<HeartbeatResult> PostgresRunStore::HeartbeatFollower(const HeartbeatUpdate& update) {
  return WithTransaction(*pool_, [&](pqxx::work& tx) -> absl::StatusOr<HeartbeatResult> {
    PARITY_ASSIGN_OR_RETURN(const LockedRun run, LockRun(tx, update.run_id));
    PARITY_RETURN_IF_ERROR(CheckLeaseEpoch(update.run_id, update.lease_epoch, run.lease_epoch));
    if (run.state == v1::RUN_STATE_CANCELLED) return HeartbeatResult{absl::Now(), true};
    if (!IsLive(run.state)) {
      return pg::LeaseEpochError(update.run_id, "the gang is no longer placed under this epoch");
    }
    const pqxx::result renewed =
        tx.exec_prepared("gang_heartbeat_slots", update.run_id, update.worker_id,
                         update.lease_epoch, Seconds(update.ttl));
    if (renewed.empty()) {
      return pg::LeaseEpochError(update.run_id, "this worker holds no rank of the gang");
    }
    return HeartbeatResult{pg::TimeFromMicros(renewed[0][0].as<int64_t>()), run.cancel_requested};
  });
}

absl::StatusOr<std::vector<LapsedGang>> PostgresRunStore::ListLapsedGangs(int limit) {
  return WithTransaction(*pool_, [&](pqxx::work& tx) -> absl::StatusOr<std::vector<LapsedGang>> {
    std::vector<LapsedGang> lapsed;
    for (const pqxx::row& row : tx.exec_prepared("gang_lapsed", limit)) {
      LapsedGang& gang = lapsed.emplace_back();
      gang.run_id = row["run_id"].c_str();
      gang.lease_epoch = row["lease_epoch"].as<int64_t>();
      gang.why = row["timed_out"].as<bool>() ? LapsedGang::Why::kRendezvousTimeout
                                             : LapsedGang::Why::kSlotLapsed;
      gang.ranks = Uint32s(row["ranks"].c_str());
      gang.attempt = row["attempt"].as<uint32_t>();
      gang.max_attempts = row["max_attempts"].as<uint32_t>();
      gang.preemptions = row["preemptions"].as<uint32_t>();
    }
    return lapsed;
  });
}

absl::StatusOr<v1::Run> PostgresRunStore::FailGang(const GangFailure& failure) {
  return WithTransaction(*pool_, [&](pqxx::work& tx) -> absl::StatusOr<v1::Run> {
    PARITY_ASSIGN_OR_RETURN(const LockedRun run, LockRun(tx, failure.run_id));
    PARITY_RETURN_IF_ERROR(CheckLeaseEpoch(failure.run_id, failure.lease_epoch, run.lease_epoch));
    if (IsLive(run.state)) {
      if (run.attempt != failure.decided_at_attempt) {
        return absl::AbortedError(absl::StrCat("run ", failure.run_id, " is at attempt ",
                                               run.attempt,
                                               "; the gang's failure was decided "
                                               "for ",
                                               failure.decided_at_attempt));
      }
      RetryDecision decision = failure.retry;
      if (run.cancel_requested) {
        decision = {v1::RUN_STATE_CANCELLED, run.attempt, {}, failure.retry.next_preemptions};
      }
      tx.exec_prepared("complete_failure", failure.run_id, pg::RunStateText(decision.next_state),
                       decision.next_attempt, Seconds(decision.delay),
                       pg::FailureClassText(failure.failure_class), failure.failure_status.code(),
                       failure.failure_status.message(), pg::CheckpointStep(failure.checkpoint),
                       pg::CheckpointUri(failure.checkpoint),
                       static_cast<int64_t>(decision.next_preemptions));
      tx.exec_prepared("insert_event", failure.run_id, run.sweep_id, pg::RunStateText(run.state),
                       pg::RunStateText(decision.next_state), decision.next_attempt,
                       run.lease_epoch,
                       run.lease_owner.empty() ? std::nullopt : std::optional(run.lease_owner),
                       absl::StrCat("gang ", pg::FailureClassText(failure.failure_class), ": ",
                                    failure.failure_status.message()));
      tx.exec_prepared("gang_bump_epoch", failure.run_id);
      if (decision.next_state != v1::RUN_STATE_PENDING) {
        tx.exec_prepared("refresh_sweep_state", run.sweep_id);
      }
    }
    // Otherwise another rank's report (or the reaper) ended this epoch: the run as it is.
    return pg::RunFromRow(tx.exec_prepared("get_run", failure.run_id)[0]);
  });
}

absl::StatusOr<GangCounts> PostgresRunStore::CountGangs() {
  return WithTransaction(*pool_, [&](pqxx::work& tx) -> absl::StatusOr<GangCounts> {
    const pqxx::row row = tx.exec_prepared("gang_counts")[0];
    return GangCounts{row[0].as<uint32_t>(), row[1].as<uint32_t>(), row[2].as<uint32_t>(),
                      row[3].as<uint32_t>()};
  });
}

}  // namespace parity::server
