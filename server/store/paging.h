// Paging of the store's listings, shared by SweepCatalog and ReadModels.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

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

}  // namespace parity::server
