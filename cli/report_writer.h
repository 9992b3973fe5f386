// A static HTML report of one sweep (`parity report`): the dashboard's own front end (compiled in
// from web/) with its API documents written into data.js, so the same pages render offline from
// file:// with the same figures and tables, plus runs.csv and runs.parquet (docs/export.md) for a
// spreadsheet or a paper.
//
//   DIR/index.html  DIR/data.js  DIR/assets/{app.js,styles.css,chart.umd.js,favicon.svg}
//   DIR/runs.csv  DIR/runs.parquet  DIR/analysis.md (cli/report_analysis.h: the analysis as
//   paper-style tables)
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "export/export_schema.h"
#include "parity/v1/run.pb.h"
#include "parity/v1/sweep_service.pb.h"

namespace parity::cli {

// One run of the report with its (already sampled) metric history.
struct ReportRun {
  parity::v1::Run run;
  // Validation points for the sweep's curves, sampled (web::SampleEvenly).
  std::vector<parity::v1::MetricPoint> curve;
  // Every kind of point for the run page, sampled; expert load without shares is enough.
  std::vector<parity::v1::MetricPoint> history;
  // The last point whole (per-expert shares); unset when the run has none.
  std::optional<parity::v1::MetricPoint> latest;
};

struct ReportData {
  parity::v1::Sweep sweep;
  std::vector<ReportRun> runs;  // grid order
  std::vector<parity::v1::ResultRow> results;
  // The analysis, or why there is none (FAILED_PRECONDITION: no run has finished).
  std::optional<parity::v1::AnalyzeSweepResponse> analysis;
  absl::Status analysis_error;
  // The analysis on each evaluation set beyond the primary (AnalyzeSweepRequest.eval_set), in
  // analysis->eval_sets() order; empty for a sweep of one set.
  std::vector<parity::v1::AnalyzeSweepResponse> other_sets;
  std::string scheduler;     // where the data came from, shown in the footer
  std::string generated_at;  // RFC 3339
};

// Writes the report into `dir` (created if missing; existing report files are replaced).
absl::Status WriteReport(const ReportData& data, const std::string& dir);

// runs.csv/runs.parquet: the export columns (docs/export.md) of every run, then the analysis's
// per-run EL columns.
exports::ExportTable RunsTable(const ReportData& data);
std::string RunsCsv(const ReportData& data);

}  // namespace parity::cli
