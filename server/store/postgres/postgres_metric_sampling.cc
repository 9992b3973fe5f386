// PostgresRunStore::SampleMetrics, the web dashboard's curves (server/api/dashboard_api.h). Kept
// apart from the worker-facing statements of pg_statements.cc: they run unprepared, only when a
// page asks.
#include "server/store/postgres/pg_rows.h"
#include "server/store/postgres/pg_support.h"
#include "server/store/postgres/postgres_run_store.h"

namespace parity::server {
namespace {

// The sample is chosen by step, with one index lookup per wanted point (the metrics primary key
// is (run_id, step)): a 100k-point run costs the same as a 1k-point one. `picked` is each
// target step's first point at or after it, plus the last point; shares are stripped from the
// expert load in SQL so they never leave the database.
constexpr const char* kSampleMetricsSql = R"sql(
WITH target AS (
  SELECT run_id, latest_step, (latest_step + $2::bigint) / $2::bigint AS stride
  FROM runs WHERE run_id = ANY($1::uuid[])),
picked AS (
  SELECT t.run_id, m.step FROM target t
  CROSS JOIN LATERAL generate_series(0::bigint, t.latest_step, t.stride) AS s(from_step)
  CROSS JOIN LATERAL (
    SELECT step FROM metrics
    WHERE run_id = t.run_id AND step >= s.from_step AND (NOT $3::boolean OR val_bpc IS NOT NULL)
    ORDER BY step LIMIT 1) m
  UNION
  SELECT t.run_id, m.step FROM target t
  CROSS JOIN LATERAL (
    SELECT step FROM metrics
    WHERE run_id = t.run_id AND (NOT $3::boolean OR val_bpc IS NOT NULL)
    ORDER BY step DESC LIMIT 1) m)
SELECT m.run_id::text AS run_id, m.step, m.attempt, m.tokens, m.unique_tokens, m.epoch,
       m.train_bpc, m.val_bpc, m.learning_rate, m.grad_norm, m.aux_loss, m.z_loss,
       m.tokens_per_second, m.flops_per_second, m.flops,
       CASE WHEN $4::boolean AND m.expert_load IS NOT NULL THEN
         (SELECT jsonb_agg(e.load - 'shares' ORDER BY e.position)
          FROM jsonb_array_elements(m.expert_load) WITH ORDINALITY AS e(load, position))::text
       END AS expert_load, m.eval_bpc::text AS eval_bpc,
       (extract(epoch FROM m.logged_at) * 1000000)::bigint AS logged_us
FROM picked p JOIN metrics m ON m.run_id = p.run_id AND m.step = p.step
ORDER BY m.run_id, m.step
)sql";

}  // namespace

absl::StatusOr<std::vector<v1::MetricPoint>> PostgresRunStore::SampleMetrics(
    const std::vector<std::string>& run_ids, const MetricSampling& sampling) {
  std::vector<v1::MetricPoint> points;
  if (run_ids.empty()) return points;
  const int64_t max_points = std::max(1, sampling.max_points_per_run);
  return pg::WithSingleStatement(
      *pool_, [&](pqxx::nontransaction& tx) -> absl::StatusOr<std::vector<v1::MetricPoint>> {
        const pqxx::result rows =
            tx.exec_params(kSampleMetricsSql, pg::TextArrayLiteral(run_ids), max_points,
                           sampling.validation_only, sampling.expert_load_summaries);
        points.reserve(rows.size());
        for (const auto& row : rows) {
          points.push_back(pg::MetricFromRow(row));
          points.back().set_run_id(row["run_id"].c_str());
        }
        return points;
      });
}

}  // namespace parity::server
