// Checks that a worker's copy of a dataset is the one a sweep pinned (issue #24: every worker
// trains on the same data): the manifest's SHA-256 against the pinned digest, then every file the
// manifest lists (train and evaluation shards, their document files, tokenizer.model) against the
// size and SHA-256 it records. A raw byte file's digest is the SHA-256 of its bytes.
//
// Hashing a terabyte at every run start is not affordable, so a VerifyCache remembers each file's
// SHA-256 under its identity (path, device, inode, size, mtime in ns) and cached mode re-hashes
// only files whose identity changed. The trade-off: a tamper that keeps a file's size and mtime
// (and inode) evades cached mode; full mode (`parity-worker --verify-datasets=full`) re-hashes
// every file every time. Files are opened below the dataset directory with O_NOFOLLOW (the
// manifest's file names are plain names), hashed from the descriptor that was stat'ed, a few in
// parallel.
//
// Errors: NOT_FOUND when there is no manifest.json / raw file at all (no such dataset);
// DATA_LOSS when the copy differs from what it should be (the worker fails the run as
// FAILURE_CLASS_DATA_MISMATCH), with ViewerDetail(status) saying what differs in words fit for
// any viewer (file names of the format, never a path or a size); INVALID_ARGUMENT for a manifest
// that does not parse. Any thread; the cache is thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "datasets/format/manifest.h"

namespace parity::datasets {

// What identifies one version of a file without reading it.
struct FileIdentity {
  uint64_t device = 0;
  uint64_t inode = 0;
  int64_t size = 0;
  int64_t mtime_ns = 0;
  bool operator==(const FileIdentity&) const = default;
};

// path → (identity, SHA-256), kept in a JSON file (one per worker: several workers on one host
// each have their own --work-dir). Thread-safe.
class VerifyCache {
 public:
  // An empty path keeps the cache in memory only.
  explicit VerifyCache(std::string file) : file_(std::move(file)) {}
  // Reads the file; a missing file is an empty cache, and so is one that does not parse (returned
  // as a warning for the log: the cache is only an optimisation, the next Save rewrites it).
  absl::Status Load();
  // Writes the file atomically (a temporary file renamed over it).
  absl::Status Save() const;
  std::optional<std::string> Find(const std::string& path, const FileIdentity& identity) const;
  void Put(const std::string& path, const FileIdentity& identity, std::string sha256);
  size_t size() const;

 private:
  struct Entry {
    FileIdentity identity;
    std::string sha256;
  };
  const std::string file_;
  mutable absl::Mutex save_mu_;  // held while Save writes the file (taken before mu_)
  mutable absl::Mutex mu_;
  std::map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
};

enum class VerifyMode {
  kCached,  // hash only files whose identity the cache does not know
  kFull,    // hash every file
};

struct VerifyOptions {
  VerifyMode mode = VerifyMode::kCached;
  int threads = 4;  // files hashed at once
  // Told of progress now and then while a dataset over 1 GiB is hashed (for the log); may be
  // empty.
  std::function<void(const std::string&)> progress;
};

struct VerifiedDataset {
  std::string digest;        // the manifest's (or the raw file's) SHA-256
  Manifest manifest;         // the manifest (prepared datasets only)
  int64_t hashed_bytes = 0;  // bytes read to hash this time (0 = all from the cache)
  int64_t hashed_files = 0;
};

// The prepared dataset in `dir` (a directory the caller found inside its corpus directory),
// checked against `expected_digest` (empty = any digest) and against its own manifest.
absl::StatusOr<VerifiedDataset> VerifyPreparedDataset(const std::string& dir,
                                                      absl::string_view expected_digest,
                                                      VerifyCache& cache,
                                                      const VerifyOptions& options);

// A raw byte file: its SHA-256 (through the cache) checked against `expected_digest` (empty = any).
absl::StatusOr<VerifiedDataset> VerifyRawFile(const std::string& path,
                                              absl::string_view expected_digest, VerifyCache& cache,
                                              const VerifyOptions& options);

// What differs, for every viewer of the run ("shard train-00003.tok differs from its manifest"),
// when `status` came from a Verify function as DATA_LOSS; else "".
std::string ViewerDetail(const absl::Status& status);

// "cached" / "full" ↔ VerifyMode (flag parsing).
absl::StatusOr<VerifyMode> ParseVerifyMode(absl::string_view text);

}  // namespace parity::datasets
