// Token streams read through memory maps: a split is one or more files of little-endian token ids
// (width 1, 2 or 4 bytes, no header) concatenated in order. Nothing is read at open time beyond a
// stat; pages come in when a window touches them and, being clean file pages, the kernel drops them
// again under pressure, so a process's memory does not grow with the corpus.
//
// Threading: after Open, every method is const and safe to call from several threads (the
// prefetching loader reads training windows while the trainer reads evaluation windows).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace parity::kernels {

// One read-only, shared mapping of a whole regular file. Owns the mapping (munmap on destruction).
class MappedFile {
 public:
  // Maps [0, size) of the file. Refuses anything but a regular file, and a symbolic link when
  // `follow_links` is false; an empty file maps to no bytes. `field` starts every message
  // ("data.corpus"), which names neither the path nor a size: it can reach a run's failure.
  // `max_bytes` (≥ 0) refuses a larger file; −1 = no limit.
  static absl::StatusOr<std::unique_ptr<MappedFile>> Open(const std::string& path,
                                                          const std::string& field,
                                                          bool follow_links, int64_t max_bytes);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const unsigned char* data() const { return data_; }
  int64_t size() const { return size_; }

 private:
  MappedFile() = default;
  const unsigned char* data_ = nullptr;
  int64_t size_ = 0;
};

// A split's token stream: pieces (each a byte range of a mapped file) concatenated in order.
class TokenStream {
 public:
  // width is 1, 2 or 4 bytes per id. Each piece is [offset, offset + tokens·width) of its file.
  explicit TokenStream(int width) : width_(width) {}
  void Append(std::shared_ptr<const MappedFile> file, int64_t byte_offset, int64_t tokens);

  int64_t tokens() const { return total_; }
  int width() const { return width_; }
  // Tokens [pos, pos + count) into out[count], across piece boundaries; pos + count ≤ tokens().
  void Read(int64_t pos, int64_t count, int32_t* out) const;
  // Asks the kernel to read ahead the pages of [pos, pos + count) (MADV_WILLNEED); a hint only.
  void WillNeed(int64_t pos, int64_t count) const;

 private:
  struct Piece {
    // Shared: one mapped raw file backs both the training and the validation stream.
    std::shared_ptr<const MappedFile> file;
    const unsigned char* bytes = nullptr;  // first token of the piece
    int64_t start = 0;                     // stream position of its first token
    int64_t tokens = 0;
  };
  // Index of the piece holding stream position pos.
  size_t PieceAt(int64_t pos) const;

  int width_ = 1;
  int64_t total_ = 0;
  std::vector<Piece> pieces_;
};

}  // namespace parity::kernels
