// A small Parquet writer: one file, row groups, one PLAIN-encoded uncompressed data page (v1) per
// column chunk, flat OPTIONAL columns of BOOLEAN, INT64, DOUBLE or BYTE_ARRAY (UTF-8 string) with
// RLE definition levels for nulls, and FileMetaData in Thrift's compact protocol. What it leaves
// out (dictionaries, compression, statistics, nesting, page indexes) readers do not need; files
// read back in hyparquet (export/parquet_reader_test.mjs), and anything that reads Parquet 1.0.
//
//   "PAR1" | per row group, per column: PageHeader + def levels + values | FileMetaData | len |
//   "PAR1"
//
// Not thread-safe; one writer per file. Output is written as each row group is added, so memory
// is one row group's pages.
#pragma once

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "absl/status/status.h"

namespace parity::exports {

enum class ParquetType { kBoolean, kInt64, kDouble, kString };

struct ParquetColumn {
  std::string name;
  ParquetType type = ParquetType::kString;
};

// A value: null, or of the column's type (a string viewed, not copied).
using ParquetValue = std::variant<std::monostate, bool, int64_t, double, std::string_view>;

class ParquetWriter {
 public:
  // `out` outlives the writer; "PAR1" is written at once.
  ParquetWriter(std::ostream& out, std::vector<ParquetColumn> columns);

  // Appends a row group of `rows` rows; value(row, column) gives each cell. A value of another
  // type than its column's is INVALID_ARGUMENT naming the column.
  absl::Status AddRowGroup(size_t rows,
                           const std::function<ParquetValue(size_t row, size_t column)>& value);

  // Writes the footer; the file is complete after it. Nothing may be added afterwards.
  absl::Status Close();

 private:
  struct ChunkInfo {
    int64_t offset = 0;
    int64_t bytes = 0;
    int64_t values = 0;
  };
  struct RowGroupInfo {
    std::vector<ChunkInfo> chunks;
    int64_t rows = 0;
    int64_t bytes = 0;
  };

  std::string FileMetaData() const;

  std::ostream& out_;
  std::vector<ParquetColumn> columns_;
  std::vector<RowGroupInfo> row_groups_;
  int64_t offset_ = 0;  // bytes written so far
  bool closed_ = false;
};

}  // namespace parity::exports
