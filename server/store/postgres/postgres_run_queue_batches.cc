// PostgresRunStore's RunQueue in batches: leases and successful completions (server/sql/).
// A batch is one statement: lease_runs() for requests that offer the same resources,
// complete_runs_success() for successes; a retried lease (LeaseRequest::retry) is looked up by a
// statement of its own first. Each request still gets its own answer (an unknown
// worker, a stale token or an unknown run fails that request alone); an error of the statement
// itself (the database away) fails the requests it carried.
#include <algorithm>
#include <limits>
#include <map>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/store/postgres/pg_rows.h"
#include "server/store/postgres/pg_support.h"
#include "server/store/postgres/postgres_run_store.h"
#include "server/store/store_errors.h"
#include "server/store/uuid.h"

namespace parity::server {
namespace {

// What lease_runs() compares runs against; requests with equal keys share a statement.
struct OfferKey {
  uint32_t cpu_threads;
  uint64_t host_memory_bytes;
  std::vector<uint64_t> gpu_memory;  // largest first; unknown (0) as the maximum
  int64_t ttl_ms;
  auto operator<=>(const OfferKey&) const = default;
};

OfferKey KeyOf(const LeaseRequest& request) {
  OfferKey key{request.offer.cpu_threads,
               request.offer.host_memory_bytes,
               {},
               absl::ToInt64Milliseconds(request.ttl)};
  for (const auto& gpu : GpusLargestFirst(request.offer)) {
    key.gpu_memory.push_back(gpu.memory_bytes == 0
                                 ? static_cast<uint64_t>(std::numeric_limits<int64_t>::max())
                                 : gpu.memory_bytes);
  }
  return key;
}

// Requests offering the same resources, one statement.
void LeaseGroup(PgConnectionPool& pool, const OfferKey& key,
                const std::vector<const LeaseRequest*>& requests,
                const std::vector<size_t>& members,
                std::vector<absl::StatusOr<std::optional<LeasedRun>>>& results) {
  const LeaseRequest& first = *requests[members[0]];
  pg::ArrayLiteral workers, cpu_devices, gpu_indices, gpu_memory, request_ids;
  for (const size_t i : members) {
    workers.AddQuoted(requests[i]->worker_id);
    requests[i]->request_id.empty() ? request_ids.AddNull()
                                    : request_ids.AddQuoted(requests[i]->request_id);
    cpu_devices.Add(static_cast<int64_t>(requests[i]->offer.cpu_device_index));
    std::vector<uint32_t> indices;
    for (const auto& gpu : GpusLargestFirst(requests[i]->offer)) indices.push_back(gpu.index);
    gpu_indices.AddQuoted(pg::IntArrayLiteral(indices));
  }
  for (const uint64_t memory : key.gpu_memory) gpu_memory.Add(memory);
  absl::Status status = pg::WithSingleStatement(pool, [&](pqxx::nontransaction& tx) {
    const pqxx::result rows = tx.exec_prepared(
        "lease_runs", workers.Take(), cpu_devices.Take(), gpu_indices.Take(),
        first.offer.cpu_threads, static_cast<int64_t>(first.offer.host_memory_bytes),
        gpu_memory.Take(), absl::ToDoubleSeconds(first.ttl), request_ids.Take());
    for (const pqxx::row& row : rows) {
      const size_t i = members.at(row["request"].as<size_t>() - 1);
      if (row["run_id"].is_null()) {
        results[i] = pg::NotFoundError("worker", requests[i]->worker_id, "is not registered");
        continue;
      }
      LeasedRun leased;
      leased.run = pg::RunFromRow(row);
      leased.lease = leased.run.lease();
      results[i] = std::optional<LeasedRun>(std::move(leased));
    }
    return absl::OkStatus();
  });
  if (!status.ok()) {
    for (const size_t i : members) results[i] = status;
  }
}

// A retry's lost answer, given again (renew_retried_lease): the lease its request id got, if the
// worker still holds it LEASED and unexpired; nullopt = none, lease as usual.
absl::StatusOr<std::optional<LeasedRun>> AnswerAgain(PgConnectionPool& pool,
                                                     const LeaseRequest& request) {
  return pg::WithSingleStatement(
      pool, [&](pqxx::nontransaction& tx) -> absl::StatusOr<std::optional<LeasedRun>> {
        const pqxx::result rows =
            tx.exec_prepared("renew_retried_lease", request.worker_id, request.request_id,
                             absl::ToDoubleSeconds(request.ttl));
        if (rows.empty()) return std::optional<LeasedRun>();
        LeasedRun leased;
        leased.run = pg::RunFromRow(rows[0]);
        leased.lease = leased.run.lease();
        leased.answered_again = true;
        return std::optional<LeasedRun>(std::move(leased));
      });
}

// A success needs no retry decision, so the whole of it runs in PostgreSQL: fencing check,
// update, event, sweep end and read back, for the batch at once.
void CompleteSuccesses(PgConnectionPool& pool, const std::vector<const Completion*>& completions,
                       const std::vector<size_t>& members,
                       std::vector<absl::StatusOr<CompletionResult>>& results) {
  pg::ArrayLiteral runs, epochs, train_bpc, val_bpc, tokens, steps, measured_m, wall_seconds,
      peak_memory, tokens_per_second, checkpoint_step, checkpoint_uri, final_eval_bpc,
      dataset_digest, peak_device_memory, estimated_device_memory;
  for (const size_t i : members) {
    const Completion& c = *completions[i];
    const v1::RunSummary& s = *c.success;
    runs.AddQuoted(c.run_id);
    epochs.Add(c.lease_epoch);
    train_bpc.Add(s.final_train_bpc());
    val_bpc.Add(s.final_val_bpc());
    tokens.Add(static_cast<int64_t>(s.tokens()));
    steps.Add(static_cast<int64_t>(s.steps()));
    measured_m.Add(s.measured_flops_per_token());
    wall_seconds.Add(absl::ToDoubleSeconds(absl::Seconds(s.wall_time().seconds()) +
                                           absl::Nanoseconds(s.wall_time().nanos())));
    peak_memory.Add(static_cast<int64_t>(s.peak_memory_bytes()));
    tokens_per_second.Add(s.tokens_per_second());
    checkpoint_step.AddOptional(pg::CheckpointStep(c.checkpoint));
    c.checkpoint ? checkpoint_uri.AddQuoted(c.checkpoint->uri()) : checkpoint_uri.AddNull();
    s.final_eval_bpc().empty() ? final_eval_bpc.AddNull()
                               : final_eval_bpc.AddQuoted(pg::EvalBpcJson(s.final_eval_bpc()));
    s.dataset_digest().empty() ? dataset_digest.AddNull()
                               : dataset_digest.AddQuoted(s.dataset_digest());
    // 0 is "not reported" (an older engine, a fake): stored as NULL, read back as 0.
    for (auto [bytes, column] :
         {std::pair{s.peak_device_memory_bytes(), &peak_device_memory},
          std::pair{s.estimated_device_memory_bytes(), &estimated_device_memory}}) {
      bytes > 0 ? column->Add(static_cast<int64_t>(bytes)) : column->AddNull();
    }
  }
  absl::Status status = pg::WithSingleStatement(pool, [&](pqxx::nontransaction& tx) {
    const pqxx::result rows = tx.exec_prepared(
        "complete_runs_success", runs.Take(), epochs.Take(), train_bpc.Take(), val_bpc.Take(),
        tokens.Take(), steps.Take(), measured_m.Take(), wall_seconds.Take(), peak_memory.Take(),
        tokens_per_second.Take(), checkpoint_step.Take(), checkpoint_uri.Take(),
        final_eval_bpc.Take(), dataset_digest.Take(), peak_device_memory.Take(),
        estimated_device_memory.Take());
    for (const pqxx::row& row : rows) {
      const size_t i = members.at(row["request"].as<size_t>() - 1);
      const Completion& c = *completions[i];
      const std::string outcome = row["outcome"].c_str();
      if (outcome == "not_found") {
        results[i] = pg::NotFoundError("run", c.run_id);
      } else if (outcome == "stale") {
        // The statement found another epoch current (row: the run as it is); never OK here.
        results[i] = CheckLeaseEpoch(c.run_id, c.lease_epoch, row["lease_epoch"].as<int64_t>());
      } else {
        CompletionResult result;
        result.run = pg::RunFromRow(row);
        if (outcome == "invalid") result.invalid_summary = row["reason"].c_str();
        results[i] = std::move(result);
      }
    }
    return absl::OkStatus();
  });
  if (!status.ok()) {
    for (const size_t i : members) results[i] = status;
  }
}

}  // namespace

std::vector<absl::StatusOr<std::optional<LeasedRun>>> PostgresRunStore::LeaseNextRuns(
    const std::vector<const LeaseRequest*>& requests) {
  std::vector<absl::StatusOr<std::optional<LeasedRun>>> results(requests.size(),
                                                                std::optional<LeasedRun>());
  // Groups in the order of their first request, so that the earlier requests choose first.
  std::map<OfferKey, size_t> group_of;
  std::vector<std::pair<OfferKey, std::vector<size_t>>> groups;
  for (size_t i = 0; i < requests.size(); ++i) {
    // An id PostgreSQL would refuse as uuid is refused here, so it cannot fail a whole batch.
    if (!IsUuid(requests[i]->worker_id)) {
      results[i] = pg::NotFoundError("worker", requests[i]->worker_id, "is not registered");
      continue;
    }
    // A retry is looked up on its own first (rare: only after a lost answer); the requests
    // without the flag cost what they always did.
    if (requests[i]->retry && !requests[i]->request_id.empty()) {
      results[i] = AnswerAgain(*pool_, *requests[i]);
      if (!results[i].ok() || results[i]->has_value()) continue;
    }
    OfferKey key = KeyOf(*requests[i]);
    const auto [it, added] = group_of.try_emplace(key, groups.size());
    if (added) groups.emplace_back(std::move(key), std::vector<size_t>());
    groups[it->second].second.push_back(i);
  }
  for (const auto& [key, members] : groups) LeaseGroup(*pool_, key, requests, members, results);
  return results;
}

std::vector<absl::StatusOr<CompletionResult>> PostgresRunStore::CompleteRuns(
    const std::vector<const Completion*>& completions) {
  std::vector<absl::StatusOr<CompletionResult>> results(completions.size(),
                                                        absl::InternalError("not completed"));
  std::vector<size_t> successes;
  for (size_t i = 0; i < completions.size(); ++i) {
    const Completion& completion = *completions[i];
    if (!IsUuid(completion.run_id)) {
      results[i] = pg::NotFoundError("run", completion.run_id);
    } else if (completion.success) {
      successes.push_back(i);
    } else {
      results[i] = CompleteRunFailed(completion);
    }
  }
  if (!successes.empty()) CompleteSuccesses(*pool_, completions, successes, results);
  return results;
}

}  // namespace parity::server
