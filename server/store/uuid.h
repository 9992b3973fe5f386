// Ids are UUIDs in their canonical text form; the store checks them before a query (a malformed
// id is the caller's error, not the database's) and the scheduling logic before a call.
#pragma once

#include <cctype>

#include "absl/strings/string_view.h"

namespace parity::server {

// True for the canonical 8-4-4-4-12 hexadecimal form.
inline bool IsUuid(absl::string_view text) {
  if (text.size() != 36) return false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (c != '-') return false;
    } else if (!std::isxdigit(static_cast<unsigned char>(c))) {
      return false;
    }
  }
  return true;
}

}  // namespace parity::server
