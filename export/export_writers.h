// The export table as text: CSV (RFC 4180, header of column names, null = empty cell) and JSON
// (an array of objects in column order, numbers as numbers, null = null), doubles at full
// precision (the shortest text that reads back to the same double), and the documented column
// list as Markdown (docs/export.md) and JSON (clients/python/parity_client/export_columns.json).
#pragma once

#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "export/export_schema.h"

namespace parity::exports {

// The shortest decimal that round-trips (std::to_chars): 0.1 → "0.1", 1e300 → "1e+300".
std::string FormatDouble(double value);

// A cell as CSV/JSON text would hold it, without quoting: "" for null.
std::string CellText(const Cell& cell);

// A table's rows one at a time, from an ExportTable or an ExportBuilder (which computes each row
// as it is asked for, so a large export holds one chunk of cells, not all of them).
struct RowSource {
  std::vector<Column> columns;
  size_t size = 0;
  std::function<void(size_t row, std::vector<Cell>& cells)> row;
};
RowSource RowsOf(const ExportTable& table);
RowSource RowsOf(const ExportBuilder& builder);

void WriteCsv(const RowSource& rows, std::ostream& out);
void WriteJson(const RowSource& rows, std::ostream& out);
inline void WriteCsv(const ExportTable& table, std::ostream& out) { WriteCsv(RowsOf(table), out); }
inline void WriteJson(const ExportTable& table, std::ostream& out) {
  WriteJson(RowsOf(table), out);
}

// Parquet (export/parquet_writer.h): string → BYTE_ARRAY UTF8, int64 → INT64, double → DOUBLE,
// every column OPTIONAL; row groups of `row_group_rows` rows.
absl::Status WriteParquet(const RowSource& rows, std::ostream& out, size_t row_group_rows = 16384);
inline absl::Status WriteParquet(const ExportTable& table, std::ostream& out,
                                 size_t row_group_rows = 16384) {
  return WriteParquet(RowsOf(table), out, row_group_rows);
}

// docs/export.md: the column reference (`parity results --columns`).
std::string ColumnsMarkdown();

// The documented columns as JSON, [{"name", "type", "unit", "meaning"}, ...]
// (`parity results --columns --format json`), the Python client's copy of the schema.
std::string ColumnsJson();

}  // namespace parity::exports
