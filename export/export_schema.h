// The one export column set of a sweep's results: what `parity results --format csv|json|parquet`,
// `parity report`'s runs.csv/runs.parquet and the Python client's frames all write, defined here
// once (docs/export.md is `parity results --columns`'s output and a test keeps them equal).
//
// A table is built from the scheduler's ResultRows (accounting, outcome) joined by run id with the
// Runs (grid point, hyperparameters, failure). Missing is a null cell, never 0: a failed run's BPC,
// a ΔBPC without a finished baseline, an unset optimizer override. ΔBPC against every dense
// baseline multiple of the sweep (1C, 2C, ...) is computed here, in one place (ComputeDeltas).
//
// Column order: the fixed columns of FixedColumns() with three families spliced in at their
// documented places: grid.<axis> (every axis of any run's grid point, sorted), final_bpc.<set>
// (every evaluation set beyond the primary, sorted) and delta_bpc_vs_dense_<m>c[.<set>] (every
// dense baseline multiple of the sweep, ascending, 1C always).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "parity/v1/run.pb.h"
#include "parity/v1/sweep_service.pb.h"

namespace parity::exports {

enum class ColumnType { kString, kInt64, kDouble };

// "string", "int64", "double": the spelling of docs/export.md and the JSON column list.
const char* ColumnTypeName(ColumnType type);

struct Column {
  std::string name;  // snake_case; a family member is "<prefix><key>"
  ColumnType type = ColumnType::kString;
  std::string unit;     // "bits per byte", "FLOPs", ...; "" for text
  std::string meaning;  // one sentence for docs/export.md
};

// A cell: null (monostate), an integer, a finite double or UTF-8 text.
using Cell = std::variant<std::monostate, int64_t, double, std::string>;

struct ExportTable {
  std::vector<Column> columns;
  std::vector<std::vector<Cell>> rows;  // each rows[i].size() == columns.size()
};

// The fixed columns in order, families as one placeholder each ("grid.<axis>", "final_bpc.<set>",
// "delta_bpc_vs_dense_<m>c", "delta_bpc_vs_dense_<m>c.<set>"): what docs/export.md lists.
const std::vector<Column>& DocumentedColumns();

// A run as the export needs it, without its model/data specs: keeps memory at a few hundred
// bytes a run for a 100,000-run sweep (the CLI slims each page as it arrives).
void SlimRunForExport(parity::v1::Run& run);

// The table of `rows` (grid order), each joined with runs[row.run_id()] when present (absent: its
// grid-point, hyperparameter and failure cells are null), one row's cells at a time: a
// 100,000-run export is written without holding every cell. Borrows `rows` and `runs`, which
// must outlive it. Immutable after construction; Row() may be called from any thread.
class ExportBuilder {
 public:
  ExportBuilder(const std::vector<parity::v1::ResultRow>& rows,
                const std::map<std::string, parity::v1::Run>& runs);
  ~ExportBuilder();
  ExportBuilder(const ExportBuilder&) = delete;
  ExportBuilder& operator=(const ExportBuilder&) = delete;

  const std::vector<Column>& columns() const { return columns_; }
  size_t size() const { return rows_.size(); }
  // Row i's cells, one per column (`cells` is overwritten).
  void Row(size_t i, std::vector<Cell>& cells) const;

 private:
  struct Plans;  // how each column is filled, and the sweep's dense baselines
  const std::vector<parity::v1::ResultRow>& rows_;
  const std::map<std::string, parity::v1::Run>& runs_;
  std::vector<Column> columns_;
  std::unique_ptr<const Plans> plans_;
};

// Every row of an ExportBuilder at once.
ExportTable BuildExportTable(const std::vector<parity::v1::ResultRow>& rows,
                             const std::map<std::string, parity::v1::Run>& runs);

// The results view's row of a run, from the run alone (ListRuns): what the scheduler's `results`
// view derives from the same columns, without its ΔBPC fields (BuildExportTable computes ΔBPC
// itself). The CLI reads a sweep this way: the view's per-row baseline lookup makes QueryResults
// slow on 100,000-run sweeps (bench/export/README.md). BPC, measured M and wall time are set
// only for a SUCCEEDED run (the only runs whose Run carries a summary).
parity::v1::ResultRow ResultRowOfRun(const parity::v1::Run& run);

// "1c", "2c", "0p5c": the column suffix of a baseline multiple ('.' would read as a set suffix).
std::string MultipleSuffix(double multiple);

}  // namespace parity::exports
