// MemoryRunStore's ReadModels: what PostgreSQL computes for watchers and dashboards, from the
// rows in memory. Results are the results view's rows (server/sql/results.view.sql: ΔBPC against
// the first SUCCEEDED 1C dense baseline in grid order, per evaluation set too) filtered, ordered
// and paged as PostgresRunStore::QueryResults does (order_by checked against
// kResultsOrderColumns, NULLs last, keyset page tokens of results_paging.h, keys that change
// ordered as of the walk's start: here an event-id watermark); events come with a commit watermark
// (event ids: one mutex orders commits); samples follow the SQL of postgres_metric_sampling.cc; a
// run's gang is read as run_gang (statements/read_models.sql) reads it.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "core/proto_time.h"
#include "server/store/memory/memory_run_store.h"
#include "server/store/results_paging.h"

namespace parity::server {
namespace {

std::string Suffix(const std::string& name, size_t prefix) { return name.substr(prefix); }
std::string StateText(v1::RunState state) {
  return Suffix(v1::RunState_Name(state), sizeof("RUN_STATE_") - 1);
}
std::string RoleText(v1::RunRole role) {
  return Suffix(v1::RunRole_Name(role), sizeof("RUN_ROLE_") - 1);
}

// Whether `baseline` is the 1C dense baseline of `run`'s group: its own group (the columns), or
// one it also serves (RunSpec.also_serves). The view matches the latter by JSON containment on
// the spec's proto JSON, which leaves out empty strings: an empty label never matches there.
bool ServesAsBaseline(const v1::RunSpec& baseline, const v1::RunSpec& run) {
  if (baseline.training().seed() != run.training().seed()) return false;
  if (baseline.role() == v1::RUN_ROLE_DENSE_BASELINE && baseline.compute_multiple() == 1 &&
      baseline.compute_budget() == run.compute_budget() &&
      baseline.data_variant() == run.data_variant()) {
    return true;
  }
  if (run.compute_budget().empty() || run.data_variant().empty()) return false;
  return std::any_of(
      baseline.also_serves().begin(), baseline.also_serves().end(), [&](const v1::GroupRef& group) {
        return group.role() == v1::RUN_ROLE_DENSE_BASELINE && group.compute_multiple() == 1 &&
               group.compute_budget() == run.compute_budget() &&
               group.data_variant() == run.data_variant();
      });
}

v1::ResultRow PlannedRow(const v1::Run& run) {
  const v1::RunSpec& spec = run.spec();
  const v1::Accounting& a = spec.accounting();
  v1::ResultRow row;
  row.set_run_id(run.run_id());
  row.set_sweep_id(run.sweep_id());
  row.set_name(spec.name());
  row.set_role(spec.role());
  row.set_layout(core::ModelLayoutName(spec.model()));
  row.set_state(run.state());
  row.set_d_model(spec.model().d_model());
  row.set_num_layers(spec.model().num_layers());
  row.set_num_experts(spec.model().moe().num_experts());
  row.set_top_k(spec.model().moe().top_k());
  row.set_expert_hidden(spec.model().moe().expert_hidden());
  row.set_params(a.params());
  row.set_active_params(a.active_params());
  row.set_activation_rate(a.activation_rate());
  row.set_flops_per_token(a.flops_per_token());
  row.set_compute_flops(a.compute_flops());
  row.set_tokens(a.tokens());
  row.set_unique_tokens(a.unique_tokens());
  row.set_epochs(a.epochs());
  row.set_compute_budget(spec.compute_budget());
  row.set_compute_multiple(spec.compute_multiple());
  row.set_data_variant(spec.data_variant());
  row.set_predicted_efficiency_leverage(spec.predicted_efficiency_leverage());
  row.set_seed(spec.training().seed());
  return row;
}

// One value of an order_by column as the view holds it: NULL, a number or text (bytewise).
struct OrderKey {
  bool null = false;
  bool is_text = false;
  double number = 0;
  std::string text;
};
OrderKey Text(std::string text) { return {false, true, 0, std::move(text)}; }
OrderKey Number(double number, bool null = false) { return {null, false, number, ""}; }

// PostgreSQL's order of float8: NaN equals NaN and sorts above every number.
int CompareNumbers(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) - std::isnan(b);
  return a < b ? -1 : (a > b ? 1 : 0);
}

// Each column of kResultsOrderColumns as the view holds it; NULL where the view's is.
using Row = MemoryResultRow;
const std::map<std::string_view, OrderKey (*)(const Row&)>& OrderKeys() {
  static const auto* keys = new std::map<std::string_view, OrderKey (*)(const Row&)>{
      {"name", [](const Row& r) { return Text(r.row.name()); }},
      {"role", [](const Row& r) { return Text(RoleText(r.row.role())); }},
      {"layout", [](const Row& r) { return Text(r.row.layout()); }},
      {"state", [](const Row& r) { return Text(StateText(r.row.state())); }},
      {"d_model", [](const Row& r) { return Number(r.row.d_model()); }},
      {"num_layers", [](const Row& r) { return Number(r.row.num_layers()); }},
      {"num_experts", [](const Row& r) { return Number(r.row.num_experts()); }},
      {"top_k", [](const Row& r) { return Number(r.row.top_k()); }},
      {"expert_hidden", [](const Row& r) { return Number(r.row.expert_hidden()); }},
      {"params", [](const Row& r) { return Number(static_cast<double>(r.row.params())); }},
      {"active_params",
       [](const Row& r) { return Number(static_cast<double>(r.row.active_params())); }},
      {"activation_rate", [](const Row& r) { return Number(r.row.activation_rate()); }},
      {"flops_per_token", [](const Row& r) { return Number(r.row.flops_per_token()); }},
      {"measured_flops_per_token",
       [](const Row& r) { return Number(r.row.measured_flops_per_token(), !r.finished); }},
      {"compute_flops", [](const Row& r) { return Number(r.row.compute_flops()); }},
      {"tokens", [](const Row& r) { return Number(static_cast<double>(r.row.tokens())); }},
      {"unique_tokens",
       [](const Row& r) { return Number(static_cast<double>(r.row.unique_tokens())); }},
      {"epochs", [](const Row& r) { return Number(r.row.epochs()); }},
      {"final_val_bpc", [](const Row& r) { return Number(r.row.final_val_bpc(), !r.finished); }},
      {"wall_seconds", [](const Row& r) { return Number(r.row.wall_seconds(), !r.finished); }},
      {"compute_budget", [](const Row& r) { return Text(r.row.compute_budget()); }},
      {"compute_multiple", [](const Row& r) { return Number(r.row.compute_multiple()); }},
      {"data_variant", [](const Row& r) { return Text(r.row.data_variant()); }},
      {"predicted_efficiency_leverage",
       [](const Row& r) { return Number(r.row.predicted_efficiency_leverage()); }},
      {"delta_bpc_vs_dense",
       [](const Row& r) { return Number(r.row.delta_bpc_vs_dense(), !r.has_delta); }},
      // A bigint column: a seed past 2^63 is negative there.
      {"seed",
       [](const Row& r) {
         return Number(static_cast<double>(static_cast<int64_t>(r.row.seed())));
       }},
  };
  return *keys;
}

// ORDER BY column [DESC] NULLS LAST: -1, 0 or 1 for a before, tied with or after b.
int CompareKeys(const OrderKey& a, const OrderKey& b, bool descending) {
  if (a.null || b.null) return static_cast<int>(a.null) - static_cast<int>(b.null);
  const int order = a.is_text ? a.text.compare(b.text) : CompareNumbers(a.number, b.number);
  const int sign = order < 0 ? -1 : (order > 0 ? 1 : 0);
  return descending ? -sign : sign;
}

// Whether `row` passes the query's filter (the view's WHERE).
bool Matches(const ResultsQuery& query, const v1::ResultRow& row) {
  if (!query.states.empty() &&
      std::find(query.states.begin(), query.states.end(), row.state()) == query.states.end()) {
    return false;
  }
  if (!query.layout.empty() && row.layout() != query.layout) return false;
  if (query.min_activation_rate != 0 && !(row.activation_rate() >= query.min_activation_rate)) {
    return false;
  }
  return query.max_activation_rate == 0 || row.activation_rate() <= query.max_activation_rate;
}

// The row's key in `order` as of a walk's start, given each run's state then (`state_as_of`,
// filled for keys runs change): a success's columns and ΔBPC are NULL unless the run (and its
// baseline) had succeeded by then. Unused in grid order.
OrderKey KeyAsOf(const ResultsOrder& order, const MemoryResultRow& record,
                 const std::map<std::string, v1::RunState>& state_as_of) {
  auto succeeded_then = [&](const std::string& run_id) {
    auto it = state_as_of.find(run_id);
    return it != state_as_of.end() && it->second == v1::RUN_STATE_SUCCEEDED;
  };
  const v1::ResultRow& row = record.row;
  if (order.grid()) return OrderKey();
  if (order.column == "state") {
    auto then = state_as_of.find(row.run_id());
    return then == state_as_of.end() ? Number(0, /*null=*/true) : Text(StateText(then->second));
  }
  if (order.column == "delta_bpc_vs_dense") {
    return Number(row.delta_bpc_vs_dense(), !record.has_delta || !succeeded_then(row.run_id()) ||
                                                !succeeded_then(record.baseline_run_id));
  }
  OrderKey key = OrderKeys().at(order.column)(record);
  if (order.mutable_key() && !succeeded_then(row.run_id())) key.null = true;
  return key;
}

}  // namespace

std::vector<MemoryResultRow> MemoryRunStore::ResultsOfSweep(const SweepRow& sweep) const {
  std::vector<const RunRow*> succeeded;  // the baselines' candidates, in grid order
  for (const std::string& run_id : sweep.run_ids) {
    const RunRow& run = runs_.at(run_id);
    if (run.run.state() == v1::RUN_STATE_SUCCEEDED) succeeded.push_back(&run);
  }
  std::vector<MemoryResultRow> records;
  records.reserve(sweep.run_ids.size());
  for (const std::string& run_id : sweep.run_ids) {
    const v1::Run& run = runs_.at(run_id).run;
    MemoryResultRow& record = records.emplace_back();
    record.row = PlannedRow(run);
    record.ordinal = runs_.at(run_id).ordinal;
    if (!run.has_summary()) continue;  // the columns a success writes are NULL
    const v1::RunSummary& summary = run.summary();
    record.finished = true;
    record.row.set_measured_flops_per_token(summary.measured_flops_per_token());
    record.row.set_final_val_bpc(summary.final_val_bpc());
    record.row.set_wall_seconds(
        absl::ToDoubleSeconds(absl::Seconds(summary.wall_time().seconds()) +
                              absl::Nanoseconds(summary.wall_time().nanos())));
    *record.row.mutable_final_eval_bpc() = summary.final_eval_bpc();
    record.row.set_dataset_digest(summary.dataset_digest());
    auto baseline = std::find_if(succeeded.begin(), succeeded.end(), [&](const RunRow* d) {
      return ServesAsBaseline(d->run.spec(), run.spec());
    });
    if (baseline == succeeded.end()) continue;
    const v1::RunSummary& base = (*baseline)->run.summary();
    record.has_delta = true;
    record.baseline_run_id = (*baseline)->run.run_id();
    record.row.set_delta_bpc_vs_dense(summary.final_val_bpc() - base.final_val_bpc());
    for (const auto& [set, bpc] : summary.final_eval_bpc()) {
      auto other = base.final_eval_bpc().find(set);
      if (other != base.final_eval_bpc().end()) {
        (*record.row.mutable_delta_eval_bpc_vs_dense())[set] = bpc - other->second;
      }
    }
  }
  return records;
}

absl::StatusOr<Page<v1::ResultRow>> MemoryRunStore::QueryResults(const ResultsQuery& query) {
  absl::StatusOr<ResultsOrder> order = ParseResultsOrder(query.order_by);
  if (!order.ok()) return order.status();
  absl::StatusOr<std::optional<ResultsCursor>> cursor = DecodeResultsCursor(query, *order);
  if (!cursor.ok()) return cursor.status();
  absl::MutexLock lock(&mu_);
  // The walk's start: the events committed before its first page (one mutex orders commits).
  const int64_t as_of = cursor->has_value() ? (*cursor)->as_of : next_event_id_;
  std::map<std::string, v1::RunState> state_as_of;  // for keys that change: as of the start
  if (order->mutable_key()) {
    for (auto it = events_.begin(); it != events_.end() && it->first < as_of; ++it) {
      state_as_of[it->second.event.run_id] = it->second.event.to_state;
    }
  }
  struct Keyed {
    OrderKey key;
    MemoryResultRow record;
  };
  std::vector<Keyed> rows;  // in grid order: sweeps_ is keyed by id, whose text order is the uuid's
  for (const auto& [sweep_id, sweep] : sweeps_) {
    if (!query.sweep_id.empty() && sweep_id != query.sweep_id) continue;
    for (MemoryResultRow& record : ResultsOfSweep(sweep)) {
      if (!Matches(query, record.row)) continue;
      OrderKey key = KeyAsOf(*order, record, state_as_of);
      rows.push_back({std::move(key), std::move(record)});
    }
  }
  // -1, 0 or 1 for a row before, at or after the cursor (or another row) in the walk's order.
  auto compare = [&](const OrderKey& key, const std::string& run_id, const OrderKey& other_key,
                     const std::string& other_id) {
    const int by_key = CompareKeys(key, other_key, order->descending);
    if (by_key != 0) return by_key;
    return run_id < other_id ? -1 : (run_id > other_id ? 1 : 0);
  };
  if (!order->grid()) {
    std::sort(rows.begin(), rows.end(), [&](const Keyed& a, const Keyed& b) {
      return compare(a.key, a.record.row.run_id(), b.key, b.record.row.run_id()) < 0;
    });
  }
  auto after_cursor = [&](const Keyed& keyed) {
    if (!cursor->has_value()) return true;
    const ResultsCursor& at = **cursor;
    const v1::ResultRow& row = keyed.record.row;
    if (order->grid()) {
      if (row.sweep_id() != at.key) return row.sweep_id() > at.key;
      return keyed.record.ordinal > static_cast<uint32_t>(std::stoul(at.tie));
    }
    OrderKey at_key = at.key_null ? Number(0, /*null=*/true)
                      : ResultsColumnKind(order->column) == ResultsKeyKind::kText
                          ? Text(at.key)
                          : Number(std::stod(at.key));
    return compare(keyed.key, row.run_id(), at_key, at.tie) > 0;
  };
  Page<v1::ResultRow> page;
  auto it = std::find_if(rows.begin(), rows.end(), after_cursor);
  for (; it != rows.end() && page.items.size() < query.page.page_size; ++it) {
    page.items.push_back(it->record.row);
    if (page.items.size() == query.page.page_size && std::next(it) != rows.end()) {
      ResultsCursor next;
      next.as_of = as_of;
      next.key_null = it->key.null;
      if (order->grid()) {
        next.key = it->record.row.sweep_id();
        next.tie = absl::StrCat(it->record.ordinal);
      } else {
        next.tie = it->record.row.run_id();
        if (!it->key.null) {
          next.key = it->key.is_text ? it->key.text : absl::StrFormat("%.17g", it->key.number);
        }
      }
      page.next_page_token = EncodeResultsCursor(query, *order, next);
    }
  }
  return page;
}

absl::StatusOr<SweepEventPage> MemoryRunStore::ListSweepEvents(const std::string& sweep_id,
                                                               uint64_t horizon) {
  absl::MutexLock lock(&mu_);
  SweepEventPage page;
  page.next_horizon = static_cast<uint64_t>(next_event_id_);
  if (horizon == 0) return page;
  for (auto it = events_.lower_bound(static_cast<int64_t>(std::min<uint64_t>(horizon, INT64_MAX)));
       it != events_.end(); ++it) {
    if (it->second.sweep_id == sweep_id) page.events.push_back(it->second.event);
  }
  return page;
}

absl::StatusOr<std::vector<RunEvent>> MemoryRunStore::ListRunEvents(const std::string& run_id,
                                                                    int64_t after_event_id,
                                                                    int limit) {
  absl::MutexLock lock(&mu_);
  std::vector<RunEvent> events;
  for (auto it = events_.upper_bound(after_event_id);
       it != events_.end() && static_cast<int64_t>(events.size()) < limit; ++it) {
    if (it->second.event.run_id == run_id) events.push_back(it->second.event);
  }
  return events;
}

absl::StatusOr<RunCounts> MemoryRunStore::CountRunsByState(const RunCountsQuery& query) {
  if (query.max_sweeps < 0) return absl::InvalidArgumentError("max_sweeps must not be negative");
  absl::MutexLock lock(&mu_);
  const absl::Time now = now_();
  // The unfinished sweeps shown one by one: newest first, at most max_sweeps.
  std::vector<const SweepRow*> open;
  for (const auto& [id, sweep] : sweeps_) {
    if (!sweep.ended) open.push_back(&sweep);
  }
  std::sort(open.begin(), open.end(),
            [](const SweepRow* a, const SweepRow* b) { return a->created_seq > b->created_seq; });
  if (open.size() > static_cast<size_t>(query.max_sweeps)) open.resize(query.max_sweeps);
  const std::set<const SweepRow*> shown(open.begin(), open.end());
  std::map<std::tuple<std::string, std::string, v1::RunState>, int64_t> groups;
  RunCounts counts;
  for (const auto& [id, sweep] : sweeps_) {
    const bool own_row = shown.contains(&sweep);
    for (const std::string& run_id : sweep.run_ids) {
      const RunRow& run = runs_.at(run_id);
      ++groups[{own_row ? id : "", own_row ? sweep.spec.name() : "", run.run.state()}];
      counts.ready_to_lease +=
          !sweep.ended && run.run.state() == v1::RUN_STATE_PENDING && run.not_before <= now;
    }
  }
  for (const auto& [key, runs] : groups) {
    counts.by_sweep.push_back({std::get<0>(key), std::get<1>(key), std::get<2>(key), runs});
  }
  for (const auto& [id, worker] : workers_) {
    counts.live_workers += worker.last_seen >= now - query.live_worker_window;
  }
  return counts;
}

absl::StatusOr<std::vector<v1::MetricPoint>> MemoryRunStore::ListMetrics(const std::string& run_id,
                                                                         uint64_t from_step,
                                                                         int limit) {
  absl::MutexLock lock(&mu_);
  std::vector<v1::MetricPoint> points;
  auto run = runs_.find(run_id);
  if (run == runs_.end()) return points;
  const auto& metrics = run->second.metrics;
  for (auto it = metrics.lower_bound(from_step);
       it != metrics.end() && static_cast<int64_t>(points.size()) < limit; ++it) {
    points.push_back(it->second.first);
    points.back().set_run_id(run_id);
  }
  return points;
}

absl::StatusOr<std::vector<v1::MetricPoint>> MemoryRunStore::SampleMetrics(
    const std::vector<std::string>& run_ids, const MetricSampling& sampling) {
  const uint64_t max_points = static_cast<uint64_t>(std::max(1, sampling.max_points_per_run));
  absl::MutexLock lock(&mu_);
  std::vector<v1::MetricPoint> out;
  // By run (the SQL orders by run_id, each named once), then step.
  for (const std::string& run_id : std::set<std::string>(run_ids.begin(), run_ids.end())) {
    auto run = runs_.find(run_id);
    if (run == runs_.end()) continue;
    std::map<uint64_t, const v1::MetricPoint*> eligible;
    for (const auto& [step, stored] : run->second.metrics) {
      if (!sampling.validation_only || stored.first.has_val_bpc()) eligible[step] = &stored.first;
    }
    if (eligible.empty()) continue;
    // The first point at or after each of 0, s, 2s, ... up to the run's latest step
    // (s = ceil((latest + 1) / max_points)), and the last point.
    const uint64_t latest = run->second.run.latest_step();
    const uint64_t step_size = latest / max_points + 1;  // (latest + max) / max, no overflow
    std::set<uint64_t> picked = {eligible.rbegin()->first};
    for (uint64_t target = 0; target <= latest;) {
      auto it = eligible.lower_bound(target);
      if (it != eligible.end()) picked.insert(it->first);
      if (latest - target < step_size) break;
      target += step_size;
    }
    for (const uint64_t step : picked) {
      v1::MetricPoint point = *eligible.at(step);
      point.set_run_id(run_id);
      if (!sampling.expert_load_summaries) {
        point.clear_expert_load();
      } else {
        for (v1::ExpertLoadStats& load : *point.mutable_expert_load()) load.clear_shares();
      }
      out.push_back(std::move(point));
    }
  }
  return out;
}

absl::StatusOr<std::optional<v1::RunGang>> MemoryRunStore::GetRunGang(const std::string& run_id) {
  absl::ReaderMutexLock lock(&mu_);
  auto run = runs_.find(run_id);
  auto gang = gangs_.find(run_id);
  // As run_gang (read_models.sql): the placement under the run's current epoch, not while PENDING.
  if (run == runs_.end() || gang == gangs_.end() ||
      gang->second.lease_epoch != run->second.lease_epoch ||
      run->second.run.state() == v1::RUN_STATE_PENDING) {
    return std::nullopt;
  }
  const GangRow& row = gang->second;
  v1::RunGang out;
  out.set_world_size(static_cast<uint32_t>(row.slots.size()));
  out.set_lease_epoch(row.lease_epoch);
  *out.mutable_placed_time() = ToProtoTime(row.placed);
  *out.mutable_rendezvous_deadline() = ToProtoTime(row.deadline);
  out.set_released(row.released);
  if (row.released) *out.mutable_released_time() = ToProtoTime(row.released_at);
  for (const GangSlotRow& slot : row.slots) {  // by rank
    v1::RunGangRank& rank = *out.add_ranks();
    rank.set_rank(slot.slot.rank);
    rank.set_worker_id(slot.slot.worker_id);
    // '' for a worker retention forgot, as the SQL's LEFT JOIN.
    if (auto worker = workers_.find(slot.slot.worker_id); worker != workers_.end()) {
      rank.set_hostname(worker->second.worker.hostname());
    }
    for (uint32_t index : slot.slot.device_indices) rank.add_device_indices(index);
    rank.set_checked_in(slot.checked_in);
    if (slot.checked_in) *rank.mutable_check_in_time() = ToProtoTime(slot.checked_in_at);
  }
  return out;
}

}  // namespace parity::server
