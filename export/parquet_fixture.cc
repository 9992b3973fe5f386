// Writes the Parquet files export_parquet_read_back reads back with hyparquet, each beside the
// values it must hold (NAME.expected.json: int64 and doubles as decimal text, so JavaScript's
// doubles lose nothing on the way):
//   raw.parquet     the writer alone: BOOLEAN, INT64 (±2^63, 2^53+1), DOUBLE (5e-324, -0, 1/3),
//                   unicode strings, nulls in every column, row groups of 3 rows
//   export.parquet  a results export (BuildExportTable), row groups of 2 rows
// Usage: export_parquet_fixture OUT_DIR
#include <cstdint>
#include <fstream>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

#include "export/export_schema.h"
#include "export/export_writers.h"
#include "export/parquet_writer.h"
#include "nlohmann/json.hpp"

namespace {

using nlohmann::json;
using parity::exports::ParquetType;
using parity::exports::ParquetValue;

json Expected(const ParquetValue& v) {
  if (const auto* b = std::get_if<bool>(&v)) return *b;
  if (const auto* i = std::get_if<int64_t>(&v)) return {{"int64", std::to_string(*i)}};
  if (const auto* d = std::get_if<double>(&v))
    return {{"double", parity::exports::FormatDouble(*d)}};
  if (const auto* s = std::get_if<std::string_view>(&v)) return std::string(*s);
  return nullptr;
}

int WriteRaw(const std::string& dir) {
  const std::vector<parity::exports::ParquetColumn> columns = {{"flag", ParquetType::kBoolean},
                                                               {"count", ParquetType::kInt64},
                                                               {"value", ParquetType::kDouble},
                                                               {"text", ParquetType::kString}};
  const std::monostate null;
  const std::vector<std::vector<ParquetValue>> rows = {
      {true, int64_t{9007199254740993}, 0.1, "ΔBPC vs dense 1C — D̂"},
      {null, std::numeric_limits<int64_t>::min(), 1.0 / 3, ""},
      {false, std::numeric_limits<int64_t>::max(), 5e-324, null},
      {true, null, null, "日本語 🚀"},
      {null, null, null, null},
      {false, int64_t{0}, -0.0, "quote \" comma , newline \n tab \t"},
      {true, int64_t{1}, std::numeric_limits<double>::max(), "x"},
      {true, int64_t{1} << 62, 0.1 + 0.2, "last"}};
  std::ofstream out(dir + "/raw.parquet", std::ios::binary);
  parity::exports::ParquetWriter writer(out, columns);
  for (size_t first = 0; first < rows.size(); first += 3) {
    const size_t n = std::min<size_t>(3, rows.size() - first);
    const auto status =
        writer.AddRowGroup(n, [&](size_t row, size_t column) { return rows[first + row][column]; });
    if (!status.ok()) return std::cerr << status << "\n", 1;
  }
  if (const auto status = writer.Close(); !status.ok()) return std::cerr << status << "\n", 1;
  json expected = {{"columns", json::array()}, {"rows", json::array()}};
  for (const auto& c : columns) expected["columns"].push_back(c.name);
  for (const auto& row : rows) {
    json cells = json::array();
    for (const auto& v : row) cells.push_back(Expected(v));
    expected["rows"].push_back(cells);
  }
  std::ofstream(dir + "/raw.expected.json") << expected.dump(1);
  return 0;
}

int WriteExport(const std::string& dir) {
  parity::v1::ResultRow dense;
  dense.set_run_id("00000000-0000-0000-0000-00000000000d");
  dense.set_sweep_id("sweep");
  dense.set_name("dense-1c");
  dense.set_role(parity::v1::RUN_ROLE_DENSE_BASELINE);
  dense.set_state(parity::v1::RUN_STATE_SUCCEEDED);
  dense.set_compute_multiple(1);
  dense.set_final_val_bpc(2.0000000000000004);
  dense.set_params(123456789012345);
  parity::v1::ResultRow moe = dense;
  moe.set_run_id("00000000-0000-0000-0000-00000000000e");
  moe.set_name("moe-r0.2 ✓");
  moe.set_role(parity::v1::RUN_ROLE_MOE);
  moe.set_final_val_bpc(1.9);
  parity::v1::ResultRow failed = moe;
  failed.set_run_id("00000000-0000-0000-0000-00000000000f");
  failed.set_state(parity::v1::RUN_STATE_FAILED);
  failed.set_final_val_bpc(0);
  std::map<std::string, parity::v1::Run> runs;
  runs[failed.run_id()].set_failure_class(parity::v1::FAILURE_CLASS_USER_ERROR);
  runs[failed.run_id()].mutable_failure()->set_message("data.corpus_path: cannot open 'kjv'");
  const auto table = parity::exports::BuildExportTable({dense, moe, failed}, runs);
  std::ofstream out(dir + "/export.parquet", std::ios::binary);
  if (const auto s = parity::exports::WriteParquet(table, out, 2); !s.ok())
    return std::cerr << s << "\n", 1;
  json expected = {{"columns", json::array()}, {"rows", json::array()}};
  for (const auto& c : table.columns) expected["columns"].push_back(c.name);
  for (const auto& row : table.rows) {
    json cells = json::array();
    for (const auto& cell : row) {
      ParquetValue v = std::monostate();
      if (const auto* i = std::get_if<int64_t>(&cell)) v = *i;
      if (const auto* d = std::get_if<double>(&cell)) v = *d;
      if (const auto* s = std::get_if<std::string>(&cell)) v = std::string_view(*s);
      cells.push_back(Expected(v));
    }
    expected["rows"].push_back(cells);
  }
  std::ofstream(dir + "/export.expected.json") << expected.dump(1);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) return std::cerr << "usage: export_parquet_fixture OUT_DIR\n", 2;
  return WriteRaw(argv[1]) != 0 ? 1 : WriteExport(argv[1]);
}
