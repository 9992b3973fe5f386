// Reads a prepared split back the way the engine will: shards concatenated, offsets made global.
#pragma once

#include <cstring>
#include <string>
#include <vector>

#include "datasets/format/manifest.h"
#include "datasets/tests/test_corpus.h"

namespace parity::datasets::testing {

struct SplitContents {
  std::vector<uint32_t> tokens;
  std::vector<uint64_t> document_starts;  // from the split's start
};

inline SplitContents ReadSplit(const std::string& dir, const Manifest& m, const Split& split) {
  SplitContents out;
  for (const Shard& shard : split.shards) {
    const uint64_t base = out.tokens.size();
    const std::string bytes = ReadFile(dir + "/" + shard.file);
    for (size_t i = 0; i + m.token_width <= bytes.size(); i += m.token_width) {
      uint32_t id = 0;
      std::memcpy(&id, bytes.data() + i, m.token_width);
      out.tokens.push_back(id);
    }
    const std::string offsets = ReadFile(dir + "/" + shard.doc_file);
    for (size_t i = 0; i + 8 <= offsets.size(); i += 8) {
      uint64_t offset = 0;
      std::memcpy(&offset, offsets.data() + i, 8);
      out.document_starts.push_back(base + offset);
    }
  }
  return out;
}

}  // namespace parity::datasets::testing
