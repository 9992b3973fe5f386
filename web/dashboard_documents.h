// The JSON documents of the dashboard API (/api/v1/...), built from the API's protobuf messages.
// The scheduler's HTTP server and `parity report` both build them here, so one front end renders
// a live scheduler and an offline report alike; web/src/api.js is the other side of this file.
//
// Messages are JSON with proto field names (snake_case) and every field, zeros included;
// 64-bit integers are strings there (the proto3 JSON mapping). The metric documents are ours:
// columnar arrays, because charts want columns and a 250-run sweep page wants few bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "google/protobuf/message.h"
#include "parity/v1/run.pb.h"
#include "parity/v1/sweep_service.pb.h"

namespace parity::web {

// A message as the API's JSON (proto field names, default values printed).
std::string MessageJson(const google::protobuf::Message& message);

// One bad request parameter: its name and what is wrong with it.
struct ParameterViolation {
  std::string field;
  std::string description;
};

// {"error": {"http_status": 400, "code": "INVALID_ARGUMENT", "message": "...",
//            "violations": [{"field": "limit", "description": "..."}]}}
std::string ErrorJson(int http_status, std::string_view code, std::string_view message,
                      std::span<const ParameterViolation> violations = {});

// At most about `max_points` of one run's points (sorted by step): for each of the steps
// 0, s, 2s, ... up to the last (s = ceil((last+1)/max_points)) the first point at or after it,
// plus the last point. The store's SampleMetrics picks the same points in SQL.
std::vector<v1::MetricPoint> SampleEvenly(std::span<const v1::MetricPoint> points,
                                          size_t max_points);

// How a page of curves continues: the token of the next page ("" = the last page) and how many
// runs one page holds at the requested points per run (what a run_id list may name at once).
struct CurvePaging {
  std::string next_page_token;
  int runs_per_page = 0;
};

// The sweep page's training curves: validation points only, one entry per run that has any.
//   {"runs": [{"run_id": "...", "step": [..], "tokens": [..], "flops": [..], "val_bpc": [..],
//              "eval_bpc": {"validation": [..], "code": [..]}}],  (per evaluation set, null
//              where a point lacks the set; {} for an engine that reports only val_bpc)
//    "next_page_token": "..." | null, "runs_per_page": R}
// `points` may hold several runs, each run's points sorted by step.
std::string CurvesJson(std::span<const v1::MetricPoint> points, const CurvePaging& paging = {});

// A run page's history: columns of every (sampled) point, null where a point has no value, the
// expert load over steps per MoE layer (shares not needed), and the latest point's per-expert
// shares (`latest`: that point with its shares; null when the run has none).
//   {"run_id", "step": [..], "tokens", "flops", "epoch", "train_bpc",
//    "val_bpc", "learning_rate", "grad_norm", "aux_loss", "z_loss", "tokens_per_second",
//    "flops_per_second", "eval_bpc": {"<set>": [..]} (BPC per evaluation set, null off them),
//    "expert_load": [{"layer", "max_min_ratio": [..], "coefficient_of_variation": [..],
//                     "dead_experts": [..]}],
//    "latest_expert_load": {"step", "layers": [ExpertLoadStats JSON]} | null}
std::string HistoryJson(std::string_view run_id, std::span<const v1::MetricPoint> sampled,
                        const v1::MetricPoint* latest);

// One page of raw points: {"points": [MetricPoint JSON], "next_after_step": "N" | null}.
// `more` says whether the page was full (the caller asked for one point more than it returns).
std::string MetricPageJson(std::span<const v1::MetricPoint> points, bool more);

// One row of the sweep page's runs table: the run (state, failure, progress, latest BPC) and its
// row of the results view (final BPC, ΔBPC, per evaluation set).
struct TableRow {
  v1::Run run;
  v1::ResultRow result;
};

// One page of the runs table, in the order the results view gave it:
//   {"rows": [{"run": Run JSON, "result": ResultRow JSON}], "next_page_token": "..." | null}
// Each run is cut to what the table and the curves draw (TableRun), a quarter of its bytes.
std::string TablePageJson(std::span<const TableRow> rows, std::string_view next_page_token);

// `run` without what a row of the runs table does not show: its spec's data, resources, labels,
// grid point, groups served and training settings but the step count; its lease, checkpoint and
// summary (the row's ResultRow holds the final figures). The run page reads the whole run.
v1::Run TableRun(v1::Run run);

// What the sweep page's header says of ALL of a sweep's runs, folded run by run so the server
// never holds the sweep: how many runs by role, the compute budgets and dense multiples, the
// total planned compute, and the distinct failures of the FAILED runs (most runs first, at most
// kMaxFailures of them; the rest are counted in other_failed_runs).
class SweepSummary {
 public:
  static constexpr size_t kMaxFailures = 20;

  void Add(const v1::Run& run);
  //   {"runs": N, "moe_runs": N, "dense_runs": N, "compute_budgets": ["C1", ..],
  //    "dense_multiples": [1, 2], "total_compute_flops": C, "failed_runs": N,
  //    "failures": [{"failure_class": "FAILURE_CLASS_…", "message": "...", "runs": N}],
  //    "other_failed_runs": N}
  std::string Json() const;

 private:
  struct Failure {
    v1::FailureClass failure_class;
    std::string message;
    int64_t runs = 0;
  };
  int64_t runs_ = 0, moe_runs_ = 0, dense_runs_ = 0, failed_runs_ = 0;
  double total_compute_flops_ = 0;
  std::vector<std::string> budgets_;  // in grid order of first appearance
  std::vector<double> dense_multiples_;
  std::vector<Failure> failures_;  // distinct (class, message), in order of first appearance
  std::map<std::pair<int, std::string>, size_t> failure_index_;  // (class, message) → failures_
};

}  // namespace parity::web
