// PostgresRunStore::SampleMetrics, the web dashboard's curves (server/api/dashboard_api.h): the
// statement sample_metrics (server/sql/statements/read_models.sql), run unprepared, only when a
// page asks.
#include "server/store/postgres/pg_rows.h"
#include "server/store/postgres/pg_statements.h"
#include "server/store/postgres/pg_support.h"
#include "server/store/postgres/postgres_run_store.h"

namespace parity::server {
absl::StatusOr<std::vector<v1::MetricPoint>> PostgresRunStore::SampleMetrics(
    const std::vector<std::string>& run_ids, const MetricSampling& sampling) {
  std::vector<v1::MetricPoint> points;
  if (run_ids.empty()) return points;
  const int64_t max_points = std::max(1, sampling.max_points_per_run);
  return pg::WithSingleStatement(
      *pool_, [&](pqxx::nontransaction& tx) -> absl::StatusOr<std::vector<v1::MetricPoint>> {
        const pqxx::result rows =
            tx.exec_params(pg::Statement("sample_metrics"), pg::TextArrayLiteral(run_ids),
                           max_points, sampling.validation_only, sampling.expert_load_summaries);
        points.reserve(rows.size());
        for (const auto& row : rows) {
          points.push_back(pg::MetricFromRow(row));
          points.back().set_run_id(row["run_id"].c_str());
        }
        return points;
      });
}

}  // namespace parity::server
