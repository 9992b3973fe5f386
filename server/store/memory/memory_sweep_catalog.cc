// MemoryRunStore's SweepCatalog half: sweeps, runs and workers, listed as PostgreSQL lists them
// (sweeps newest first, runs in grid order, workers most recently seen first).
#include <algorithm>
#include <tuple>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "core/proto_time.h"
#include "core/spec_defaults.h"
#include "core/status_macros.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "server/store/deterministic_bytes.h"
#include "server/store/memory/memory_run_store.h"
#include "server/store/store_errors.h"

namespace parity::server {
namespace {

bool IsUnfinished(v1::RunState state) {
  return state == v1::RUN_STATE_PENDING || state == v1::RUN_STATE_LEASED ||
         state == v1::RUN_STATE_RUNNING;
}

}  // namespace

MemoryRunStore::MemoryRunStore(std::function<absl::Time()> now)
    : now_(std::move(now)), ids_(std::random_device{}()) {}

void MemoryRunStore::Reset() {
  absl::MutexLock lock(&mu_);
  next_seq_ = 0;
  sweeps_.clear();
  sweep_by_key_.clear();
  runs_.clear();
  workers_.clear();
  tokens_.clear();
  server_keys_.clear();
  events_.clear();
  next_event_id_ = 1;
  gang_pool_.clear();
  gangs_.clear();
}

void MemoryRunStore::AddEvent(const RunRow& run, v1::RunState from, uint32_t attempt,
                              std::string reason, const std::string& worker_id) {
  EventRow& row = events_[next_event_id_];
  row.sweep_id = run.run.sweep_id();
  row.worker_id = worker_id;
  row.event.event_id = next_event_id_++;
  row.event.run_id = run.run.run_id();
  row.event.from_state = from;
  row.event.to_state = run.run.state();
  row.event.attempt = attempt;
  row.event.reason = std::move(reason);
  row.event.time = absl::FromUnixMicros(absl::ToUnixMicros(now_()));
  if (event_listener_) event_listener_(row.sweep_id);
}

void MemoryRunStore::SetEventListener(std::function<void(const std::string& sweep_id)> listener) {
  absl::MutexLock lock(&mu_);
  event_listener_ = std::move(listener);
}

std::string MemoryRunStore::NewId() {
  const uint64_t a = ids_();
  const uint64_t b = ids_();
  // Version 4, variant 1: the canonical form PostgreSQL's gen_random_uuid() gives.
  return absl::StrFormat("%08x-%04x-4%03x-%04x-%012x", a >> 32, (a >> 16) & 0xffff, a & 0xfff,
                         0x8000 | ((b >> 48) & 0x3fff), b & 0xffffffffffffULL);
}

int MemoryRunStore::LiveRuns(const SweepRow& sweep) const {
  int live = 0;
  for (const std::string& run_id : sweep.run_ids) {
    const v1::RunState state = runs_.at(run_id).run.state();
    live += state == v1::RUN_STATE_LEASED || state == v1::RUN_STATE_RUNNING;
  }
  return live;
}

v1::Sweep MemoryRunStore::RenderSweep(const SweepRow& row) const {
  v1::Sweep sweep;
  sweep.set_sweep_id(row.sweep_id);
  *sweep.mutable_spec() = row.spec;
  sweep.set_state(row.state);
  sweep.set_owner(row.owner);
  sweep.set_idempotency_key(row.idempotency_key);
  v1::RunCounts* counts = sweep.mutable_counts();
  for (const std::string& run_id : row.run_ids) {
    switch (runs_.at(run_id).run.state()) {
      case v1::RUN_STATE_PENDING:
        counts->set_pending(counts->pending() + 1);
        break;
      case v1::RUN_STATE_LEASED:
        counts->set_leased(counts->leased() + 1);
        break;
      case v1::RUN_STATE_RUNNING:
        counts->set_running(counts->running() + 1);
        break;
      case v1::RUN_STATE_SUCCEEDED:
        counts->set_succeeded(counts->succeeded() + 1);
        break;
      case v1::RUN_STATE_FAILED:
        counts->set_failed(counts->failed() + 1);
        break;
      case v1::RUN_STATE_CANCELLED:
        counts->set_cancelled(counts->cancelled() + 1);
        break;
      default:
        break;
    }
  }
  counts->set_total(static_cast<uint32_t>(row.run_ids.size()));
  *sweep.mutable_create_time() = ToProtoTime(row.created);
  if (row.ended) *sweep.mutable_end_time() = ToProtoTime(*row.ended);
  return sweep;
}

v1::Run MemoryRunStore::RenderRun(const RunRow& row) const {
  v1::Run run = row.run;
  run.clear_lease();
  if (!row.lease_owner.empty()) {
    v1::Lease* lease = run.mutable_lease();
    lease->set_run_id(run.run_id());
    lease->set_lease_epoch(row.lease_epoch);
    lease->set_worker_id(row.lease_owner);
    *lease->mutable_expire_time() = ToProtoTime(row.lease_expires);
    for (uint32_t index : row.devices) lease->add_device_indices(index);
  }
  return run;
}

void MemoryRunStore::EndSweepIfDone(SweepRow& sweep) {
  if (sweep.ended) return;
  bool failed = false;
  for (const std::string& run_id : sweep.run_ids) {
    const v1::RunState state = runs_.at(run_id).run.state();
    if (IsUnfinished(state)) return;
    failed |= state == v1::RUN_STATE_FAILED;
  }
  sweep.ended = now_();
  if (sweep.state != v1::SWEEP_STATE_CANCELLED) {
    sweep.state = failed ? v1::SWEEP_STATE_FAILED : v1::SWEEP_STATE_SUCCEEDED;
  }
}

absl::StatusOr<CreatedSweep> MemoryRunStore::CreateSweep(const NewSweep& sweep) {
  const std::string spec_bytes = DeterministicBytes(sweep.spec);
  absl::MutexLock lock(&mu_);
  CreatedSweep created;
  if (!sweep.idempotency_key.empty()) {
    if (auto it = sweep_by_key_.find({sweep.owner, sweep.idempotency_key});
        it != sweep_by_key_.end()) {
      const SweepRow& existing = sweeps_.at(it->second);
      if (existing.spec_bytes != spec_bytes)
        return IdempotencyKeyReusedError(sweep.owner, sweep.idempotency_key, existing.sweep_id);
      created.deduplicated = true;
      created.sweep = RenderSweep(existing);
      created.run_ids = existing.run_ids;
      return created;
    }
  }
  const absl::Time now = now_();
  SweepRow row;
  row.sweep_id = NewId();
  row.spec = sweep.spec;
  row.spec_bytes = spec_bytes;
  row.owner = sweep.owner;
  row.idempotency_key = sweep.idempotency_key;
  row.created_seq = next_seq_++;
  row.created = now;
  const uint32_t max_attempts =
      sweep.spec.max_attempts() == 0 ? core::kDefaultMaxAttempts : sweep.spec.max_attempts();
  uint32_t ordinal = 0;
  for (const v1::RunSpec& spec : sweep.runs) {
    RunRow run;
    run.run.set_run_id(NewId());
    run.run.set_sweep_id(row.sweep_id);
    *run.run.mutable_spec() = spec;
    run.run.set_state(v1::RUN_STATE_PENDING);
    run.run.set_priority(sweep.spec.priority());
    run.run.set_attempt(1);
    run.run.set_max_attempts(max_attempts);
    *run.run.mutable_create_time() = ToProtoTime(now);
    run.ordinal = ordinal++;
    run.cpu_threads = std::max<uint32_t>(spec.resources().cpu_threads(), 1);
    run.gpus = spec.resources().gpus();
    run.ranks = std::max<uint32_t>(spec.resources().ranks(), 1);
    run.memory_bytes = spec.resources().memory_bytes();
    run.gpu_memory_bytes = spec.resources().gpu_memory_bytes();
    row.run_ids.push_back(run.run.run_id());
    AddEvent(run, v1::RUN_STATE_UNSPECIFIED, run.run.attempt(), "submitted");
    runs_.emplace(run.run.run_id(), std::move(run));
  }
  if (!row.idempotency_key.empty()) {
    sweep_by_key_[{row.owner, row.idempotency_key}] = row.sweep_id;
  }
  created.run_ids = row.run_ids;
  created.sweep = RenderSweep(row);
  sweeps_.emplace(row.sweep_id, std::move(row));
  return created;
}

absl::StatusOr<v1::Sweep> MemoryRunStore::GetSweep(const std::string& sweep_id) {
  absl::MutexLock lock(&mu_);
  auto it = sweeps_.find(sweep_id);
  if (it == sweeps_.end()) return NotFoundError("sweep", sweep_id);
  return RenderSweep(it->second);
}

absl::StatusOr<Page<v1::Sweep>> MemoryRunStore::ListSweeps(v1::SweepState state,
                                                           const PageRequest& page) {
  // Newest first; the token is the last sweep's creation order and id.
  uint64_t after_seq = UINT64_MAX;
  if (!page.page_token.empty()) {
    absl::StatusOr<std::string> text = DecodePageToken(page.page_token);
    if (!text.ok()) return text.status();
    std::vector<std::string> parts = absl::StrSplit(*text, '|');
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &after_seq)) return BadPageToken();
  }
  absl::MutexLock lock(&mu_);
  std::vector<const SweepRow*> rows;
  for (const auto& [id, row] : sweeps_) {
    if (state != v1::SWEEP_STATE_UNSPECIFIED && row.state != state) continue;
    if (row.created_seq < after_seq) rows.push_back(&row);
  }
  std::sort(rows.begin(), rows.end(),
            [](const SweepRow* a, const SweepRow* b) { return a->created_seq > b->created_seq; });
  Page<v1::Sweep> result;
  for (size_t i = 0; i < rows.size() && i < page.page_size; ++i) {
    result.items.push_back(RenderSweep(*rows[i]));
    if (i + 1 == page.page_size && rows.size() > page.page_size) {
      result.next_page_token =
          EncodePageToken(absl::StrCat(rows[i]->created_seq, "|", rows[i]->sweep_id));
    }
  }
  return result;
}

absl::StatusOr<CancelResult> MemoryRunStore::CancelSweep(const std::string& sweep_id,
                                                         const std::string& reason) {
  absl::MutexLock lock(&mu_);
  auto it = sweeps_.find(sweep_id);
  if (it == sweeps_.end()) return NotFoundError("sweep", sweep_id);
  SweepRow& sweep = it->second;
  if (sweep.state == v1::SWEEP_STATE_ACTIVE) sweep.state = v1::SWEEP_STATE_CANCELLED;
  CancelResult result;
  const absl::Time now = now_();
  for (const std::string& run_id : sweep.run_ids) {
    v1::Run& run = runs_.at(run_id).run;
    if (run.state() == v1::RUN_STATE_PENDING) {
      run.set_state(v1::RUN_STATE_CANCELLED);
      *run.mutable_end_time() = ToProtoTime(now);
      AddEvent(runs_.at(run_id), v1::RUN_STATE_PENDING, run.attempt(),
               reason.empty() ? "cancelled" : reason);
      ++result.cancelled_runs;
    } else if ((run.state() == v1::RUN_STATE_LEASED || run.state() == v1::RUN_STATE_RUNNING) &&
               !run.cancel_requested()) {
      run.set_cancel_requested(true);
      ++result.cancelled_runs;
    }
  }
  EndSweepIfDone(sweep);
  result.sweep = RenderSweep(sweep);
  return result;
}

absl::StatusOr<uint32_t> MemoryRunStore::DeleteSweep(const std::string& sweep_id) {
  absl::MutexLock lock(&mu_);
  auto it = sweeps_.find(sweep_id);
  if (it == sweeps_.end()) return NotFoundError("sweep", sweep_id);
  if (!it->second.ended) {
    return absl::FailedPreconditionError(absl::StrCat(
        "sweep ", sweep_id, " has runs that have not ended; cancel it and let them stop first"));
  }
  const uint32_t runs = static_cast<uint32_t>(it->second.run_ids.size());
  for (const std::string& run_id : it->second.run_ids) runs_.erase(run_id);
  // Their events go with them (runs_deleted_with_records).
  std::erase_if(events_, [&](const auto& event) { return event.second.sweep_id == sweep_id; });
  if (!it->second.idempotency_key.empty()) {
    sweep_by_key_.erase({it->second.owner, it->second.idempotency_key});
  }
  sweeps_.erase(it);
  return runs;
}

absl::StatusOr<v1::Run> MemoryRunStore::GetRun(const std::string& run_id) {
  absl::MutexLock lock(&mu_);
  auto it = runs_.find(run_id);
  if (it == runs_.end()) return NotFoundError("run", run_id);
  return RenderRun(it->second);
}

absl::StatusOr<Page<v1::Run>> MemoryRunStore::ListRuns(const std::string& sweep_id,
                                                       const std::vector<v1::RunState>& states,
                                                       const PageRequest& page) {
  int64_t after_ordinal = -1;
  if (!page.page_token.empty()) {
    absl::StatusOr<std::string> text = DecodePageToken(page.page_token);
    if (!text.ok()) return text.status();
    if (!absl::SimpleAtoi(*text, &after_ordinal)) return BadPageToken();
  }
  absl::MutexLock lock(&mu_);
  auto it = sweeps_.find(sweep_id);
  if (it == sweeps_.end()) return NotFoundError("sweep", sweep_id);
  std::vector<const RunRow*> rows;
  for (const std::string& run_id : it->second.run_ids) {
    const RunRow& row = runs_.at(run_id);
    if (static_cast<int64_t>(row.ordinal) <= after_ordinal) continue;
    if (!states.empty() &&
        std::find(states.begin(), states.end(), row.run.state()) == states.end()) {
      continue;
    }
    rows.push_back(&row);
  }
  Page<v1::Run> result;
  for (size_t i = 0; i < rows.size() && i < page.page_size; ++i) {
    result.items.push_back(RenderRun(*rows[i]));
    if (i + 1 == page.page_size && rows.size() > page.page_size) {
      result.next_page_token = EncodePageToken(absl::StrCat(rows[i]->ordinal));
    }
  }
  return result;
}

absl::StatusOr<Page<RunStateRow>> MemoryRunStore::ListRunStates(const std::string& sweep_id,
                                                                const PageRequest& page) {
  PARITY_ASSIGN_OR_RETURN(Page<v1::Run> runs, ListRuns(sweep_id, {}, page));
  Page<RunStateRow> result;
  result.next_page_token = std::move(runs.next_page_token);
  for (const v1::Run& run : runs.items) {
    result.items.push_back(RunStateRow{.run_id = run.run_id(),
                                       .state = run.state(),
                                       .attempt = run.attempt(),
                                       .latest_step = run.latest_step()});
  }
  return result;
}

absl::StatusOr<Page<v1::Worker>> MemoryRunStore::ListWorkers(const WorkersQuery& query) {
  // Most recently seen first, keyset on (last seen, id) as in PostgreSQL.
  std::optional<std::pair<int64_t, std::string>> after;
  if (!query.page.page_token.empty()) {
    absl::StatusOr<std::string> text = DecodePageToken(query.page.page_token);
    if (!text.ok()) return text.status();
    std::vector<std::string> parts = absl::StrSplit(*text, '|');
    int64_t micros = 0;
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &micros) || parts[1].size() != 36) {
      return BadPageToken();
    }
    after.emplace(micros, parts[1]);
  }
  absl::MutexLock lock(&mu_);
  const absl::Time since = now_() - query.seen_within;
  std::vector<std::pair<std::pair<int64_t, std::string>, const WorkerRow*>> rows;
  for (const auto& [id, row] : workers_) {
    if (row.last_seen < since) continue;
    std::pair<int64_t, std::string> key(absl::ToUnixMicros(row.last_seen), id);
    if (after && !(key < *after)) continue;
    rows.emplace_back(std::move(key), &row);
  }
  std::sort(rows.begin(), rows.end(),
            [](const auto& a, const auto& b) { return a.first > b.first; });
  Page<v1::Worker> result;
  for (size_t i = 0; i < rows.size() && i < query.page.page_size; ++i) {
    v1::Worker worker = rows[i].second->worker;
    *worker.mutable_last_seen_time() = ToProtoTime(rows[i].second->last_seen);
    uint32_t active = 0;
    for (const auto& [run_id, run] : runs_) {
      active += run.lease_owner == worker.worker_id() && (run.run.state() == v1::RUN_STATE_LEASED ||
                                                          run.run.state() == v1::RUN_STATE_RUNNING);
    }
    worker.set_active_runs(active);
    result.items.push_back(std::move(worker));
    if (i + 1 == query.page.page_size && rows.size() > query.page.page_size) {
      result.next_page_token =
          EncodePageToken(absl::StrCat(rows[i].first.first, "|", rows[i].first.second));
    }
  }
  return result;
}

}  // namespace parity::server
