// PostgresRunStore's SweepCatalog (sweeps, runs) and its ReadModels' results, event and metric
// reads and a run's gang (GetRunGang). The RunQueue is in postgres_run_queue.cc and
// postgres_run_queue_batches.cc.
#include "server/store/postgres/postgres_run_store.h"

#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "core/proto_time.h"
#include "core/spec_defaults.h"
#include "core/status_macros.h"
#include "server/store/deterministic_bytes.h"
#include "server/store/postgres/pg_rows.h"
#include "server/store/postgres/pg_statements.h"
#include "server/store/postgres/pg_support.h"
#include "server/store/results_paging.h"
#include "server/store/store_errors.h"
#include "server/store/uuid.h"

namespace parity::server {
namespace {

using pg::WithTransaction;

std::optional<std::string> NullIfEmpty(const std::string& text) {
  if (text.empty()) return std::nullopt;
  return text;
}

absl::Status NotFound(absl::string_view kind, absl::string_view id) {
  return pg::NotFoundError(kind, id);
}

}  // namespace

PostgresRunStore::PostgresRunStore(PostgresRunStoreOptions options)
    : options_(std::move(options)),
      pool_(std::make_unique<PgConnectionPool>(
          options_.database_url, options_.pool_size,
          [timeout_ms = absl::ToInt64Milliseconds(options_.statement_timeout)](
              pqxx::connection& connection) {
            pqxx::nontransaction tx(connection);
            tx.exec_params(pg::Statement("set_session_statement_timeout"),
                           std::to_string(timeout_ms));
            tx.commit();
            pg::PrepareStatements(connection);
          })) {}

PostgresRunStore::~PostgresRunStore() = default;

absl::StatusOr<CreatedSweep> PostgresRunStore::CreateSweep(const NewSweep& sweep) {
  const std::string spec_bytes = DeterministicBytes(sweep.spec);
  return WithTransaction(*pool_, [&](pqxx::work& tx) -> absl::StatusOr<CreatedSweep> {
    const pqxx::result inserted = tx.exec_prepared(
        "insert_sweep", sweep.spec.name(), pg::JsonOf(sweep.spec), pg::Bytes(spec_bytes),
        NullIfEmpty(sweep.idempotency_key), sweep.owner, sweep.spec.priority());
    if (inserted.empty()) {
      // The key is taken. ON CONFLICT waited for the other submission to commit, so the row is
      // visible to this (read committed) statement.
      const pqxx::result existing =
          tx.exec_prepared("sweep_by_key", sweep.idempotency_key, sweep.owner);
      if (existing.empty()) return absl::AbortedError("idempotency key race; retry");
      if (pg::BytesOf(existing[0][1]) != spec_bytes) {
        return IdempotencyKeyReusedError(sweep.owner, sweep.idempotency_key,
                                         existing[0][0].c_str());
      }
      CreatedSweep created;
      created.deduplicated = true;
      const std::string sweep_id = existing[0][0].c_str();
      created.sweep = pg::SweepFromRow(tx.exec_prepared("get_sweep", sweep_id)[0]);
      for (const auto& row : tx.exec_prepared("run_ids_of_sweep", sweep_id)) {
        created.run_ids.push_back(row[0].c_str());
      }
      return created;
    }
    const std::string sweep_id = inserted[0][0].c_str();
    const uint32_t max_attempts =
        sweep.spec.max_attempts() == 0 ? core::kDefaultMaxAttempts : sweep.spec.max_attempts();
    CreatedSweep created;
    created.run_ids.reserve(sweep.runs.size());
    int ordinal = 0;
    for (const v1::RunSpec& run : sweep.runs) {
      const v1::Accounting& a = run.accounting();
      const v1::ModelSpec& m = run.model();
      const v1::ResourceRequest& res = run.resources();
      const pqxx::result row = tx.exec_prepared(
          "insert_run", sweep_id, ordinal++, run.name(), pg::JsonOf(run),
          pg::Bytes(DeterministicBytes(run)), pg::RoleText(run.role()), pg::LayoutText(m),
          static_cast<int64_t>(a.params()), static_cast<int64_t>(a.active_params()),
          a.activation_rate(), a.flops_per_token(), a.compute_flops(),
          static_cast<int64_t>(a.tokens()), static_cast<int64_t>(a.unique_tokens()), a.epochs(),
          m.d_model(), m.num_layers(), m.moe().num_experts(), m.moe().top_k(),
          m.moe().expert_hidden(), run.compute_budget(), run.compute_multiple(), run.data_variant(),
          static_cast<int64_t>(run.training().seed()), run.predicted_efficiency_leverage(),
          std::max<uint32_t>(res.cpu_threads(), 1), res.gpus(),
          static_cast<int64_t>(res.memory_bytes()), static_cast<int64_t>(res.gpu_memory_bytes()),
          sweep.spec.priority(), max_attempts);
      created.run_ids.push_back(row[0][0].c_str());
    }
    tx.exec_prepared("insert_creation_events", sweep_id);
    created.sweep = pg::SweepFromRow(tx.exec_prepared("get_sweep", sweep_id)[0]);
    return created;
  });
}

absl::StatusOr<v1::Sweep> PostgresRunStore::GetSweep(const std::string& sweep_id) {
  return WithTransaction(*pool_, [&](pqxx::work& tx) -> absl::StatusOr<v1::Sweep> {
    const pqxx::result rows = tx.exec_prepared("get_sweep", sweep_id);
    if (rows.empty()) return NotFound("sweep", sweep_id);
    return pg::SweepFromRow(rows[0]);
  });
}

absl::StatusOr<Page<v1::Sweep>> PostgresRunStore::ListSweeps(v1::SweepState state,
                                                             const PageRequest& page) {
  std::string after_time, after_id;
  if (!page.page_token.empty()) {
    PARITY_ASSIGN_OR_RETURN(const std::string text, DecodePageToken(page.page_token));
    std::vector<std::string> parts = absl::StrSplit(text, '|');
    if (parts.size() != 2 || parts[0].empty()) return BadPageToken();
    after_time = parts[0];
    after_id = parts[1];
  }
  const std::string state_text =
      state == v1::SWEEP_STATE_UNSPECIFIED ? "" : pg::SweepStateText(state);
  return WithTransaction(*pool_, [&](pqxx::work& tx) -> absl::StatusOr<Page<v1::Sweep>> {
    const pqxx::result rows =
        tx.exec_prepared("list_sweeps", state_text, after_time, NullIfEmpty(after_id),
                         static_cast<int64_t>(page.page_size) + 1);
    Page<v1::Sweep> result;
    for (pqxx::result::size_type i = 0; i < rows.size() && i < page.page_size; ++i) {
      result.items.push_back(pg::SweepFromRow(rows[i]));
      if (i + 1 == page.page_size && rows.size() > page.page_size) {
        result.next_page_token = EncodePageToken(
            absl::StrCat(rows[i]["created_text"].c_str(), "|", rows[i]["sweep_id"].c_str()));
      }
    }
    return result;
  });
}

absl::StatusOr<CancelResult> PostgresRunStore::CancelSweep(const std::string& sweep_id,
                                                           const std::string& reason) {
  return WithTransaction(*pool_, [&](pqxx::work& tx) -> absl::StatusOr<CancelResult> {
    if (tx.exec_prepared("lock_sweep", sweep_id).empty()) return NotFound("sweep", sweep_id);
    tx.exec_prepared("mark_sweep_cancelled", sweep_id);
    CancelResult result;
    const std::string why = reason.empty() ? "cancelled" : reason;
    result.cancelled_runs += tx.exec_prepared("cancel_pending_runs", sweep_id, why).affected_rows();
    result.cancelled_runs += tx.exec_prepared("flag_live_runs_cancelled", sweep_id).affected_rows();
    tx.exec_prepared("refresh_sweep_state", sweep_id);
    result.sweep = pg::SweepFromRow(tx.exec_prepared("get_sweep", sweep_id)[0]);
    return result;
  });
}

absl::StatusOr<uint32_t> PostgresRunStore::DeleteSweep(const std::string& sweep_id) {
  return WithTransaction(*pool_, [&](pqxx::work& tx) -> absl::StatusOr<uint32_t> {
    if (tx.exec_prepared("lock_sweep", sweep_id).empty()) return NotFound("sweep", sweep_id);
    // The runs' count is read in the statement's snapshot, before the cascade.
    const pqxx::row gone = tx.exec_prepared("delete_ended_sweep", sweep_id)[0];
    if (gone[0].as<int64_t>() == 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "sweep ", sweep_id, " has runs that have not ended; cancel it and let them stop first"));
    }
    return gone[1].as<uint32_t>();
  });
}

absl::StatusOr<v1::Run> PostgresRunStore::GetRun(const std::string& run_id) {
  return WithTransaction(*pool_, [&](pqxx::work& tx) -> absl::StatusOr<v1::Run> {
    const pqxx::result rows = tx.exec_prepared("get_run", run_id);
    if (rows.empty()) return NotFound("run", run_id);
    return pg::RunFromRow(rows[0]);
  });
}

absl::StatusOr<Page<v1::Run>> PostgresRunStore::ListRuns(const std::string& sweep_id,
                                                         const std::vector<v1::RunState>& states,
                                                         const PageRequest& page) {
  int64_t after_ordinal = -1;
  if (!page.page_token.empty()) {
    PARITY_ASSIGN_OR_RETURN(const std::string text, DecodePageToken(page.page_token));
    if (!absl::SimpleAtoi(text, &after_ordinal)) return BadPageToken();
  }
  std::vector<std::string> state_texts;
  for (v1::RunState state : states) state_texts.push_back(pg::RunStateText(state));
  return WithTransaction(*pool_, [&](pqxx::work& tx) -> absl::StatusOr<Page<v1::Run>> {
    if (tx.exec_prepared("sweep_exists", sweep_id).empty()) return NotFound("sweep", sweep_id);
    const pqxx::result rows =
        tx.exec_prepared("list_runs", sweep_id, pg::TextArrayLiteral(state_texts), after_ordinal,
                         static_cast<int64_t>(page.page_size) + 1);
    Page<v1::Run> result;
    for (pqxx::result::size_type i = 0; i < rows.size() && i < page.page_size; ++i) {
      result.items.push_back(pg::RunFromRow(rows[i]));
      if (i + 1 == page.page_size && rows.size() > page.page_size) {
        result.next_page_token = EncodePageToken(rows[i]["ordinal"].c_str());
      }
    }
    return result;
  });
}

absl::StatusOr<Page<RunStateRow>> PostgresRunStore::ListRunStates(const std::string& sweep_id,
                                                                  const PageRequest& page) {
  int64_t after_ordinal = -1;
  if (!page.page_token.empty()) {
    PARITY_ASSIGN_OR_RETURN(const std::string text, DecodePageToken(page.page_token));
    if (!absl::SimpleAtoi(text, &after_ordinal)) return BadPageToken();
  }
  return WithTransaction(*pool_, [&](pqxx::work& tx) -> absl::StatusOr<Page<RunStateRow>> {
    if (tx.exec_prepared("sweep_exists", sweep_id).empty()) return NotFound("sweep", sweep_id);
    const pqxx::result rows = tx.exec_prepared("list_run_states", sweep_id, after_ordinal,
                                               static_cast<int64_t>(page.page_size) + 1);
    Page<RunStateRow> result;
    for (pqxx::result::size_type i = 0; i < rows.size() && i < page.page_size; ++i) {
      result.items.push_back(RunStateRow{.run_id = rows[i]["run_id"].c_str(),
                                         .state = pg::RunStateFromText(rows[i]["state"].c_str()),
                                         .attempt = rows[i]["attempt"].as<uint32_t>(),
                                         .latest_step = rows[i]["latest_step"].as<uint64_t>()});
      if (i + 1 == page.page_size && rows.size() > page.page_size) {
        result.next_page_token = EncodePageToken(rows[i]["ordinal"].c_str());
      }
    }
    return result;
  });
}

absl::StatusOr<Page<v1::ResultRow>> PostgresRunStore::QueryResults(const ResultsQuery& query) {
  // Keyset pages (results_paging.h): grid order by (sweep, ordinal), any other order by
  // (column, run id) with the column as it was at the walk's start where runs change it. The
  // column is one of kResultsOrderColumns (checked), never pasted from the request unchecked.
  PARITY_ASSIGN_OR_RETURN(const ResultsOrder order, ParseResultsOrder(query.order_by));
  PARITY_ASSIGN_OR_RETURN(const std::optional<ResultsCursor> cursor,
                          DecodeResultsCursor(query, order));
  std::vector<std::string> state_texts;
  for (v1::RunState state : query.states) state_texts.push_back(pg::RunStateText(state));
  constexpr char kNoRun[] = "00000000-0000-0000-0000-000000000000";
  std::string name = "query_results_by_column";
  if (order.column == "state") name = "query_results_by_state";
  if (order.column == "delta_bpc_vs_dense") name = "query_results_by_delta";
  if (order.mutable_key() && name == "query_results_by_column") name = "query_results_by_outcome";
  const std::string sql =
      order.grid() ? pg::Statement("query_results_in_grid_order")
                   : absl::StrReplaceAll(pg::Statement(name),
                                         {{"{{column}}", order.column},
                                          {"{{after}}", order.descending ? "<" : ">"},
                                          {"{{direction}}", order.descending ? "DESC" : "ASC"}});
  const int64_t limit = static_cast<int64_t>(query.page.page_size) + 1;
  return WithTransaction(*pool_, [&](pqxx::work& tx) -> absl::StatusOr<Page<v1::ResultRow>> {
    const pqxx::result rows =
        order.grid() ? tx.exec_params(sql, query.sweep_id, pg::TextArrayLiteral(state_texts),
                                      query.layout, query.min_activation_rate,
                                      query.max_activation_rate, limit, cursor.has_value(),
                                      cursor ? cursor->key : kNoRun, cursor ? cursor->tie : "0")
                     : tx.exec_params(
                           sql, query.sweep_id, pg::TextArrayLiteral(state_texts), query.layout,
                           query.min_activation_rate, query.max_activation_rate, limit,
                           cursor.has_value(), cursor && cursor->key_null,
                           cursor && !cursor->key_null ? std::optional(cursor->key) : std::nullopt,
                           cursor ? cursor->tie : kNoRun,
                           cursor ? std::optional(cursor->as_of) : std::nullopt);
    Page<v1::ResultRow> result;
    for (pqxx::result::size_type i = 0; i < rows.size() && i < query.page.page_size; ++i) {
      result.items.push_back(pg::ResultFromRow(rows[i]));
      if (i + 1 < query.page.page_size || rows.size() <= query.page.page_size) continue;
      ResultsCursor next;
      next.as_of = rows[i]["page_as_of"].as<int64_t>();
      if (order.grid()) {
        next.key = rows[i]["sweep_id"].c_str();
        next.tie = rows[i]["ordinal"].c_str();
      } else {
        next.key_null = rows[i]["page_key"].is_null();
        next.key = next.key_null ? "" : rows[i]["page_key"].c_str();
        next.tie = rows[i]["run_id"].c_str();
      }
      result.next_page_token = EncodeResultsCursor(query, order, next);
    }
    return result;
  });
}

absl::StatusOr<SweepEventPage> PostgresRunStore::ListSweepEvents(const std::string& sweep_id,
                                                                 uint64_t horizon) {
  return WithTransaction(*pool_, [&](pqxx::work& tx) -> absl::StatusOr<SweepEventPage> {
    SweepEventPage page;
    const std::string now = tx.exec_prepared1("event_horizon")[0].c_str();
    if (!absl::SimpleAtoi(now, &page.next_horizon)) return absl::InternalError("bad horizon");
    if (horizon == 0) return page;
    for (const auto& row : tx.exec_prepared("sweep_events", sweep_id, absl::StrCat(horizon), now)) {
      page.events.push_back(pg::EventFromRow(row));
    }
    return page;
  });
}

absl::StatusOr<std::vector<RunEvent>> PostgresRunStore::ListRunEvents(const std::string& run_id,
                                                                      int64_t after_event_id,
                                                                      int limit) {
  return WithTransaction(*pool_, [&](pqxx::work& tx) -> absl::StatusOr<std::vector<RunEvent>> {
    std::vector<RunEvent> events;
    for (const auto& row : tx.exec_prepared("run_events", run_id, after_event_id, limit)) {
      events.push_back(pg::EventFromRow(row));
    }
    return events;
  });
}

absl::StatusOr<std::vector<v1::MetricPoint>> PostgresRunStore::ListMetrics(
    const std::string& run_id, uint64_t from_step, int limit) {
  return WithTransaction(
      *pool_, [&](pqxx::work& tx) -> absl::StatusOr<std::vector<v1::MetricPoint>> {
        std::vector<v1::MetricPoint> points;
        for (const auto& row :
             tx.exec_prepared("list_metrics", run_id, static_cast<int64_t>(from_step), limit)) {
          points.push_back(pg::MetricFromRow(row));
          points.back().set_run_id(run_id);
        }
        return points;
      });
}

absl::StatusOr<std::optional<v1::RunGang>> PostgresRunStore::GetRunGang(const std::string& run_id) {
  if (!IsUuid(run_id)) return std::nullopt;
  return WithTransaction(*pool_, [&](pqxx::work& tx) -> absl::StatusOr<std::optional<v1::RunGang>> {
    const pqxx::result rows = tx.exec_prepared("run_gang", run_id);
    if (rows.empty()) return std::nullopt;
    const auto time_of = [](const pqxx::field& micros) {
      return ToProtoTime(pg::TimeFromMicros(micros.as<int64_t>()));
    };
    v1::RunGang gang;
    gang.set_world_size(rows[0]["world_size"].as<uint32_t>());
    gang.set_lease_epoch(rows[0]["lease_epoch"].as<int64_t>());
    *gang.mutable_placed_time() = time_of(rows[0]["placed_us"]);
    *gang.mutable_rendezvous_deadline() = time_of(rows[0]["deadline_us"]);
    gang.set_released(!rows[0]["released_us"].is_null());
    if (gang.released()) *gang.mutable_released_time() = time_of(rows[0]["released_us"]);
    for (const pqxx::row& row : rows) {
      v1::RunGangRank& rank = *gang.add_ranks();
      rank.set_rank(row["rank"].as<uint32_t>());
      rank.set_worker_id(row["worker_id"].c_str());
      rank.set_hostname(row["hostname"].c_str());
      for (uint32_t index : pg::ParseIntArray(row["devices"].c_str())) {
        rank.add_device_indices(index);
      }
      rank.set_checked_in(!row["checked_in_us"].is_null());
      if (rank.checked_in()) *rank.mutable_check_in_time() = time_of(row["checked_in_us"]);
    }
    return gang;
  });
}

}  // namespace parity::server
