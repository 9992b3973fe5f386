#include "kernels/train/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/status_macros.h"

namespace parity::kernels {
namespace {

constexpr char kMagic[8] = {'P', 'A', 'R', 'I', 'T', 'Y', 'C', 'K'};
constexpr uint32_t kVersion = 3;

uint64_t Fnv1a(std::string_view s) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ULL;
  return h;
}

// Buffered writer to a file descriptor with a running FNV-1a checksum.
class FileWriter {
 public:
  explicit FileWriter(int fd) : fd_(fd) {}
  template <typename U>
  void Put(const U& v) {
    Append(reinterpret_cast<const char*>(&v), sizeof(U));
  }
  void Append(const char* p, size_t n) {
    for (size_t i = 0; i < n; ++i) hash_ = (hash_ ^ static_cast<unsigned char>(p[i])) * kFnvPrime;
    buffer_.append(p, n);
    if (buffer_.size() >= (1u << 20)) Flush();
  }
  bool Flush() {
    size_t done = 0;
    while (ok_ && done < buffer_.size()) {
      const ssize_t w = ::write(fd_, buffer_.data() + done, buffer_.size() - done);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0)
        ok_ = false;
      else
        done += static_cast<size_t>(w);
    }
    buffer_.clear();
    return ok_;
  }
  uint64_t hash() const { return hash_; }

 private:
  static constexpr uint64_t kFnvPrime = 1099511628211ULL;
  int fd_;
  std::string buffer_;
  uint64_t hash_ = 1469598103934665603ULL;
  bool ok_ = true;
};

class Reader {
 public:
  explicit Reader(std::string_view s) : s_(s) {}
  template <typename U>
  bool Get(U* v) {
    if (pos_ + sizeof(U) > s_.size()) return false;
    std::memcpy(v, s_.data() + pos_, sizeof(U));
    pos_ += sizeof(U);
    return true;
  }
  bool GetString(std::string* v) {
    uint32_t n = 0;
    if (!Get(&n) || n > s_.size() - pos_) return false;
    v->assign(s_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  bool GetFloats(size_t n, std::vector<float>* v) {
    if (n > (s_.size() - pos_) / sizeof(float)) return false;
    v->resize(n);
    if (n == 0) return true;  // an empty vector's data() may be null, which memcpy must not see
    std::memcpy(v->data(), s_.data() + pos_, n * sizeof(float));
    pos_ += n * sizeof(float);
    return true;
  }
  size_t remaining() const { return s_.size() - pos_; }

 private:
  std::string_view s_;
  size_t pos_ = 0;
};

absl::Status Errno(const std::string& what, const std::string& path) {
  return absl::InternalError(absl::StrCat(what, " ", path, ": ", std::strerror(errno)));
}

// temp file + fsync + rename + fsync(dir): the file at `path` is either old or new, never torn.
absl::Status WriteAtomically(const std::string& dir, const std::string& name,
                             const std::string& data) {
  const std::string path = dir + "/" + name, tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Errno("open", tmp);
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      ::close(fd);
      return Errno("write", tmp);
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    ::close(fd);
    return Errno("fsync", tmp);
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) return Errno("rename", tmp);
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> WriteCheckpoint(const std::string& dir, const CheckpointHeader& c,
                                            int64_t n, const TensorReader& read, int64_t keep) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("create ", dir, ": ", ec.message()));
  const std::string name = absl::StrFormat("step-%08d.ckpt", c.step);
  const std::string path = dir + "/" + name, tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Errno("open", tmp);
  FileWriter w(fd);
  w.Append(kMagic, sizeof(kMagic));
  w.Put(kVersion);
  w.Put(c.fingerprint);
  for (const std::string* text : {&c.device, &c.precision}) {
    w.Put(static_cast<uint32_t>(text->size()));
    w.Append(text->data(), text->size());
  }
  w.Put(c.step);
  w.Put(c.cursor);
  w.Put(c.rng.seed);
  w.Put(c.rng.counter);
  w.Put(static_cast<uint32_t>(c.balance_bias.size()));
  for (const auto& b : c.balance_bias) {
    w.Put(static_cast<uint32_t>(b.size()));
    w.Append(reinterpret_cast<const char*>(b.data()), b.size() * sizeof(float));
  }
  w.Put(static_cast<uint64_t>(n));
  std::vector<float> staging(1 << 16);
  for (CheckpointArray array :
       {CheckpointArray::kParams, CheckpointArray::kAdamM, CheckpointArray::kAdamV}) {
    for (int64_t offset = 0; offset < n; offset += static_cast<int64_t>(staging.size())) {
      const int64_t count = std::min<int64_t>(staging.size(), n - offset);
      read(array, offset, count, staging.data());
      w.Append(reinterpret_cast<const char*>(staging.data()), count * sizeof(float));
    }
  }
  w.Put(w.hash());
  const bool flushed = w.Flush();
  if (!flushed || ::fsync(fd) != 0) {
    ::close(fd);
    return Errno("write", tmp);
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) return Errno("rename", tmp);
  if (auto s = WriteAtomically(dir, "LATEST", name + "\n"); !s.ok()) return s;
  // Prune older checkpoints beyond `keep` (names sort by step thanks to the zero padding).
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string f = entry.path().filename().string();
    if (f.starts_with("step-") && f.ends_with(".ckpt")) names.push_back(f);
  }
  std::sort(names.begin(), names.end());
  for (size_t i = 0; i + keep < names.size(); ++i) {
    std::filesystem::remove(std::filesystem::path(dir) / names[i], ec);
  }
  return dir + "/" + name;
}

std::string LatestCheckpointPath(const std::string& dir) {
  std::ifstream latest(dir + "/LATEST");
  std::string name;
  if (!latest || !std::getline(latest, name) || name.empty()) return "";
  return dir + "/" + name;
}

absl::StatusOr<std::optional<Checkpoint>> ReadLatestCheckpoint(const std::string& dir) {
  const std::string path = LatestCheckpointPath(dir);
  if (path.empty()) return std::optional<Checkpoint>();
  if (!std::filesystem::exists(path)) {
    return absl::NotFoundError(absl::StrCat("LATEST names missing checkpoint ", path));
  }
  PARITY_ASSIGN_OR_RETURN(Checkpoint c, ReadCheckpointFile(path));
  return std::optional<Checkpoint>(std::move(c));
}

absl::StatusOr<Checkpoint> ReadCheckpointFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("no checkpoint at ", path));
  const std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto corrupt = [&](const std::string& why) {
    return absl::DataLossError(absl::StrCat("checkpoint ", path, ": ", why));
  };
  if (data.size() < sizeof(kMagic) + 8 || std::memcmp(data.data(), kMagic, sizeof(kMagic)) != 0) {
    return corrupt("bad magic");
  }
  uint64_t stored_sum;
  std::memcpy(&stored_sum, data.data() + data.size() - 8, 8);
  const std::string_view all(data);
  if (Fnv1a(all.substr(0, all.size() - 8)) != stored_sum) return corrupt("checksum mismatch");
  const std::string_view body = all.substr(sizeof(kMagic), all.size() - 8 - sizeof(kMagic));
  Reader r(body);
  Checkpoint c;
  uint32_t version = 0, layers = 0;
  uint64_t n = 0;
  if (!r.Get(&version)) return corrupt("truncated header");
  if (version != kVersion) {
    return corrupt(absl::StrCat("format ", version, " is not this engine's format ", kVersion,
                                " (written by an older engine: start the run afresh)"));
  }
  if (!r.Get(&c.fingerprint) || !r.GetString(&c.device) || !r.GetString(&c.precision) ||
      !r.Get(&c.step) || !r.Get(&c.cursor) || !r.Get(&c.rng.seed) || !r.Get(&c.rng.counter) ||
      !r.Get(&layers)) {
    return corrupt("truncated header");
  }
  // Each layer takes at least its u32 E: a count the file cannot hold is corrupt, and must not
  // size an allocation (a flipped bit asked for 4 billion layers).
  if (layers > r.remaining() / sizeof(uint32_t)) return corrupt("truncated balance biases");
  c.balance_bias.resize(layers);
  for (auto& b : c.balance_bias) {
    uint32_t e = 0;
    if (!r.Get(&e) || !r.GetFloats(e, &b)) return corrupt("truncated balance biases");
  }
  if (!r.Get(&n) || !r.GetFloats(n, &c.params) || !r.GetFloats(n, &c.adam_m) ||
      !r.GetFloats(n, &c.adam_v)) {
    return corrupt("truncated tensors");
  }
  return c;
}

}  // namespace parity::kernels
