#include "cli/results_export.h"

#include <cmath>

#include "absl/strings/match.h"
#include "cli/table.h"
#include "export/export_writers.h"
#include "fmt/format.h"

namespace parity::cli {
namespace {

using exports::Cell;

// A table cell holds the start of a long message; `parity status` prints it whole.
std::string Shorten(const std::string& text, size_t max_bytes = 72) {
  if (text.size() <= max_bytes) return text;
  size_t cut = max_bytes - 3;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;  // UTF-8
  return text.substr(0, cut) + "...";
}

// A cell for a person: null as "-", the number in `style`.
enum class Style { kText, kCount, kSci, kPercent, kFixed2, kBpc, kDelta };

std::string Show(const Cell& cell, Style style) {
  if (std::holds_alternative<std::monostate>(cell)) return "-";
  if (const auto* s = std::get_if<std::string>(&cell)) return *s;
  const double v = std::holds_alternative<int64_t>(cell)
                       ? static_cast<double>(std::get<int64_t>(cell))
                       : std::get<double>(cell);
  switch (style) {
    case Style::kCount:
      return HumanCount(v);
    case Style::kSci:
      return Sci(v);
    case Style::kPercent:
      return fmt::format("{:.1f}%", v * 100);
    case Style::kFixed2:
      return fmt::format("{:.2f}", v);
    case Style::kBpc:
      return fmt::format("{:.4f}", v);
    case Style::kDelta:
      return fmt::format("{:+.4f}", v);
    case Style::kText:
      break;
  }
  return exports::CellText(cell);
}

// Which export columns the table shows, and how.
Style TableStyle(const std::string& name, bool* shown) {
  static const std::map<std::string, Style> kFixed = {
      {"run_name", Style::kText},
      {"role", Style::kText},
      {"layout", Style::kText},
      {"state", Style::kText},
      {"compute_budget", Style::kText},
      {"seed", Style::kText},
      {"activation_rate", Style::kPercent},
      {"params", Style::kCount},
      {"active_params", Style::kCount},
      {"compute_flops", Style::kSci},
      {"tokens", Style::kCount},
      {"unique_tokens", Style::kCount},
      {"epochs", Style::kFixed2},
      {"final_val_bpc", Style::kBpc},
      {"predicted_efficiency_leverage", Style::kFixed2}};
  *shown = true;
  if (const auto it = kFixed.find(name); it != kFixed.end()) return it->second;
  if (absl::StartsWith(name, "grid.")) return Style::kText;
  if (absl::StartsWith(name, "final_bpc.")) return Style::kBpc;
  if (absl::StartsWith(name, "delta_bpc_vs_dense_")) return Style::kDelta;
  *shown = false;
  return Style::kText;
}

}  // namespace

FetchedSweep FetchSweepForExport(parity::v1::SweepService::Stub& stub, const std::string& sweep_id,
                                 const SchedulerOptions& options, grpc::Status& status) {
  // From ListRuns alone (keyset pages by ordinal): QueryResults' view looks up each row's
  // baseline in SQL, which is slow on 100,000-run sweeps, and the export computes ΔBPC itself.
  FetchedSweep fetched;
  parity::v1::ListRunsRequest list;
  list.set_sweep_id(sweep_id);
  list.set_page_size(1000);  // the API's largest page
  do {
    parity::v1::ListRunsResponse page;
    status = stub.ListRuns(UnaryContext(options).get(), list, &page);
    if (!status.ok()) return {};
    for (auto& run : *page.mutable_runs()) {
      fetched.rows.push_back(exports::ResultRowOfRun(run));
      exports::SlimRunForExport(run);
      std::string id = run.run_id();
      fetched.runs.emplace(std::move(id), std::move(run));
    }
    list.set_page_token(page.next_page_token());
  } while (!list.page_token().empty());
  return fetched;
}

exports::ExportTable FetchExportTable(parity::v1::SweepService::Stub& stub,
                                      const std::string& sweep_id, const SchedulerOptions& options,
                                      grpc::Status& status) {
  const FetchedSweep fetched = FetchSweepForExport(stub, sweep_id, options, status);
  if (!status.ok()) return {};
  return exports::BuildExportTable(fetched.rows, fetched.runs);
}

exports::ExportTable ExportTableOf(const std::vector<parity::v1::ResultRow>& rows,
                                   const std::vector<parity::v1::Run>& runs) {
  std::map<std::string, parity::v1::Run> by_id;
  for (const parity::v1::Run& run : runs) by_id[run.run_id()] = run;
  return exports::BuildExportTable(rows, by_id);
}

std::string FormatResultsTable(const exports::ExportTable& table) {
  TableRow header;
  std::vector<std::pair<size_t, Style>> shown;
  size_t failure_class = table.columns.size(), failure_message = table.columns.size();
  for (size_t i = 0; i < table.columns.size(); ++i) {
    const std::string& name = table.columns[i].name;
    if (name == "failure_class") failure_class = i;
    if (name == "failure_message") failure_message = i;
    bool show = false;
    const Style style = TableStyle(name, &show);
    if (!show) continue;
    shown.emplace_back(i, style);
    header.push_back(name);
  }
  header.push_back("failure");
  std::vector<TableRow> rows;
  for (const std::vector<Cell>& cells : table.rows) {
    TableRow& row = rows.emplace_back();
    for (const auto& [i, style] : shown) row.push_back(Show(cells[i], style));
    std::string failure;
    if (failure_class < cells.size()) failure = exports::CellText(cells[failure_class]);
    if (failure_message < cells.size()) {
      const std::string message = exports::CellText(cells[failure_message]);
      if (!message.empty()) failure = failure.empty() ? message : failure + ": " + message;
    }
    row.push_back(failure.empty() ? "-" : Shorten(failure));
  }
  std::vector<std::string> left = {"run_name", "role",           "layout",
                                   "state",    "compute_budget", "failure"};
  for (const std::string& name : header)
    if (absl::StartsWith(name, "grid.")) left.push_back(name);
  return RenderTable(header, rows, left);
}

absl::Status WriteResults(const exports::ExportBuilder& export_rows, ResultsFormat format,
                          std::ostream& out) {
  switch (format) {
    case ResultsFormat::kTable: {
      exports::ExportTable table;
      table.columns = export_rows.columns();
      table.rows.resize(export_rows.size());
      for (size_t i = 0; i < export_rows.size(); ++i) export_rows.Row(i, table.rows[i]);
      out << FormatResultsTable(table);
      return absl::OkStatus();
    }
    case ResultsFormat::kCsv:
      exports::WriteCsv(exports::RowsOf(export_rows), out);
      return absl::OkStatus();
    case ResultsFormat::kJson:
      exports::WriteJson(exports::RowsOf(export_rows), out);
      return absl::OkStatus();
    case ResultsFormat::kParquet:
      return exports::WriteParquet(exports::RowsOf(export_rows), out);
  }
  return absl::OkStatus();
}

}  // namespace parity::cli
