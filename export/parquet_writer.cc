#include "export/parquet_writer.h"

#include <bit>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "export/thrift_compact.h"

namespace parity::exports {
namespace {

static_assert(std::endian::native == std::endian::little, "Parquet PLAIN is little-endian");

// parquet.thrift's enums, by number.
constexpr int32_t kTypeBoolean = 0, kTypeInt64 = 2, kTypeDouble = 5, kTypeByteArray = 6;
constexpr int32_t kRepetitionRequired = 0, kRepetitionOptional = 1;
constexpr int32_t kConvertedUtf8 = 0;
constexpr int32_t kEncodingPlain = 0, kEncodingRle = 3;
constexpr int32_t kCodecUncompressed = 0;
constexpr int32_t kPageData = 0;

int32_t PhysicalType(ParquetType type) {
  switch (type) {
    case ParquetType::kBoolean:
      return kTypeBoolean;
    case ParquetType::kInt64:
      return kTypeInt64;
    case ParquetType::kDouble:
      return kTypeDouble;
    case ParquetType::kString:
      return kTypeByteArray;
  }
  return kTypeByteArray;
}

void Append32(std::string& out, uint32_t v) { out.append(reinterpret_cast<const char*>(&v), 4); }

void Varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

// Definition levels (bit width 1) in the RLE/bit-packed hybrid, as RLE runs only: a varint
// header (run length << 1) and the level in one byte; a 4-byte length prefix (data page v1).
std::string DefinitionLevels(const std::vector<uint8_t>& defined) {
  std::string runs;
  for (size_t i = 0; i < defined.size();) {
    size_t j = i;
    while (j < defined.size() && defined[j] == defined[i]) ++j;
    Varint(runs, static_cast<uint64_t>(j - i) << 1);
    runs.push_back(static_cast<char>(defined[i]));
    i = j;
  }
  std::string out;
  Append32(out, static_cast<uint32_t>(runs.size()));
  return out + runs;
}

// PLAIN values of the non-null cells; false when a cell has another type than the column.
bool PlainValue(ParquetType type, const ParquetValue& value, std::string& out, uint8_t& bits,
                int& nbits) {
  switch (type) {
    case ParquetType::kBoolean: {
      const auto* b = std::get_if<bool>(&value);
      if (b == nullptr) return false;
      if (*b) bits |= static_cast<uint8_t>(1u << nbits);  // bit-packed, LSB first
      if (++nbits == 8) {
        out.push_back(static_cast<char>(bits));
        bits = 0;
        nbits = 0;
      }
      return true;
    }
    case ParquetType::kInt64: {
      const auto* i = std::get_if<int64_t>(&value);
      if (i == nullptr) return false;
      out.append(reinterpret_cast<const char*>(i), 8);
      return true;
    }
    case ParquetType::kDouble: {
      const auto* d = std::get_if<double>(&value);
      if (d == nullptr) return false;
      out.append(reinterpret_cast<const char*>(d), 8);
      return true;
    }
    case ParquetType::kString: {
      const auto* s = std::get_if<std::string_view>(&value);
      if (s == nullptr) return false;
      Append32(out, static_cast<uint32_t>(s->size()));
      out.append(*s);
      return true;
    }
  }
  return false;
}

std::string PageHeader(int32_t values, int32_t page_bytes) {
  CompactWriter w;
  w.I32(1, kPageData);
  w.I32(2, page_bytes);  // uncompressed_page_size
  w.I32(3, page_bytes);  // compressed_page_size
  w.BeginStruct(5);      // data_page_header
  w.I32(1, values);      // num_values, nulls included
  w.I32(2, kEncodingPlain);
  w.I32(3, kEncodingRle);  // definition levels
  w.I32(4, kEncodingRle);  // repetition levels (none: flat schema)
  w.EndStruct();
  return w.Finish();
}

}  // namespace

ParquetWriter::ParquetWriter(std::ostream& out, std::vector<ParquetColumn> columns)
    : out_(out), columns_(std::move(columns)) {
  out_.write("PAR1", 4);
  offset_ = 4;
}

absl::Status ParquetWriter::AddRowGroup(
    size_t rows, const std::function<ParquetValue(size_t row, size_t column)>& value) {
  if (closed_) return absl::FailedPreconditionError("parquet: a row group after Close()");
  if (rows > static_cast<size_t>(std::numeric_limits<int32_t>::max()))
    return absl::InvalidArgumentError("parquet: a row group holds at most 2^31-1 rows");
  RowGroupInfo group;
  group.rows = static_cast<int64_t>(rows);
  for (size_t c = 0; c < columns_.size(); ++c) {
    std::vector<uint8_t> defined(rows);
    std::string values;
    uint8_t bits = 0;
    int nbits = 0;
    for (size_t r = 0; r < rows; ++r) {
      const ParquetValue cell = value(r, c);
      if (std::holds_alternative<std::monostate>(cell)) continue;
      defined[r] = 1;
      if (!PlainValue(columns_[c].type, cell, values, bits, nbits)) {
        return absl::InvalidArgumentError(absl::StrCat("parquet: column '", columns_[c].name,
                                                       "' row ", r, ": a value of another type"));
      }
    }
    if (nbits > 0) values.push_back(static_cast<char>(bits));
    const std::string page = DefinitionLevels(defined) + values;
    if (page.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max()))
      return absl::InvalidArgumentError(
          absl::StrCat("parquet: column '", columns_[c].name,
                       "' exceeds 2 GiB in one row group; add fewer rows"));
    const std::string header =
        PageHeader(static_cast<int32_t>(rows), static_cast<int32_t>(page.size()));
    const ChunkInfo chunk{offset_, static_cast<int64_t>(header.size() + page.size()),
                          static_cast<int64_t>(rows)};
    out_.write(header.data(), static_cast<std::streamsize>(header.size()));
    out_.write(page.data(), static_cast<std::streamsize>(page.size()));
    offset_ += chunk.bytes;
    group.bytes += chunk.bytes;
    group.chunks.push_back(chunk);
  }
  row_groups_.push_back(std::move(group));
  return out_ ? absl::OkStatus() : absl::DataLossError("parquet: writing the output failed");
}

std::string ParquetWriter::FileMetaData() const {
  CompactWriter w;
  w.I32(1, 1);  // version
  w.BeginList(2, CompactWriter::kStruct, columns_.size() + 1);
  w.BeginListStruct();  // the root: a group of every column
  w.I32(3, kRepetitionRequired);
  w.Binary(4, "schema");
  w.I32(5, static_cast<int32_t>(columns_.size()));
  w.EndStruct();
  for (const ParquetColumn& c : columns_) {
    w.BeginListStruct();
    w.I32(1, PhysicalType(c.type));
    w.I32(3, kRepetitionOptional);
    w.Binary(4, c.name);
    if (c.type == ParquetType::kString) {
      w.I32(6, kConvertedUtf8);
      w.BeginStruct(10);  // logicalType: STRING
      w.BeginStruct(1);
      w.EndStruct();
      w.EndStruct();
    }
    w.EndStruct();
  }
  int64_t rows = 0;
  for (const RowGroupInfo& g : row_groups_) rows += g.rows;
  w.I64(3, rows);
  w.BeginList(4, CompactWriter::kStruct, row_groups_.size());
  for (const RowGroupInfo& g : row_groups_) {
    w.BeginListStruct();
    w.BeginList(1, CompactWriter::kStruct, g.chunks.size());
    for (size_t c = 0; c < g.chunks.size(); ++c) {
      const ChunkInfo& chunk = g.chunks[c];
      w.BeginListStruct();
      w.I64(2, chunk.offset);  // file_offset
      w.BeginStruct(3);        // meta_data
      w.I32(1, PhysicalType(columns_[c].type));
      w.BeginList(2, CompactWriter::kI32, 2);
      w.ListI32(kEncodingPlain);
      w.ListI32(kEncodingRle);
      w.BeginList(3, CompactWriter::kBinary, 1);
      w.ListBinary(columns_[c].name);
      w.I32(4, kCodecUncompressed);
      w.I64(5, chunk.values);
      w.I64(6, chunk.bytes);
      w.I64(7, chunk.bytes);
      w.I64(9, chunk.offset);  // data_page_offset
      w.EndStruct();
      w.EndStruct();
    }
    w.I64(2, g.bytes);
    w.I64(3, g.rows);
    w.EndStruct();
  }
  w.Binary(6, "parity export/parquet_writer");  // created_by
  return w.Finish();
}

absl::Status ParquetWriter::Close() {
  if (closed_) return absl::OkStatus();
  closed_ = true;
  const std::string footer = FileMetaData();
  std::string tail;
  Append32(tail, static_cast<uint32_t>(footer.size()));
  tail += "PAR1";
  out_.write(footer.data(), static_cast<std::streamsize>(footer.size()));
  out_.write(tail.data(), static_cast<std::streamsize>(tail.size()));
  out_.flush();
  return out_ ? absl::OkStatus() : absl::DataLossError("parquet: writing the output failed");
}

}  // namespace parity::exports
