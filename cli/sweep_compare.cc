#include "cli/sweep_compare.h"

#include <map>
#include <utility>

#include "cli/table.h"
#include "core/planner_sharing.h"
#include "fmt/format.h"

namespace parity::cli {
namespace {

using parity::v1::Run;

std::string CellKey(const parity::v1::GroupRef& group) {
  std::string key = group.compute_budget() + " " + group.data_variant();
  const std::map<std::string, std::string> sorted(group.grid_point().begin(),
                                                  group.grid_point().end());
  for (const auto& [axis, value] : sorted) {
    if (axis == "seed" || axis == "compute" || axis == "data") continue;
    key += fmt::format(" {}={}", axis, value);
  }
  return key;
}

struct Cells {
  std::vector<std::string> order;
  std::map<std::string, std::pair<int, double>> finished;  // key → (count, BPC sum)
};

Cells CellsOf(const std::vector<Run>& runs) {
  Cells cells;
  for (const Run& run : runs) {
    const bool done = run.state() == parity::v1::RUN_STATE_SUCCEEDED && run.has_summary();
    for (const parity::v1::GroupRef& group : core::GroupsOf(run.spec())) {
      const std::string key = CellKey(group);
      auto [it, inserted] = cells.finished.emplace(key, std::pair<int, double>{0, 0.0});
      if (inserted) cells.order.push_back(key);
      if (done) {
        it->second.first += 1;
        it->second.second += run.summary().final_val_bpc();
      }
    }
  }
  return cells;
}

std::string Bpc(int n, double value) { return n > 0 ? fmt::format("{:.4f}", value) : "-"; }

}  // namespace

SweepComparison CompareSweeps(const std::vector<Run>& a, const std::vector<Run>& b) {
  const Cells cells_a = CellsOf(a);
  const Cells cells_b = CellsOf(b);
  SweepComparison out;
  for (const std::string& key : cells_a.order) {
    auto other = cells_b.finished.find(key);
    if (other == cells_b.finished.end()) {
      out.only_a.push_back(key);
      continue;
    }
    const auto& [n_a, sum_a] = cells_a.finished.at(key);
    const auto& [n_b, sum_b] = other->second;
    out.matched.push_back(
        {key, n_a, n_b, n_a > 0 ? sum_a / n_a : 0.0, n_b > 0 ? sum_b / n_b : 0.0});
  }
  for (const std::string& key : cells_b.order) {
    if (!cells_a.finished.contains(key)) out.only_b.push_back(key);
  }
  return out;
}

std::string FormatComparison(const SweepComparison& c, std::string_view name_a,
                             std::string_view name_b) {
  std::vector<TableRow> rows;
  for (const ComparedCell& cell : c.matched) {
    const bool both = cell.finished_a > 0 && cell.finished_b > 0;
    rows.push_back({cell.cell, std::to_string(cell.finished_a), Bpc(cell.finished_a, cell.bpc_a),
                    std::to_string(cell.finished_b), Bpc(cell.finished_b, cell.bpc_b),
                    both ? fmt::format("{:+.4f}", cell.bpc_b - cell.bpc_a) : std::string("-")});
  }
  std::string out = fmt::format("A = {}\nB = {}\n", name_a, name_b);
  out +=
      RenderTable({"cell", "runs A", "BPC A", "runs B", "BPC B", "ΔBPC (B − A)"}, rows, {"cell"});
  for (const std::string& key : c.only_a) out += fmt::format("only in A: {}\n", key);
  for (const std::string& key : c.only_b) out += fmt::format("only in B: {}\n", key);
  return out;
}

}  // namespace parity::cli
