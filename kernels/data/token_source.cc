#include "kernels/data/token_source.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace parity::kernels {

absl::StatusOr<std::unique_ptr<MappedFile>> MappedFile::Open(const std::string& path,
                                                             const std::string& field,
                                                             bool follow_links, int64_t max_bytes) {
  // O_NONBLOCK: opening a FIFO for reading must not wait for a writer.
  const int flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY | (follow_links ? 0 : O_NOFOLLOW);
  const int fd = ::open(path.c_str(), flags);
  if (fd < 0)
    return absl::NotFoundError(absl::StrCat(field, ": the dataset file cannot be opened"));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat(field, ": the dataset is not a regular file"));
  }
  if (max_bytes >= 0 && st.st_size > max_bytes) {
    ::close(fd);
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": the dataset is over the engine's limit of ", max_bytes,
                     " bytes for a raw file (--max-corpus-bytes); prepare it with "
                     "`parity data prepare` instead"));
  }
  auto file = std::unique_ptr<MappedFile>(new MappedFile());
  file->size_ = st.st_size;
  if (st.st_size > 0) {
    void* p = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      ::close(fd);
      return absl::ResourceExhaustedError(absl::StrCat(field, ": the dataset cannot be mapped"));
    }
    // Windows are drawn at random: read-ahead of neighbouring pages would mostly be wasted. The
    // loader asks for each window's pages itself (TokenStream::WillNeed).
    ::madvise(p, static_cast<size_t>(st.st_size), MADV_RANDOM);
    file->data_ = static_cast<const unsigned char*>(p);
  }
  ::close(fd);  // the mapping keeps the file
  return file;
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<unsigned char*>(data_), static_cast<size_t>(size_));
}

void TokenStream::Append(std::shared_ptr<const MappedFile> file, int64_t byte_offset,
                         int64_t tokens) {
  if (tokens <= 0) return;
  const unsigned char* bytes = file->data() + byte_offset;
  pieces_.push_back({.file = std::move(file), .bytes = bytes, .start = total_, .tokens = tokens});
  total_ += tokens;
}

size_t TokenStream::PieceAt(int64_t pos) const {
  // The last piece starting at or before pos.
  auto it = std::upper_bound(pieces_.begin(), pieces_.end(), pos,
                             [](int64_t p, const Piece& piece) { return p < piece.start; });
  return static_cast<size_t>(it - pieces_.begin()) - 1;
}

void TokenStream::Read(int64_t pos, int64_t count, int32_t* out) const {
  size_t i = PieceAt(pos);
  while (count > 0) {
    const Piece& piece = pieces_[i];
    const int64_t at = pos - piece.start;
    const int64_t n = std::min(count, piece.tokens - at);
    const unsigned char* b = piece.bytes + at * width_;
    // Explicit little-endian decoding: the format's byte order, whatever the host's.
    switch (width_) {
      case 1:
        for (int64_t j = 0; j < n; ++j) out[j] = b[j];
        break;
      case 2:
        for (int64_t j = 0; j < n; ++j) out[j] = b[2 * j] | (b[2 * j + 1] << 8);
        break;
      default:
        for (int64_t j = 0; j < n; ++j) {
          const uint32_t v = static_cast<uint32_t>(b[4 * j]) |
                             (static_cast<uint32_t>(b[4 * j + 1]) << 8) |
                             (static_cast<uint32_t>(b[4 * j + 2]) << 16) |
                             (static_cast<uint32_t>(b[4 * j + 3]) << 24);
          // Ids above INT32_MAX become negative and fail the vocabulary check of the caller.
          out[j] = static_cast<int32_t>(v);
        }
    }
    out += n, pos += n, count -= n, ++i;
  }
}

void TokenStream::WillNeed(int64_t pos, int64_t count) const {
  static const int64_t page = ::sysconf(_SC_PAGESIZE);
  size_t i = PieceAt(pos);
  while (count > 0 && i < pieces_.size()) {
    const Piece& piece = pieces_[i];
    const int64_t at = pos - piece.start;
    const int64_t n = std::min(count, piece.tokens - at);
    const uintptr_t begin = reinterpret_cast<uintptr_t>(piece.bytes + at * width_);
    const uintptr_t aligned = begin - begin % static_cast<uintptr_t>(page);
    ::madvise(reinterpret_cast<void*>(aligned), begin - aligned + n * width_, MADV_WILLNEED);
    pos += n, count -= n, ++i;
  }
}

}  // namespace parity::kernels
