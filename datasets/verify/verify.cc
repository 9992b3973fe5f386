#include "datasets/verify/verify.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"

namespace parity::datasets {
namespace {

// Where ViewerDetail finds the words for viewers on a DATA_LOSS status.
constexpr absl::string_view kViewerPayload = "type.parity.dev/dataset-viewer-detail";
constexpr int64_t kProgressAboveBytes = int64_t{1} << 30;
constexpr size_t kChunk = size_t{1} << 20;

absl::Status Mismatch(const std::string& for_log, const std::string& for_viewers) {
  absl::Status status = absl::DataLossError(for_log);
  status.SetPayload(kViewerPayload, absl::Cord(for_viewers));
  return status;
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

FileIdentity IdentityOf(const struct stat& st) {
  return {.device = static_cast<uint64_t>(st.st_dev),
          .inode = static_cast<uint64_t>(st.st_ino),
          .size = static_cast<int64_t>(st.st_size),
          .mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
}

// One file the manifest lists, as found on disk.
struct Listed {
  std::string name;            // relative to the dataset directory
  std::string path;            // for the cache key and the log
  std::string sha256;          // what the manifest records
  int64_t expected_size = -1;  // −1 = any (tokenizer.model, a raw file)
  FileIdentity identity;       // when opened
  std::string actual;          // its SHA-256, from the cache or hashed
  absl::Status status;         // an error hashing it
};

Listed ListedFile(std::string name, std::string path, std::string sha256, int64_t size) {
  Listed f;
  f.name = std::move(name);
  f.path = std::move(path);
  f.sha256 = std::move(sha256);
  f.expected_size = size;
  return f;
}

// SHA-256 of what `fd` holds, read from the start; counts bytes into `hashed`.
absl::StatusOr<std::string> HashFd(int fd, std::atomic<int64_t>& hashed) {
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr);
  std::unique_ptr<char[]> buffer(new char[kChunk]);
  int64_t offset = 0;
  for (;;) {
    const ssize_t n = ::pread(fd, buffer.get(), kChunk, offset);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::DataLossError(absl::StrCat("read failed: ", std::strerror(errno)));
    if (n == 0) break;
    EVP_DigestUpdate(ctx.get(), buffer.get(), static_cast<size_t>(n));
    offset += n;
    hashed.fetch_add(n, std::memory_order_relaxed);
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_DigestFinal_ex(ctx.get(), digest, &length);
  std::string hex;
  for (unsigned int i = 0; i < length; ++i) absl::StrAppendFormat(&hex, "%02x", digest[i]);
  return hex;
}

// Stats each listed file below `dir_fd` (no link followed), checks its size and takes its SHA-256
// from the cache where it may; returns the indices of the files left to hash. The first file
// that is missing or of the wrong size is a mismatch before anything is hashed. Nothing stays
// open: a large dataset has more shards than a process may hold descriptors.
absl::StatusOr<std::vector<size_t>> StatListed(int dir_fd, std::vector<Listed>& files,
                                               const VerifyCache& cache, VerifyMode mode) {
  std::vector<size_t> to_hash;
  for (size_t i = 0; i < files.size(); ++i) {
    Listed& f = files[i];
    struct stat st {};
    if (::fstatat(dir_fd, f.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) {
      return Mismatch(absl::StrCat(f.path, ": missing, a link or not a regular file"),
                      absl::StrCat(f.name, " is missing"));
    }
    f.identity = IdentityOf(st);
    if (f.expected_size >= 0 && f.identity.size != f.expected_size) {
      return Mismatch(absl::StrCat(f.path, " is ", f.identity.size, " bytes; its manifest says ",
                                   f.expected_size),
                      absl::StrCat(f.name, " has another size than its manifest says"));
    }
    std::optional<std::string> known;
    if (mode == VerifyMode::kCached) known = cache.Find(f.path, f.identity);
    if (known.has_value()) {
      f.actual = *std::move(known);
    } else {
      to_hash.push_back(i);
    }
  }
  return to_hash;
}

// Hashes one file: opened again (O_NOFOLLOW), its identity taken from the descriptor it is read
// through, so that what the cache records is what was hashed.
void HashOne(int dir_fd, Listed& f, std::atomic<int64_t>& hashed) {
  Fd fd(::openat(dir_fd, f.name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
  struct stat st {};
  if (fd.get() < 0 || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    f.status = absl::NotFoundError("gone or replaced while being verified");
    return;
  }
  f.identity = IdentityOf(st);
  absl::StatusOr<std::string> sha = HashFd(fd.get(), hashed);
  if (sha.ok()) f.actual = *std::move(sha);
  f.status = sha.status();
}

// Hashes files[to_hash] over a few threads; this thread reports progress on a large dataset.
int64_t HashInParallel(int dir_fd, std::vector<Listed>& files, const std::vector<size_t>& to_hash,
                       const VerifyOptions& options) {
  int64_t bytes_to_hash = 0;
  for (const size_t i : to_hash) bytes_to_hash += files[i].identity.size;
  std::atomic<int64_t> hashed{0};
  std::atomic<size_t> next{0};
  std::atomic<size_t> finished{0};
  const auto work = [&] {
    for (size_t k = next++; k < to_hash.size(); k = next++) {
      HashOne(dir_fd, files[to_hash[k]], hashed);
      ++finished;
    }
  };
  std::vector<std::thread> threads;
  const size_t n = std::min<size_t>(std::max(1, options.threads), to_hash.size());
  for (size_t t = 0; t < n; ++t) threads.emplace_back(work);
  if (options.progress && bytes_to_hash > kProgressAboveBytes) {
    while (finished.load() < to_hash.size()) {
      for (int i = 0; i < 100 && finished.load() < to_hash.size(); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      options.progress(absl::StrFormat("hashed %.1f of %.1f GiB (%d of %d files)",
                                       static_cast<double>(hashed.load()) / (1 << 30),
                                       static_cast<double>(bytes_to_hash) / (1 << 30),
                                       finished.load(), to_hash.size()));
    }
  }
  for (std::thread& t : threads) t.join();
  return hashed.load();
}

// Every listed file's SHA-256 (cached or hashed) against the manifest's.
absl::Status HashListed(int dir_fd, std::vector<Listed>& files, VerifyCache& cache,
                        const VerifyOptions& options, VerifiedDataset& out) {
  absl::StatusOr<std::vector<size_t>> to_hash = StatListed(dir_fd, files, cache, options.mode);
  if (!to_hash.ok()) return to_hash.status();
  out.hashed_bytes = HashInParallel(dir_fd, files, *to_hash, options);
  out.hashed_files = static_cast<int64_t>(to_hash->size());
  for (const size_t k : *to_hash) {
    Listed& f = files[k];
    if (!f.status.ok()) {
      return Mismatch(absl::StrCat(f.path, ": ", f.status.message()),
                      absl::StrCat(f.name, " cannot be read"));
    }
    if (f.expected_size >= 0 && f.identity.size != f.expected_size) {
      return Mismatch(absl::StrCat(f.path, " changed size while being verified"),
                      absl::StrCat(f.name, " has another size than its manifest says"));
    }
    cache.Put(f.path, f.identity, f.actual);
  }
  for (const Listed& f : files) {
    if (!f.sha256.empty() && f.actual != f.sha256) {
      return Mismatch(
          absl::StrCat(f.path, ": SHA-256 ", f.actual, ", its manifest says ", f.sha256),
          absl::StrCat(f.name, " differs from its manifest"));
    }
  }
  return absl::OkStatus();
}

std::vector<Listed> FilesOf(const std::string& dir, const Manifest& manifest) {
  std::vector<Listed> files;
  const auto add = [&](const std::string& name, const std::string& sha, int64_t size) {
    files.push_back(ListedFile(name, absl::StrCat(dir, "/", name), sha, size));
  };
  if (manifest.tokenizer.kind == TokenizerKind::kSentencePiece) {
    add(std::string(kTokenizerModelFile), manifest.tokenizer.model_sha256, -1);
  }
  std::vector<const Split*> splits = {&manifest.train};
  for (const Split& s : manifest.eval_sets) splits.push_back(&s);
  for (const Split* split : splits) {
    for (const Shard& shard : split->shards) {
      add(shard.file, shard.sha256, shard.tokens * manifest.token_width);
      add(shard.doc_file, shard.doc_sha256, shard.documents * 8);
    }
  }
  return files;
}

}  // namespace

absl::Status VerifyCache::Load() {
  if (file_.empty()) return absl::OkStatus();
  std::ifstream in(file_);
  if (!in) return absl::OkStatus();  // none yet
  nlohmann::json json = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!json.is_object() || !json.contains("files") || !json["files"].is_object()) {
    return absl::DataLossError(absl::StrCat(file_, ": not a verification cache; starting empty"));
  }
  absl::MutexLock lock(&mu_);
  for (const auto& [path, e] : json["files"].items()) {
    if (!e.is_object() || !e.contains("sha256") || !e["sha256"].is_string()) continue;
    Entry& entry = entries_[path];
    entry.identity.device = e.value("device", uint64_t{0});
    entry.identity.inode = e.value("inode", uint64_t{0});
    entry.identity.size = e.value("size", int64_t{-1});
    entry.identity.mtime_ns = e.value("mtime_ns", int64_t{0});
    entry.sha256 = e["sha256"].get<std::string>();
  }
  return absl::OkStatus();
}

absl::Status VerifyCache::Save() const {
  if (file_.empty()) return absl::OkStatus();
  absl::MutexLock saving(&save_mu_);  // one writer of the temporary file at a time
  nlohmann::json files = nlohmann::json::object();
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [path, e] : entries_) {
      files[path] = {{"device", e.identity.device},
                     {"inode", e.identity.inode},
                     {"size", e.identity.size},
                     {"mtime_ns", e.identity.mtime_ns},
                     {"sha256", e.sha256}};
    }
  }
  const std::string tmp = absl::StrCat(file_, ".tmp.", ::getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << nlohmann::json{{"version", 1}, {"files", files}}.dump(1) << "\n";
    if (!out.good()) return absl::InternalError(absl::StrCat("write ", tmp));
  }
  if (std::rename(tmp.c_str(), file_.c_str()) != 0) {
    return absl::InternalError(
        absl::StrCat("rename ", tmp, " → ", file_, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

std::optional<std::string> VerifyCache::Find(const std::string& path,
                                             const FileIdentity& identity) const {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(path);
  if (it == entries_.end() || !(it->second.identity == identity)) return std::nullopt;
  return it->second.sha256;
}

void VerifyCache::Put(const std::string& path, const FileIdentity& identity, std::string sha256) {
  absl::MutexLock lock(&mu_);
  entries_[path] = {identity, std::move(sha256)};
}

size_t VerifyCache::size() const {
  absl::MutexLock lock(&mu_);
  return entries_.size();
}

absl::StatusOr<VerifiedDataset> VerifyPreparedDataset(const std::string& dir,
                                                      absl::string_view expected_digest,
                                                      VerifyCache& cache,
                                                      const VerifyOptions& options) {
  VerifiedDataset out;
  absl::StatusOr<Manifest> manifest = ReadManifest(dir, &out.digest);
  if (absl::IsNotFound(manifest.status())) {
    return absl::NotFoundError(absl::StrCat(dir, ": ", manifest.status().message()));
  }
  if (!expected_digest.empty() && !out.digest.empty() && out.digest != expected_digest) {
    return Mismatch(
        absl::StrCat(dir, "/manifest.json has SHA-256 ", out.digest, "; pinned ", expected_digest),
        absl::StrCat("its manifest digest ", out.digest.substr(0, 12), "… is not the pinned ",
                     expected_digest.substr(0, 12), "…"));
  }
  if (!manifest.ok()) {
    return Mismatch(absl::StrCat(dir, ": ", manifest.status().message()),
                    "its manifest.json does not parse");
  }
  Fd dir_fd(::open(dir.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (dir_fd.get() < 0) {
    return absl::NotFoundError(absl::StrCat(dir, ": ", std::strerror(errno)));
  }
  std::vector<Listed> files = FilesOf(dir, *manifest);
  if (absl::Status checked = HashListed(dir_fd.get(), files, cache, options, out); !checked.ok()) {
    return checked;
  }
  out.manifest = *std::move(manifest);
  return out;
}

absl::StatusOr<VerifiedDataset> VerifyRawFile(const std::string& path,
                                              absl::string_view expected_digest, VerifyCache& cache,
                                              const VerifyOptions& options) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  Fd dir_fd(::open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (dir_fd.get() < 0) return absl::NotFoundError(absl::StrCat(dir, ": ", std::strerror(errno)));
  std::vector<Listed> files = {ListedFile(name, path, "", -1)};
  VerifiedDataset out;
  if (absl::Status checked = HashListed(dir_fd.get(), files, cache, options, out); !checked.ok()) {
    if (absl::IsDataLoss(checked) && files[0].actual.empty() && files[0].status.ok()) {
      return absl::NotFoundError(checked.message());  // never opened: no such file
    }
    return checked;
  }
  out.digest = files[0].actual;
  if (!expected_digest.empty() && out.digest != expected_digest) {
    return Mismatch(absl::StrCat(path, " has SHA-256 ", out.digest, "; pinned ", expected_digest),
                    absl::StrCat("its digest ", out.digest.substr(0, 12), "… is not the pinned ",
                                 expected_digest.substr(0, 12), "…"));
  }
  return out;
}

std::string ViewerDetail(const absl::Status& status) {
  if (!absl::IsDataLoss(status)) return "";
  const auto detail = status.GetPayload(kViewerPayload);
  return detail.has_value() ? std::string(*detail) : "";
}

absl::StatusOr<VerifyMode> ParseVerifyMode(absl::string_view text) {
  if (text == "cached") return VerifyMode::kCached;
  if (text == "full") return VerifyMode::kFull;
  return absl::InvalidArgumentError(
      absl::StrCat("--verify-datasets: '", text, "' is neither 'cached' nor 'full'"));
}

}  // namespace parity::datasets
