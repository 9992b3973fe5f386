#include "cli/report_writer.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "cli/client_format.h"
#include "cli/report_analysis.h"
#include "cli/table.h"
#include "core/status_macros.h"
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

std::string RoleName(parity::v1::RunRole role) {
  switch (role) {
    case parity::v1::RUN_ROLE_DENSE_BASELINE:
      return "dense";
    case parity::v1::RUN_ROLE_DENSE_FRONTIER:
      return "dense-frontier";
    default:
      return "moe";
  }
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

std::string RunsCsv(const ReportData& data) {
  std::map<std::string, const parity::v1::ResultRow*> results;
  for (const parity::v1::ResultRow& row : data.results) results[row.run_id()] = &row;
  std::map<std::string, const parity::v1::RunLeverage*> leverage;
  if (data.analysis) {
    for (const auto& l : data.analysis->leverage()) leverage[l.run_id()] = &l;
  }
  auto number = [](double v) { return v == 0 ? std::string() : fmt::format("{:.6g}", v); };
  auto el = [](const parity::v1::GridPointLeverage* l) -> std::vector<std::string> {
    if (l == nullptr || l->value() <= 0) return {"", "", "", ""};
    return {fmt::format("{:.4f}", l->value()),
            l->has_interval() ? fmt::format("{:.4f}", l->interval().low()) : "",
            l->has_interval() ? fmt::format("{:.4f}", l->interval().high()) : "",
            l->extrapolated() ? fmt::format("{:.3f}", l->extrapolation_factor()) : ""};
  };
  std::vector<TableRow> rows;
  for (const ReportRun& r : data.runs) {
    const parity::v1::RunSpec& spec = r.run.spec();
    const parity::v1::Accounting& a = spec.accounting();
    const auto found = results.find(r.run.run_id());
    const parity::v1::ResultRow* result = found == results.end() ? nullptr : found->second;
    const bool finished = result != nullptr && result->final_val_bpc() > 0;
    const auto found_el = leverage.find(r.run.run_id());
    const parity::v1::RunLeverage* fixed_n =
        found_el == leverage.end() ? nullptr : found_el->second;
    const bool measured = fixed_n != nullptr && fixed_n->efficiency_leverage() > 0;
    const bool interval = measured && fixed_n->has_efficiency_leverage_interval();
    const parity::v1::GridPointSummary* point = GridPointOf(data, spec);
    rows.push_back(
        {r.run.run_id(),
         spec.name(),
         RoleName(spec.role()),
         result ? result->layout() : "",
         spec.compute_budget(),
         fmt::format("{:g}", spec.compute_multiple()),
         spec.data_variant(),
         fmt::format("{}", spec.training().seed()),
         RunStateName(r.run.state()),
         fmt::format("{:.6f}", a.activation_rate()),
         fmt::format("{}", a.params()),
         fmt::format("{}", a.active_params()),
         fmt::format("{:.6e}", a.flops_per_token()),
         result ? number(result->measured_flops_per_token()) : "",
         fmt::format("{:.6e}", a.compute_flops()),
         fmt::format("{}", a.tokens()),
         fmt::format("{}", a.unique_tokens()),
         fmt::format("{:.4f}", a.epochs()),
         finished ? fmt::format("{:.6f}", result->final_val_bpc()) : "",
         finished ? fmt::format("{:.6f}", result->delta_bpc_vs_dense()) : "",
         number(spec.predicted_efficiency_leverage()),
         measured ? fmt::format("{:.4f}", fixed_n->efficiency_leverage()) : "",
         interval ? fmt::format("{:.4f}", fixed_n->efficiency_leverage_interval().low()) : "",
         interval ? fmt::format("{:.4f}", fixed_n->efficiency_leverage_interval().high()) : "",
         result ? number(result->wall_seconds()) : ""});
    for (const std::string& cell :
         el(point != nullptr && point->has_frontier_leverage() ? &point->frontier_leverage()
                                                               : nullptr)) {
      rows.back().push_back(cell);
    }
  }
  return RenderCsv({"run_id",
                    "name",
                    "role",
                    "layout",
                    "compute_budget",
                    "compute_multiple",
                    "data_variant",
                    "seed",
                    "state",
                    "activation_rate",
                    "params",
                    "active_params",
                    "flops_per_token",
                    "measured_flops_per_token",
                    "compute_flops",
                    "tokens",
                    "unique_tokens",
                    "epochs",
                    "final_val_bpc",
                    "delta_bpc_vs_dense_1c",
                    "predicted_efficiency_leverage_published_law",
                    "fixed_n_efficiency_leverage",
                    "fixed_n_efficiency_leverage_90_low",
                    "fixed_n_efficiency_leverage_90_high",
                    "wall_seconds",
                    "grid_point_frontier_efficiency_leverage",
                    "grid_point_frontier_efficiency_leverage_90_low",
                    "grid_point_frontier_efficiency_leverage_90_high",
                    "grid_point_frontier_efficiency_leverage_extrapolated_factor"},
                   rows);
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
  PARITY_RETURN_IF_ERROR(WriteFile(root / "runs.csv", RunsCsv(data)));
  PARITY_RETURN_IF_ERROR(
      WriteFile(root / "analysis.md",
                AnalysisMarkdown(data.sweep.spec().name(), data.analysis, data.analysis_error) +
                    EvalSetsMarkdown(data.other_sets)));
  const std::string index = web::IndexHtmlWith("<script src=\"data.js\"></script>");
  if (index.empty()) return absl::InternalError("index.html is not embedded in this binary");
  return WriteFile(root / "index.html", index);
}

}  // namespace parity::cli
