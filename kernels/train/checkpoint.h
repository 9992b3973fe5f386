// Checkpoints: everything a run needs to continue bit-identically — weights, AdamW moments,
// step, data cursor, RNG state, loss-free balancing biases — in one binary file per step.
//
// Layout of DIR:
//   step-00000120.ckpt   one file per kept checkpoint (older ones pruned to `keep`)
//   LATEST               the file name of the newest complete checkpoint, one line
// Both are written as temp file + fsync + rename (+ fsync of DIR), so a crash leaves either the old
// or the new state, never a torn file. File format (little-endian): "PARITYCK", u32 version (3),
// u64 fingerprint, u32 length + bytes of the device name, u32 length + bytes of the precision
// name, i64 step, i64 cursor, u64 rng seed, u64 rng counter, u32 MoE layers, then per layer u32 E
// and E floats of bias, u64 n, then n floats each of params, m, v; finally a u64 FNV-1a checksum
// of all preceding bytes. Version 1 (no device, no precision) and version 2 (cursor into the
// materialised shuffles of the byte corpus: the same integer names other windows under the keyed
// permutations of data/permutation.h) are refused as from an older engine. The vocabulary is in
// the fingerprint (and the arrays' length), so a checkpoint of another vocabulary is refused too.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/model/rng.h"

namespace parity::kernels {

struct CheckpointHeader {
  uint64_t fingerprint = 0;  // of the run spec (RunFingerprint); resume refuses a mismatch
  std::string device;        // Device::Name() that wrote it, e.g. "cpu", "cuda:NVIDIA H200"
  std::string precision;     // PrecisionName() of the run, e.g. "fp32"
  int64_t step = 0;          // optimizer steps completed
  int64_t cursor = 0;        // training windows consumed
  Rng rng;
  std::vector<std::vector<float>> balance_bias;  // per MoE layer, [E]
};

struct Checkpoint : CheckpointHeader {
  std::vector<float> params, adam_m, adam_v;
};

// Which flat array a TensorReader is asked for.
enum class CheckpointArray { kParams = 0, kAdamM = 1, kAdamV = 2 };
// Copies `count` floats from `offset` of the array to host memory `dst`. The writer streams the
// arrays through a small staging buffer, so checkpointing never holds a second copy of the state.
using TensorReader =
    std::function<void(CheckpointArray array, int64_t offset, int64_t count, float* dst)>;

// Writes DIR/step-NNNNNNNN.ckpt (arrays of `n` floats each) and points LATEST at it; prunes to
// the newest `keep` files. Returns the path written.
absl::StatusOr<std::string> WriteCheckpoint(const std::string& dir, const CheckpointHeader& header,
                                            int64_t n, const TensorReader& read, int64_t keep);

// The checkpoint LATEST names, or std::nullopt when DIR has none. DataLoss on a corrupt file.
absl::StatusOr<std::optional<Checkpoint>> ReadLatestCheckpoint(const std::string& dir);

// The checkpoint at PATH. NotFound when there is none, DataLoss on a corrupt file.
absl::StatusOr<Checkpoint> ReadCheckpointFile(const std::string& path);

// Path of the newest checkpoint in DIR, or "" if none.
std::string LatestCheckpointPath(const std::string& dir);

}  // namespace parity::kernels
