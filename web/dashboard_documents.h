// The JSON documents of the dashboard API (/api/v1/...), built from the API's protobuf messages.
// The scheduler's HTTP server and `parity report` both build them here, so one front end renders
// a live scheduler and an offline report alike; web/src/api.js is the other side of this file.
//
// Messages are JSON with proto field names (snake_case) and every field, zeros included;
// 64-bit integers are strings there (the proto3 JSON mapping). The metric documents are ours:
// columnar arrays, because charts want columns and a 250-run sweep page wants few bytes.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "google/protobuf/message.h"
#include "parity/v1/run.pb.h"

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

}  // namespace parity::web
