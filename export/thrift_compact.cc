#include "export/thrift_compact.h"

namespace parity::exports {

void CompactWriter::Varint(uint64_t value) {
  while (value >= 0x80) {
    bytes_.push_back(static_cast<char>((value & 0x7F) | 0x80));
    value >>= 7;
  }
  bytes_.push_back(static_cast<char>(value));
}

// A delta of 1..15 from the previous field id fits the header byte; else the id follows.
void CompactWriter::FieldHeader(int16_t field, uint8_t type) {
  const int delta = field - last_field_.back();
  if (delta > 0 && delta <= 15) {
    bytes_.push_back(static_cast<char>((delta << 4) | type));
  } else {
    bytes_.push_back(static_cast<char>(type));
    Varint(ZigZag(field));
  }
  last_field_.back() = field;
}

void CompactWriter::I32(int16_t field, int32_t value) {
  FieldHeader(field, kI32);
  Varint(ZigZag(value));
}

void CompactWriter::I64(int16_t field, int64_t value) {
  FieldHeader(field, kI64);
  Varint(ZigZag(value));
}

void CompactWriter::Binary(int16_t field, std::string_view value) {
  FieldHeader(field, kBinary);
  Varint(value.size());
  bytes_.append(value);
}

void CompactWriter::Bool(int16_t field, bool value) {
  FieldHeader(field, value ? kBoolTrue : kBoolFalse);
}

void CompactWriter::BeginStruct(int16_t field) {
  FieldHeader(field, kStruct);
  last_field_.push_back(0);
}

void CompactWriter::EndStruct() {
  bytes_.push_back(0);  // stop
  last_field_.pop_back();
}

void CompactWriter::BeginList(int16_t field, Type element, size_t size) {
  FieldHeader(field, kList);
  if (size < 15) {
    bytes_.push_back(static_cast<char>((size << 4) | element));
  } else {
    bytes_.push_back(static_cast<char>(0xF0 | element));
    Varint(size);
  }
}

void CompactWriter::ListBinary(std::string_view value) {
  Varint(value.size());
  bytes_.append(value);
}

std::string CompactWriter::Finish() {
  bytes_.push_back(0);
  return std::move(bytes_);
}

}  // namespace parity::exports
