// DashboardApi: the JSON API under /api/v1 that the web dashboard reads — GET only, each route
// one SweepsService call (or a ReadModels read for metric histories) turned into a document of
// web/dashboard_documents.h. No HTTP library in sight: http_server.cc hands it a path and the
// query parameters and writes back the reply, so the routes can be tested without a socket.
//
//   sweeps                     ListSweeps      ?state=ACTIVE&page_size=&page_token=
//   sweeps/ID                  GetSweep
//   sweeps/ID/runs             ListRuns        ?state=RUNNING,PENDING&page_size=&page_token=
//   sweeps/ID/results          QueryResults    ?order_by=&page_size=&page_token=
//   sweeps/ID/analysis         AnalyzeSweep    (400 FAILED_PRECONDITION until a run has finished;
//                              ?eval_set=NAME analyses that evaluation set's final BPC)
//   sweeps/ID/curves           validation curves of the sweep's runs (or ?run_id=A,B), sampled
//                              to ?points= (default 200, 2..2000) per run, paged by runs so a
//                              response holds at most 100,000 points (runs_per_page =
//                              min(1000, 100000 / points)): &page_token= from next_page_token;
//                              a run_id list may name at most runs_per_page runs
//   runs/ID                    GetRun (with `gang`, a placed gang's ranks and rendezvous)
//   runs/ID/history            the run's curves sampled to ?points= (default 1000, 2..5000),
//                              expert-load summaries, and the latest per-expert shares
//   runs/ID/metrics            raw points, paged: ?after_step=N (exclusive) &limit= (1..10000);
//                              a page stops early past 200,000 values (a point counts 1 plus
//                              its expert shares), next_after_step says where to go on
//   workers                    ListWorkers     ?seen_within_seconds=&page_size=&page_token=
//   sweeps/ID/table            one page of the sweep page's runs table: QueryResults rows, each
//                              with its Run (by key) ?state=A,B&order_by=&page_size= (1..200,
//                              default 100)&page_token=
//   sweeps/ID/summary          what the sweep page's header says of all the runs: runs by role,
//                              budgets, total compute, distinct failures (web::SweepSummary)
//
// Errors are {"error": {...}} with the HTTP status of the absl code (HttpStatusOf). Thread-safe
// over a thread-safe SweepsService and ReadModels; a successful reply is kept for `replies.ttl`
// (reply_cache.h: a second by default) and given to whoever asks for the same path and query.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "server/api/reply_cache.h"
#include "server/scheduling/sweeps_service.h"
#include "server/store/paging.h"
#include "server/store/read_models.h"

namespace parity::server {

struct HttpReply {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
};

// Query parameters by name, as cpp-httplib's Params holds them.
using QueryParams = std::multimap<std::string, std::string>;

// The HTTP status a caller should see for an absl code (Google's API mapping).
int HttpStatusOf(absl::StatusCode code);
// An error document with that status.
HttpReply ErrorReply(const absl::Status& status);

class DashboardApi {
 public:
  // `sweeps` (every sweep, run and worker, validated as over gRPC) and `reads` (metric samples
  // and listings) must outlive the API.
  DashboardApi(SweepsService& sweeps, ReadModels& reads, ReplyCacheOptions replies = {})
      : sweeps_(sweeps), reads_(reads), replies_(replies, [] { return absl::Now(); }) {}

  // `path` below /api/v1/, without the leading slash ("sweeps/ID/runs").
  HttpReply Get(absl::string_view path, const QueryParams& params);

 private:
  // The reply computed now (Get's cache miss).
  HttpReply Route(absl::string_view path, const QueryParams& params);
  absl::StatusOr<std::string> ListSweeps(const QueryParams& params);
  absl::StatusOr<std::string> GetSweep(const std::string& sweep_id);
  absl::StatusOr<std::string> ListRuns(const std::string& sweep_id, const QueryParams& params);
  absl::StatusOr<std::string> QueryResults(const std::string& sweep_id, const QueryParams& params);
  absl::StatusOr<std::string> AnalyzeSweep(const std::string& sweep_id, const QueryParams& params);
  absl::StatusOr<std::string> SweepCurves(const std::string& sweep_id, const QueryParams& params);
  // The runs named in `wanted_text` ("A,B"), each checked to be the sweep's; at most `max_runs`.
  absl::StatusOr<std::vector<std::string>> RunsOfSweep(const std::string& sweep_id,
                                                       const std::string& wanted_text, int max_runs,
                                                       int points);
  absl::StatusOr<std::string> GetRun(const std::string& run_id);
  absl::StatusOr<std::string> RunHistory(const std::string& run_id, const QueryParams& params);
  absl::StatusOr<std::string> RunMetrics(const std::string& run_id, const QueryParams& params);
  absl::StatusOr<std::string> ListWorkers(const QueryParams& params);
  // One page of a sweep's runs in grid order, through SweepsService::ListRuns.
  absl::StatusOr<Page<v1::Run>> RunsPage(const std::string& sweep_id, const PageRequest& page);

  // The sweep page at 10,000 runs: one table page and a summary folded on the server.
  absl::StatusOr<std::string> SweepTable(const std::string& sweep_id, const QueryParams& params);
  absl::StatusOr<std::string> SweepSummary(const std::string& sweep_id);

  SweepsService& sweeps_;
  ReadModels& reads_;
  ReplyCache<HttpReply> replies_;
};

}  // namespace parity::server
