#include "server/api/dashboard_api.h"

#include <algorithm>
#include <iterator>
#include <limits>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/field_violation.h"
#include "core/status_macros.h"
#include "server/scheduling/request_validation.h"
#include "web/dashboard_documents.h"

namespace parity::server {
namespace {

constexpr int kDefaultCurvePoints = 200;
constexpr int kMaxCurvePoints = 2000;
constexpr int kDefaultHistoryPoints = 1000;
constexpr int kMaxHistoryPoints = 5000;
constexpr int kDefaultMetricsLimit = 1000;
constexpr int kMaxMetricsLimit = 10000;
// What one response may hold whatever a sweep or a run holds: curve points over all runs of a
// curves page (at most 1000 runs, one ListRuns page), and values (a point's 1 plus its expert
// shares) of a metrics page, whose last point may be cut short of `limit`.
constexpr int kMaxCurvePointsPerResponse = 100000;
constexpr int kMaxCurveRunsPerResponse = 1000;
constexpr size_t kMaxMetricValuesPerResponse = 200000;

// A point's weight against kMaxMetricValuesPerResponse.
size_t ValuesOf(const v1::MetricPoint& point) {
  size_t values = 1;
  for (const v1::ExpertLoadStats& load : point.expert_load()) values += 1 + load.shares_size();
  return values;
}

// Reads query parameters, collecting every bad one as a field violation (like the gRPC API).
class ParamReader {
 public:
  explicit ParamReader(const QueryParams& params) : params_(params) {}

  std::string Text(const std::string& name) const {
    auto it = params_.find(name);
    return it == params_.end() ? "" : it->second;
  }

  std::optional<int64_t> OptionalInteger(const std::string& name, int64_t min, int64_t max) {
    const std::string text = Text(name);
    if (text.empty()) return std::nullopt;
    int64_t value = 0;
    if (!absl::SimpleAtoi(text, &value) || value < min || value > max) {
      violations_.Add(
          name, absl::StrCat("'", text.substr(0, 32), "' is not an integer in ", min, "..", max));
      return std::nullopt;
    }
    return value;
  }

  int64_t Integer(const std::string& name, int64_t fallback, int64_t min, int64_t max) {
    return OptionalInteger(name, min, max).value_or(fallback);
  }

  // "RUNNING,PENDING" or "RUN_STATE_RUNNING"; case-insensitive.
  std::vector<v1::RunState> RunStates(const std::string& name) {
    std::vector<v1::RunState> states;
    for (absl::string_view part : absl::StrSplit(Text(name), ',', absl::SkipWhitespace())) {
      std::string text = absl::AsciiStrToUpper(absl::StripAsciiWhitespace(part));
      if (!absl::StartsWith(text, "RUN_STATE_")) text = absl::StrCat("RUN_STATE_", text);
      v1::RunState state;
      if (!v1::RunState_Parse(text, &state) || state == v1::RUN_STATE_UNSPECIFIED) {
        violations_.Add(name, absl::StrCat("'", part, "' is not a run state"));
      } else {
        states.push_back(state);
      }
    }
    return states;
  }

  v1::SweepState SweepState(const std::string& name) {
    std::string text = absl::AsciiStrToUpper(Text(name));
    if (text.empty()) return v1::SWEEP_STATE_UNSPECIFIED;
    if (!absl::StartsWith(text, "SWEEP_STATE_")) text = absl::StrCat("SWEEP_STATE_", text);
    v1::SweepState state = v1::SWEEP_STATE_UNSPECIFIED;
    if (!v1::SweepState_Parse(text, &state)) {
      violations_.Add(name, absl::StrCat("'", Text(name), "' is not a sweep state"));
    }
    return state;
  }

  absl::Status Check() const { return violations_.ToStatus("invalid request parameters"); }

 private:
  const QueryParams& params_;
  Violations violations_;
};

template <typename Response>
absl::StatusOr<std::string> AsJson(const absl::StatusOr<Response>& response) {
  if (!response.ok()) return response.status();
  return web::MessageJson(*response);
}

absl::Status RouteNotFound(absl::string_view path) {
  return absl::NotFoundError(absl::StrCat("no API route /api/v1/", path));
}

}  // namespace

int HttpStatusOf(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk:
      return 200;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
      return 400;
    case absl::StatusCode::kUnauthenticated:
      return 401;
    case absl::StatusCode::kPermissionDenied:
      return 403;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kAborted:
      return 409;
    case absl::StatusCode::kResourceExhausted:
      return 429;
    case absl::StatusCode::kCancelled:
      return 499;
    case absl::StatusCode::kUnimplemented:
      return 501;
    case absl::StatusCode::kUnavailable:
      return 503;
    case absl::StatusCode::kDeadlineExceeded:
      return 504;
    default:
      return 500;
  }
}

HttpReply ErrorReply(const absl::Status& status) {
  std::vector<web::ParameterViolation> violations;
  for (core::FieldViolation& v : core::FieldViolationsOf(status)) {
    violations.push_back({std::move(v.field), std::move(v.description)});
  }
  const int http_status = HttpStatusOf(status.code());
  return HttpReply{
      .status = http_status,
      .body = web::ErrorJson(http_status, absl::StatusCodeToString(status.code()),
                             std::string_view(status.message().data(), status.message().size()),
                             violations)};
}

HttpReply DashboardApi::Get(absl::string_view path, const QueryParams& params) {
  // The path and the query in order (a multimap: by name, then as given), each part prefixed by
  // its length so that no two requests share a key.
  std::string key = absl::StrCat(path.size(), ":", path);
  for (const auto& [name, value] : params) {
    absl::StrAppend(&key, name.size(), ":", name, value.size(), ":", value);
  }
  return replies_.GetOrCompute(key, [&] { return Route(path, params); });
}

HttpReply DashboardApi::Route(absl::string_view path, const QueryParams& params) {
  const std::vector<std::string> parts =
      absl::StrSplit(absl::StripSuffix(path, "/"), '/', absl::AllowEmpty());
  absl::StatusOr<std::string> body = RouteNotFound(path);
  const size_t n = parts.size();
  if (n >= 1 && parts[0] == "sweeps") {
    if (n == 1) body = ListSweeps(params);
    if (n == 2) body = GetSweep(parts[1]);
    if (n == 3 && parts[2] == "runs") body = ListRuns(parts[1], params);
    if (n == 3 && parts[2] == "results") body = QueryResults(parts[1], params);
    if (n == 3 && parts[2] == "analysis") body = AnalyzeSweep(parts[1], params);
    if (n == 3 && parts[2] == "curves") body = SweepCurves(parts[1], params);
    if (n == 3 && parts[2] == "table") body = SweepTable(parts[1], params);
    if (n == 3 && parts[2] == "summary") body = SweepSummary(parts[1]);
  } else if (n >= 2 && parts[0] == "runs") {
    if (n == 2) body = GetRun(parts[1]);
    if (n == 3 && parts[2] == "history") body = RunHistory(parts[1], params);
    if (n == 3 && parts[2] == "metrics") body = RunMetrics(parts[1], params);
  } else if (n == 1 && parts[0] == "workers") {
    body = ListWorkers(params);
  }
  if (!body.ok()) return ErrorReply(body.status());
  return HttpReply{.body = std::move(*body)};
}

absl::StatusOr<std::string> DashboardApi::ListSweeps(const QueryParams& params) {
  ParamReader reader(params);
  v1::ListSweepsRequest request;
  request.set_state(reader.SweepState("state"));
  request.set_page_size(static_cast<uint32_t>(reader.Integer("page_size", 0, 0, 1000)));
  request.set_page_token(reader.Text("page_token"));
  PARITY_RETURN_IF_ERROR(reader.Check());
  return AsJson(sweeps_.ListSweeps(request));
}

absl::StatusOr<std::string> DashboardApi::GetSweep(const std::string& sweep_id) {
  v1::GetSweepRequest request;
  request.set_sweep_id(sweep_id);
  return AsJson(sweeps_.GetSweep(request));
}

absl::StatusOr<std::string> DashboardApi::ListRuns(const std::string& sweep_id,
                                                   const QueryParams& params) {
  ParamReader reader(params);
  v1::ListRunsRequest request;
  request.set_sweep_id(sweep_id);
  for (v1::RunState state : reader.RunStates("state")) request.add_states(state);
  request.set_page_size(static_cast<uint32_t>(reader.Integer("page_size", 0, 0, 1000)));
  request.set_page_token(reader.Text("page_token"));
  PARITY_RETURN_IF_ERROR(reader.Check());
  // The store answers an unknown sweep with NOT_FOUND (a 404 here), so no GetSweep first: its
  // run counts cost a scan of the sweep on every page (bench/load, 100,000 runs).
  return AsJson(sweeps_.ListRuns(request));
}

absl::StatusOr<std::string> DashboardApi::QueryResults(const std::string& sweep_id,
                                                       const QueryParams& params) {
  ParamReader reader(params);
  v1::QueryResultsRequest request;
  request.mutable_filter()->set_sweep_id(sweep_id);
  // The same filters as QueryResults: ?state=SUCCEEDED,FAILED (as /runs) and ?layout=all-moe.
  for (v1::RunState state : reader.RunStates("state")) request.mutable_filter()->add_states(state);
  request.mutable_filter()->set_layout(reader.Text("layout"));
  request.set_order_by(reader.Text("order_by"));
  request.set_page_size(static_cast<uint32_t>(reader.Integer("page_size", 0, 0, 10000)));
  request.set_page_token(reader.Text("page_token"));
  PARITY_RETURN_IF_ERROR(reader.Check());
  // QueryResults answers an unknown sweep with no rows; the dashboard wants a 404. Checked on the
  // first page only: a page token names its sweep (results_paging.h), and GetSweep's run counts
  // cost a scan of the sweep (bench/load, 100,000 runs).
  if (request.page_token().empty()) {
    if (absl::StatusOr<std::string> sweep = GetSweep(sweep_id); !sweep.ok()) return sweep.status();
  }
  return AsJson(sweeps_.QueryResults(request));
}

absl::StatusOr<std::string> DashboardApi::AnalyzeSweep(const std::string& sweep_id,
                                                       const QueryParams& params) {
  v1::AnalyzeSweepRequest request;
  request.set_sweep_id(sweep_id);
  request.set_eval_set(ParamReader(params).Text("eval_set"));  // the scheduler checks the name
  return AsJson(sweeps_.AnalyzeSweep(request));
}

// Paged by runs so that a response holds at most kMaxCurvePointsPerResponse points: a page of
// the sweep's runs (its ListRuns page token is the curves' page_token), or the runs named in
// run_id, which may name at most one page's worth.
absl::StatusOr<std::string> DashboardApi::SweepCurves(const std::string& sweep_id,
                                                      const QueryParams& params) {
  ParamReader reader(params);
  const int points =
      static_cast<int>(reader.Integer("points", kDefaultCurvePoints, 2, kMaxCurvePoints));
  const std::string wanted_text = reader.Text("run_id");
  const std::string page_token = reader.Text("page_token");
  PARITY_RETURN_IF_ERROR(reader.Check());
  // A page of the sweep's runs answers an unknown sweep with NOT_FOUND itself (no GetSweep, whose
  // run counts scan the sweep); named runs are checked against a sweep that must exist.
  if (!wanted_text.empty()) {
    if (absl::StatusOr<std::string> sweep = GetSweep(sweep_id); !sweep.ok()) return sweep.status();
  }
  const int runs_per_page =
      std::min(kMaxCurveRunsPerResponse, std::max(1, kMaxCurvePointsPerResponse / points));
  web::CurvePaging paging;
  paging.runs_per_page = runs_per_page;
  std::vector<std::string> run_ids;
  if (wanted_text.empty()) {
    PARITY_ASSIGN_OR_RETURN(Page<v1::Run> runs,
                            RunsPage(sweep_id, {static_cast<uint32_t>(runs_per_page), page_token}));
    for (const v1::Run& run : runs.items) run_ids.push_back(run.run_id());
    paging.next_page_token = runs.next_page_token;
  } else {
    PARITY_ASSIGN_OR_RETURN(run_ids, RunsOfSweep(sweep_id, wanted_text, runs_per_page, points));
  }
  PARITY_ASSIGN_OR_RETURN(
      std::vector<v1::MetricPoint> sampled,
      reads_.SampleMetrics(run_ids, {.max_points_per_run = points, .validation_only = true}));
  return web::CurvesJson(sampled, paging);
}

absl::StatusOr<std::vector<std::string>> DashboardApi::RunsOfSweep(const std::string& sweep_id,
                                                                   const std::string& wanted_text,
                                                                   int max_runs, int points) {
  const std::vector<absl::string_view> wanted =
      absl::StrSplit(wanted_text, ',', absl::SkipWhitespace());
  if (static_cast<int>(wanted.size()) > max_runs) {
    Violations violations;
    violations.Add("run_id", absl::StrCat(wanted.size(), " runs at points=", points,
                                          " would pass the ", kMaxCurvePointsPerResponse,
                                          " points one response holds: name at most ", max_runs,
                                          " runs per request"));
    return violations.ToStatus("invalid request parameters");
  }
  // The sweep's runs bound what may be asked for: only their ids reach the SQL. Each id is one
  // lookup by key (at most max_runs of them), not a listing of the sweep: a 10,000-run sweep's
  // curves for 20 runs took 1.2-1.6 s when every run was listed (bench/load).
  std::vector<std::string> run_ids;
  Violations violations;
  for (absl::string_view id : wanted) {
    bool of_sweep = false;
    if (IsUuid(id)) {
      v1::GetRunRequest request;
      request.set_run_id(std::string(id));
      absl::StatusOr<v1::GetRunResponse> run = sweeps_.GetRun(request);
      if (!run.ok() && run.status().code() != absl::StatusCode::kNotFound) return run.status();
      of_sweep = run.ok() && run->run().sweep_id() == absl::AsciiStrToLower(sweep_id);
    }
    if (!of_sweep) {
      violations.Add("run_id", absl::StrCat("'", id.substr(0, 64), "' is not a run of the sweep"));
    } else {
      run_ids.emplace_back(id);
    }
  }
  PARITY_RETURN_IF_ERROR(violations.ToStatus("invalid request parameters"));
  return run_ids;
}

absl::StatusOr<Page<v1::Run>> DashboardApi::RunsPage(const std::string& sweep_id,
                                                     const PageRequest& page) {
  v1::ListRunsRequest request;
  request.set_sweep_id(sweep_id);
  request.set_page_size(page.page_size);
  request.set_page_token(page.page_token);
  PARITY_ASSIGN_OR_RETURN(v1::ListRunsResponse response, sweeps_.ListRuns(request));
  Page<v1::Run> runs;
  runs.items.assign(std::make_move_iterator(response.mutable_runs()->begin()),
                    std::make_move_iterator(response.mutable_runs()->end()));
  runs.next_page_token = std::move(*response.mutable_next_page_token());
  return runs;
}

absl::StatusOr<std::string> DashboardApi::GetRun(const std::string& run_id) {
  v1::GetRunRequest request;
  request.set_run_id(run_id);
  return AsJson(sweeps_.GetRun(request));
}

absl::StatusOr<std::string> DashboardApi::RunHistory(const std::string& run_id,
                                                     const QueryParams& params) {
  ParamReader reader(params);
  const int points =
      static_cast<int>(reader.Integer("points", kDefaultHistoryPoints, 2, kMaxHistoryPoints));
  PARITY_RETURN_IF_ERROR(reader.Check());
  v1::GetRunRequest request;
  request.set_run_id(run_id);
  PARITY_ASSIGN_OR_RETURN(v1::GetRunResponse run, sweeps_.GetRun(request));
  PARITY_ASSIGN_OR_RETURN(std::vector<v1::MetricPoint> sampled,
                          reads_.SampleMetrics({run_id}, {.max_points_per_run = points,
                                                          .expert_load_summaries = true}));
  // The latest point whole: its per-expert shares draw the load bar chart.
  PARITY_ASSIGN_OR_RETURN(std::vector<v1::MetricPoint> latest,
                          reads_.ListMetrics(run_id, run.run().latest_step(), 1));
  return web::HistoryJson(run_id, sampled, latest.empty() ? nullptr : &latest.front());
}

absl::StatusOr<std::string> DashboardApi::RunMetrics(const std::string& run_id,
                                                     const QueryParams& params) {
  ParamReader reader(params);
  const std::optional<int64_t> after_step =
      reader.OptionalInteger("after_step", 0, std::numeric_limits<int64_t>::max() - 1);
  const int limit =
      static_cast<int>(reader.Integer("limit", kDefaultMetricsLimit, 1, kMaxMetricsLimit));
  PARITY_RETURN_IF_ERROR(reader.Check());
  PARITY_RETURN_IF_ERROR(GetRun(run_id).status());
  const uint64_t from_step = after_step ? static_cast<uint64_t>(*after_step) + 1 : 0;
  // One point more than asked says whether another page exists.
  PARITY_ASSIGN_OR_RETURN(std::vector<v1::MetricPoint> points,
                          reads_.ListMetrics(run_id, from_step, limit + 1));
  bool more = static_cast<int>(points.size()) > limit;
  if (more) points.resize(limit);
  // Cut short where the values would pass the bound (the first point always goes: ReportMetrics
  // bounds a point's expert shares by the run's model); the cursor resumes after the last one.
  size_t values = 0;
  for (size_t i = 0; i < points.size(); ++i) {
    values += ValuesOf(points[i]);
    if (i > 0 && values > kMaxMetricValuesPerResponse) {
      points.resize(i);
      more = true;
      break;
    }
  }
  return web::MetricPageJson(points, more);
}

absl::StatusOr<std::string> DashboardApi::ListWorkers(const QueryParams& params) {
  ParamReader reader(params);
  v1::ListWorkersRequest request;
  request.set_seen_within_seconds(
      static_cast<uint32_t>(reader.Integer("seen_within_seconds", 0, 0, 30 * 24 * 3600)));
  request.set_page_size(static_cast<uint32_t>(reader.Integer("page_size", 0, 0, 1000)));
  request.set_page_token(reader.Text("page_token"));
  PARITY_RETURN_IF_ERROR(reader.Check());
  return AsJson(sweeps_.ListWorkers(request));
}

// The sweep page's runs table, one page at a time: a 10,000-run sweep's page costs one page of
// the results view (sorted and filtered in SQL, paged by its page_token) and one lookup by key
// per row for the run's state, failure and progress, never a listing of the sweep.
absl::StatusOr<std::string> DashboardApi::SweepTable(const std::string& sweep_id,
                                                     const QueryParams& params) {
  constexpr int kDefaultTableRows = 100;
  constexpr int kMaxTableRows = 200;
  ParamReader reader(params);
  v1::QueryResultsRequest request;
  request.mutable_filter()->set_sweep_id(sweep_id);
  for (v1::RunState state : reader.RunStates("state")) request.mutable_filter()->add_states(state);
  request.set_order_by(reader.Text("order_by"));
  request.set_page_size(
      static_cast<uint32_t>(reader.Integer("page_size", kDefaultTableRows, 1, kMaxTableRows)));
  request.set_page_token(reader.Text("page_token"));
  PARITY_RETURN_IF_ERROR(reader.Check());
  if (absl::StatusOr<std::string> sweep = GetSweep(sweep_id); !sweep.ok()) return sweep.status();
  PARITY_ASSIGN_OR_RETURN(v1::QueryResultsResponse results, sweeps_.QueryResults(request));
  std::vector<web::TableRow> rows;
  rows.reserve(results.rows_size());
  for (v1::ResultRow& result : *results.mutable_rows()) {
    v1::GetRunRequest run_request;
    run_request.set_run_id(result.run_id());
    absl::StatusOr<v1::GetRunResponse> run = sweeps_.GetRun(run_request);
    // A run deleted between the two reads leaves the page; any other error is the page's.
    if (!run.ok() && run.status().code() == absl::StatusCode::kNotFound) continue;
    if (!run.ok()) return run.status();
    rows.push_back({.run = std::move(*run->mutable_run()), .result = std::move(result)});
  }
  return web::TablePageJson(rows, results.next_page_token());
}

// Folded page by page (ListRuns, 1000 runs a page) so that the browser gets a few hundred bytes
// instead of every run; the page asks for it again only when runs end.
absl::StatusOr<std::string> DashboardApi::SweepSummary(const std::string& sweep_id) {
  if (absl::StatusOr<std::string> sweep = GetSweep(sweep_id); !sweep.ok()) return sweep.status();
  web::SweepSummary summary;
  std::string token;
  do {
    PARITY_ASSIGN_OR_RETURN(Page<v1::Run> runs, RunsPage(sweep_id, {1000, token}));
    for (const v1::Run& run : runs.items) summary.Add(run);
    token = std::move(runs.next_page_token);
  } while (!token.empty());
  return summary.Json();
}

}  // namespace parity::server
