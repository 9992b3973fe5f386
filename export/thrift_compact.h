// Just enough of Thrift's compact protocol to write Parquet's page headers and file footer
// (https://github.com/apache/thrift/blob/master/doc/specs/thrift-compact-protocol.md): field
// headers with id deltas, zigzag varints, binaries, lists and nested structs. Write-only, and
// hand-rolled because Debian 12 packages neither Arrow C++ nor a Parquet library, and the Thrift
// C++ library would be a dependency for ~100 lines of encoding (see export/README.md).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace parity::exports {

class CompactWriter {
 public:
  enum Type : uint8_t {
    kBoolTrue = 1,
    kBoolFalse = 2,
    kI32 = 5,
    kI64 = 6,
    kBinary = 8,
    kList = 9,
    kStruct = 12,
  };

  CompactWriter() : last_field_({0}) {}

  void I32(int16_t field, int32_t value);
  void I64(int16_t field, int64_t value);
  void Binary(int16_t field, std::string_view value);
  void Bool(int16_t field, bool value);
  // A struct-valued field: its fields follow, then EndStruct().
  void BeginStruct(int16_t field);
  void EndStruct();
  // A list field of `size` elements of `element` type; then that many List*() calls, or for
  // structs BeginListStruct()/EndStruct() pairs.
  void BeginList(int16_t field, Type element, size_t size);
  void ListI32(int32_t value) { Varint(ZigZag(value)); }
  void ListBinary(std::string_view value);
  void BeginListStruct() { last_field_.push_back(0); }
  // The stop of the outermost struct; the bytes are complete after it.
  std::string Finish();

 private:
  static uint64_t ZigZag(int64_t v) {
    return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
  }
  void Varint(uint64_t value);
  void FieldHeader(int16_t field, uint8_t type);

  std::string bytes_;
  std::vector<int16_t> last_field_;  // the last field id written, per open struct
};

}  // namespace parity::exports
