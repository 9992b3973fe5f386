#include "cli/report_writer.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "cli/client_format.h"
#include "cli/report_analysis.h"
#include "cli/results_export.h"
#include "cli/table.h"
#include "core/status_macros.h"
#include "export/export_writers.h"
#include "fmt/format.h"
#include "web/dashboard_documents.h"
#include "web/web_assets.h"

namespace parity::cli {
namespace {

using nlohmann::json;

absl::Status WriteFile(const std::filesystem::path& path, std::string_view content) {
  std::error_code error;
  std::filesystem::create_directories(path.parent_path(), error);
  if (error) {
    return absl::InternalError(
        absl::StrCat("cannot create ", path.parent_path().string(), ": ", error.message()));
  }
  // Written beside and renamed, so a report being regenerated is never seen half-written.
  const std::filesystem::path temporary = path.string() + ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
    out.close();
    if (!out) return absl::InternalError(absl::StrCat("cannot write ", temporary.string()));
  }
  std::filesystem::rename(temporary, path, error);
  if (error) {
    return absl::InternalError(absl::StrCat("cannot write ", path.string(), ": ", error.message()));
  }
  return absl::OkStatus();
}

// The documents the front end asks for, keyed by the API path it would fetch (web/src/api.js
// looks paths up here without their query strings).
json Documents(const ReportData& data) {
  const std::string sweep_path = absl::StrCat("/api/v1/sweeps/", data.sweep.sweep_id());
  json documents = json::object();

  parity::v1::ListSweepsResponse sweeps;
  *sweeps.add_sweeps() = data.sweep;
  documents["/api/v1/sweeps"] = json::parse(web::MessageJson(sweeps));
  parity::v1::GetSweepResponse sweep;
  *sweep.mutable_sweep() = data.sweep;
  documents[sweep_path] = json::parse(web::MessageJson(sweep));

  parity::v1::ListRunsResponse runs;
  std::vector<parity::v1::MetricPoint> curves;
  for (const ReportRun& r : data.runs) {
    *runs.add_runs() = r.run;
    curves.insert(curves.end(), r.curve.begin(), r.curve.end());
    parity::v1::GetRunResponse run;
    *run.mutable_run() = r.run;
    const std::string run_path = absl::StrCat("/api/v1/runs/", r.run.run_id());
    documents[run_path] = json::parse(web::MessageJson(run));
    documents[run_path + "/history"] =
        json::parse(web::HistoryJson(r.run.run_id(), r.history, r.latest ? &*r.latest : nullptr));
  }
  documents[sweep_path + "/runs"] = json::parse(web::MessageJson(runs));
  documents[sweep_path + "/curves"] = json::parse(web::CurvesJson(curves));

  parity::v1::QueryResultsResponse results;
  for (const parity::v1::ResultRow& row : data.results) *results.add_rows() = row;
  documents[sweep_path + "/results"] = json::parse(web::MessageJson(results));

  if (data.analysis) {
    documents[sweep_path + "/analysis"] = json::parse(web::MessageJson(*data.analysis));
  } else {
    // The same error the live API gives (400 FAILED_PRECONDITION), so the page explains it.
    const absl::Status& error = data.analysis_error;
    documents[sweep_path + "/analysis"] = json::parse(
        web::ErrorJson(error.code() == absl::StatusCode::kFailedPrecondition ? 400 : 500,
                       absl::StatusCodeToString(error.code()),
                       std::string_view(error.message().data(), error.message().size())));
  }
  return documents;
}

// The analysis's grid point of a run in its own group: its name without the seed suffix.
const parity::v1::GridPointSummary* GridPointOf(const ReportData& data,
                                                const parity::v1::RunSpec& spec) {
  if (!data.analysis) return nullptr;
  const std::string group = absl::StrCat(spec.compute_budget(), "/", spec.data_variant());
  for (const parity::v1::GridPointSummary& p : data.analysis->grid_points()) {
    if (p.group() != group) continue;
    if (spec.name() == p.name() || absl::StartsWith(spec.name(), p.name() + "-s")) return &p;
  }
  return nullptr;
}

}  // namespace

exports::ExportTable RunsTable(const ReportData& data) {
  std::vector<parity::v1::Run> runs;
  runs.reserve(data.runs.size());
  for (const ReportRun& r : data.runs) runs.push_back(r.run);
  exports::ExportTable table = ExportTableOf(data.results, runs);
  // The analysis's figures per run, after the export columns (docs/export.md says so).
  std::map<std::string, const parity::v1::RunLeverage*> leverage;
  if (data.analysis) {
    for (const auto& l : data.analysis->leverage()) leverage[l.run_id()] = &l;
  }
  std::map<std::string, const parity::v1::RunSpec*> specs;
  for (const ReportRun& r : data.runs) specs[r.run.run_id()] = &r.run.spec();
  for (const char* name :
       {"fixed_n_efficiency_leverage", "fixed_n_efficiency_leverage_90_low",
        "fixed_n_efficiency_leverage_90_high", "grid_point_frontier_efficiency_leverage",
        "grid_point_frontier_efficiency_leverage_90_low",
        "grid_point_frontier_efficiency_leverage_90_high",
        "grid_point_frontier_efficiency_leverage_extrapolation_factor"}) {
    table.columns.push_back({name, exports::ColumnType::kDouble, "ratio",
                             "The analysis's EL (parity report only; docs/api.md, AnalyzeSweep)."});
  }
  using exports::Cell;
  for (size_t i = 0; i < table.rows.size(); ++i) {
    const std::string& run_id = data.results[i].run_id();
    const auto found_el = leverage.find(run_id);
    const parity::v1::RunLeverage* fixed_n =
        found_el == leverage.end() ? nullptr : found_el->second;
    const bool measured = fixed_n != nullptr && fixed_n->efficiency_leverage() > 0;
    const bool interval = measured && fixed_n->has_efficiency_leverage_interval();
    std::vector<Cell>& cells = table.rows[i];
    cells.push_back(measured ? Cell(fixed_n->efficiency_leverage()) : Cell());
    cells.push_back(interval ? Cell(fixed_n->efficiency_leverage_interval().low()) : Cell());
    cells.push_back(interval ? Cell(fixed_n->efficiency_leverage_interval().high()) : Cell());
    const auto spec = specs.find(run_id);
    const parity::v1::GridPointSummary* point =
        spec == specs.end() ? nullptr : GridPointOf(data, *spec->second);
    const parity::v1::GridPointLeverage* l =
        point != nullptr && point->has_frontier_leverage() ? &point->frontier_leverage() : nullptr;
    const bool el = l != nullptr && l->value() > 0;
    cells.push_back(el ? Cell(l->value()) : Cell());
    cells.push_back(el && l->has_interval() ? Cell(l->interval().low()) : Cell());
    cells.push_back(el && l->has_interval() ? Cell(l->interval().high()) : Cell());
    cells.push_back(el && l->extrapolated() ? Cell(l->extrapolation_factor()) : Cell());
  }
  return table;
}

std::string RunsCsv(const ReportData& data) {
  std::ostringstream out;
  exports::WriteCsv(RunsTable(data), out);
  return out.str();
}

absl::Status WriteReport(const ReportData& data, const std::string& dir) {
  const std::filesystem::path root(dir);
  for (const web::EmbeddedAsset& asset : web::EmbeddedAssets()) {
    if (std::string_view(asset.name) == "index.html") continue;
    PARITY_RETURN_IF_ERROR(WriteFile(root / asset.name, asset.content()));
  }
  // A classic script, not a JSON file: browsers refuse fetch() of file:// pages.
  const json report = {{"info",
                        {{"sweep_id", data.sweep.sweep_id()},
                         {"scheduler", data.scheduler},
                         {"generated_at", data.generated_at}}},
                       {"documents", Documents(data)}};
  const std::string script = absl::StrCat(
      "// Written by `parity report`: the dashboard's API documents for one sweep.\n"
      "window.PARITY_REPORT = ",
      report.dump(-1, ' ', false, json::error_handler_t::replace), ";\n");
  PARITY_RETURN_IF_ERROR(WriteFile(root / "data.js", script));
  const exports::ExportTable runs = RunsTable(data);
  std::ostringstream csv, parquet;
  exports::WriteCsv(runs, csv);
  PARITY_RETURN_IF_ERROR(WriteFile(root / "runs.csv", csv.str()));
  PARITY_RETURN_IF_ERROR(exports::WriteParquet(runs, parquet));
  PARITY_RETURN_IF_ERROR(WriteFile(root / "runs.parquet", parquet.str()));
  PARITY_RETURN_IF_ERROR(
      WriteFile(root / "analysis.md",
                AnalysisMarkdown(data.sweep.spec().name(), data.analysis, data.analysis_error) +
                    EvalSetsMarkdown(data.other_sets)));
  const std::string index = web::IndexHtmlWith("<script src=\"data.js\"></script>");
  if (index.empty()) return absl::InternalError("index.html is not embedded in this binary");
  return WriteFile(root / "index.html", index);
}

}  // namespace parity::cli
