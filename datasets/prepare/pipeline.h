// The parallel middle of a preparation (prepare.h): one reader thread cuts the inputs into
// batches of pieces, `threads` workers tokenize them, and the calling thread writes them in their
// original order. At most 2·threads + 2 batches are in memory at once.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "datasets/format/manifest.h"
#include "datasets/prepare/inputs.h"
#include "datasets/prepare/shard_writer.h"
#include "datasets/prepare/tokenizer.h"

namespace parity::datasets {

// Where a group of sources goes: every document to `primary`, except that with a split rule a
// document the rule holds out goes to `held_out`.
struct PipelineSinks {
  ShardWriter* primary = nullptr;
  Split* primary_counts = nullptr;  // text_bytes and token_bytes are added here
  const SplitRule* rule = nullptr;  // null: no held-out documents
  ShardWriter* held_out = nullptr;
  Split* held_out_counts = nullptr;
};

struct PipelineStats {
  int64_t bytes_read = 0;
  int64_t tokens = 0;
  int64_t documents = 0;
  int64_t empty_documents = 0;  // JSON Lines records with empty text, skipped
};

// Reads `reader` to its end into the sinks. The first error (reading, parsing, tokenizing,
// writing) stops every thread and is returned.
absl::Status RunPipeline(DocumentReader& reader, const TextTokenizer& tokenizer,
                         const InputOptions& input, const PipelineSinks& sinks, int threads,
                         const std::function<void(const PipelineStats&)>& on_batch,
                         PipelineStats& stats);

}  // namespace parity::datasets
