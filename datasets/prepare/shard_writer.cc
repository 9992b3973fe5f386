#include "datasets/prepare/shard_writer.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <array>
#include <bit>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace parity::datasets {

static_assert(std::endian::native == std::endian::little,
              "shards are little-endian and written by copying ids as they are in memory");

// A new file (O_EXCL: never over an existing one), written through a 1 MiB buffer and hashed as
// it goes; Close fsyncs it and gives the SHA-256.
class OutputFile {
 public:
  static absl::StatusOr<std::unique_ptr<OutputFile>> Create(const std::string& path) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) {
      return absl::InternalError(
          absl::StrCat("cannot create '", path, "': ", std::strerror(errno)));
    }
    return std::unique_ptr<OutputFile>(new OutputFile(path, fd));
  }
  ~OutputFile() {
    if (fd_ >= 0) ::close(fd_);
    EVP_MD_CTX_free(sha_);
  }
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  absl::Status Write(const char* data, size_t n) {
    EVP_DigestUpdate(sha_, data, n);
    while (n > 0) {
      const size_t take = std::min(n, kBuffer - used_);
      std::memcpy(buffer_.get() + used_, data, take);
      used_ += take;
      data += take;
      n -= take;
      if (used_ == kBuffer) {
        absl::Status flushed = Flush();
        if (!flushed.ok()) return flushed;
      }
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::string> Close() {
    absl::Status flushed = Flush();
    if (!flushed.ok()) return flushed;
    if (::fsync(fd_) != 0 || ::close(fd_) != 0) {
      fd_ = -1;
      return absl::InternalError(absl::StrCat("cannot sync '", path_, "': ", std::strerror(errno)));
    }
    fd_ = -1;
    std::array<unsigned char, EVP_MAX_MD_SIZE> md{};
    unsigned int len = 0;
    EVP_DigestFinal_ex(sha_, md.data(), &len);
    std::string hex;
    for (unsigned int i = 0; i < len; ++i) absl::StrAppendFormat(&hex, "%02x", md[i]);
    return hex;
  }

 private:
  static constexpr size_t kBuffer = size_t{1} << 20;

  OutputFile(std::string path, int fd)
      : path_(std::move(path)), fd_(fd), buffer_(new char[kBuffer]), sha_(EVP_MD_CTX_new()) {
    EVP_DigestInit_ex(sha_, EVP_sha256(), nullptr);
  }

  absl::Status Flush() {
    size_t done = 0;
    while (done < used_) {
      const ssize_t n = ::write(fd_, buffer_.get() + done, used_ - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        return absl::InternalError(
            absl::StrCat("cannot write '", path_, "': ", std::strerror(errno)));
      }
      done += static_cast<size_t>(n);
    }
    used_ = 0;
    return absl::OkStatus();
  }

  const std::string path_;
  int fd_;
  std::unique_ptr<char[]> buffer_;
  size_t used_ = 0;
  EVP_MD_CTX* sha_;
};

ShardWriter::ShardWriter(std::string dir, std::string split, int token_width, int64_t shard_tokens,
                         std::function<void(const Shard&)> on_shard_closed)
    : dir_(std::move(dir)),
      split_(std::move(split)),
      token_width_(token_width),
      shard_tokens_(shard_tokens),
      on_shard_closed_(std::move(on_shard_closed)) {
  split_out_.name = split_;
}

ShardWriter::~ShardWriter() = default;

absl::Status ShardWriter::OpenShard() {
  const std::string stem = absl::StrFormat("%s-%05d", split_, split_out_.shards.size());
  shard_ = Shard();
  shard_.file = stem + ".tok";
  shard_.doc_file = stem + ".doc";
  absl::StatusOr<std::unique_ptr<OutputFile>> tok =
      OutputFile::Create(absl::StrCat(dir_, "/", shard_.file));
  if (!tok.ok()) return tok.status();
  absl::StatusOr<std::unique_ptr<OutputFile>> doc =
      OutputFile::Create(absl::StrCat(dir_, "/", shard_.doc_file));
  if (!doc.ok()) return doc.status();
  tok_ = *std::move(tok);
  doc_ = *std::move(doc);
  return absl::OkStatus();
}

absl::Status ShardWriter::CloseShard() {
  absl::StatusOr<std::string> tok_sha = tok_->Close();
  if (!tok_sha.ok()) return tok_sha.status();
  absl::StatusOr<std::string> doc_sha = doc_->Close();
  if (!doc_sha.ok()) return doc_sha.status();
  tok_.reset();
  doc_.reset();
  shard_.sha256 = *tok_sha;
  shard_.doc_sha256 = *doc_sha;
  split_out_.tokens += shard_.tokens;
  split_out_.documents += shard_.documents;
  split_out_.shards.push_back(shard_);
  if (on_shard_closed_) on_shard_closed_(shard_);
  return absl::OkStatus();
}

absl::Status ShardWriter::Append(const uint32_t* ids, size_t count) {
  while (count > 0) {
    if (tok_ != nullptr && shard_.tokens == shard_tokens_) {
      absl::Status closed = CloseShard();
      if (!closed.ok()) return closed;
    }
    if (tok_ == nullptr) {
      absl::Status opened = OpenShard();
      if (!opened.ok()) return opened;
    }
    if (document_pending_) {
      const uint64_t offset = static_cast<uint64_t>(shard_.tokens);
      absl::Status wrote = doc_->Write(reinterpret_cast<const char*>(&offset), sizeof offset);
      if (!wrote.ok()) return wrote;
      ++shard_.documents;
      document_pending_ = false;
    }
    const size_t take = static_cast<size_t>(
        std::min<int64_t>(static_cast<int64_t>(count), shard_tokens_ - shard_.tokens));
    encoded_.resize(take * static_cast<size_t>(token_width_));
    if (token_width_ == 4) {
      std::memcpy(encoded_.data(), ids, take * 4);
    } else {
      for (size_t i = 0; i < take; ++i) {
        const auto id = static_cast<uint16_t>(ids[i]);
        std::memcpy(encoded_.data() + 2 * i, &id, 2);
      }
    }
    absl::Status wrote = tok_->Write(encoded_.data(), encoded_.size());
    if (!wrote.ok()) return wrote;
    shard_.tokens += static_cast<int64_t>(take);
    ids += take;
    count -= take;
  }
  return absl::OkStatus();
}

absl::StatusOr<Split> ShardWriter::Finish() {
  if (tok_ != nullptr) {
    absl::Status closed = CloseShard();
    if (!closed.ok()) return closed;
  }
  return std::move(split_out_);
}

}  // namespace parity::datasets
