// UTF-8 checks for text that reaches protobuf string fields or JSON: both require valid UTF-8
// (protobuf refuses to parse a string field that is not; nlohmann::json throws when dumping one),
// while specs, ids and parameters arrive as arbitrary bytes.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace parity::core {

// The offset of the first byte that does not begin a valid UTF-8 sequence (overlong forms,
// surrogates and code points above U+10FFFF are invalid), or std::string_view::npos.
size_t InvalidUtf8Offset(std::string_view text);

// `text` with every invalid sequence replaced by U+FFFD; valid text comes back unchanged.
std::string ToValidUtf8(std::string_view text);

}  // namespace parity::core
