// PostgresRunStore::CountRunsByState, the read-only counts behind the metrics endpoint. Kept apart
// from the request paths because it serves scrapes, not workers or clients: a statement timeout
// keeps a slow database from holding a scrape (and a pooled connection) for long.
#include "server/store/postgres/pg_statements.h"
#include "server/store/postgres/pg_support.h"
#include "server/store/postgres/postgres_run_store.h"

namespace parity::server {

absl::StatusOr<RunCounts> PostgresRunStore::CountRunsByState(const RunCountsQuery& query) {
  if (query.max_sweeps < 0) return absl::InvalidArgumentError("max_sweeps must not be negative");
  return pg::WithTransaction(*pool_, [&](pqxx::work& tx) -> absl::StatusOr<RunCounts> {
    tx.exec_params(pg::Statement("set_transaction_statement_timeout"), "5000");
    RunCounts counts;
    for (const auto& row : tx.exec_prepared("count_runs_by_state", query.max_sweeps)) {
      counts.by_sweep.push_back({row["sweep_id"].c_str(), row["sweep_name"].c_str(),
                                 pg::RunStateFromText(row["state"].c_str()),
                                 row["runs"].as<int64_t>()});
    }
    const pqxx::row totals = tx.exec_prepared1("count_queue_and_workers",
                                               absl::ToDoubleSeconds(query.live_worker_window));
    counts.ready_to_lease = totals["ready"].as<int64_t>();
    counts.live_workers = totals["live_workers"].as<int64_t>();
    return counts;
  });
}

}  // namespace parity::server
