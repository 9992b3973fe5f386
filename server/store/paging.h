// Paging of the store's listings, shared by SweepCatalog and ReadModels.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/string_view.h"

namespace parity::server {

// Keyset paging: the token is opaque to callers and validated by the store.
struct PageRequest {
  uint32_t page_size = 100;
  std::string page_token;
};

template <typename T>
struct Page {
  std::vector<T> items;
  std::string next_page_token;  // empty = no more
};

// Page tokens are web-safe base64 of the store's own cursor text, so every implementation
// refuses the same malformed tokens with the same error.
inline absl::Status BadPageToken() { return absl::InvalidArgumentError("page_token is not valid"); }
inline std::string EncodePageToken(absl::string_view cursor) {
  return absl::WebSafeBase64Escape(cursor);
}
inline absl::StatusOr<std::string> DecodePageToken(const std::string& token) {
  std::string cursor;
  if (!absl::WebSafeBase64Unescape(token, &cursor)) return BadPageToken();
  return cursor;
}

}  // namespace parity::server
