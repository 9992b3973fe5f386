#include "worker/confined_path.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace parity::worker {
namespace {

// Closes a descriptor when it goes out of scope.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  void reset(int fd) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_;
};

const char* KindOf(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

}  // namespace

absl::StatusOr<ConfinedFile> FindRegularFileBelow(const std::string& root,
                                                  const std::vector<absl::string_view>& parts) {
  const std::string shown = absl::StrCat(root, "/", absl::StrJoin(parts, "/"));
  if (root.empty()) return absl::FailedPreconditionError("no root directory is configured");
  if (parts.empty()) return absl::PermissionDeniedError(absl::StrCat(shown, ": no file named"));
  for (const absl::string_view part : parts) {
    if (part.empty() || part == "." || part == ".." || part.find('/') != absl::string_view::npos ||
        part.find('\0') != absl::string_view::npos) {
      return absl::PermissionDeniedError(
          absl::StrCat(shown, ": '", part, "' is not a plain name below ", root));
    }
  }
  char real[PATH_MAX];
  if (::realpath(root.c_str(), real) == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("root ", root, ": ", std::strerror(errno)));
  }
  Fd dir(::open(real, O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (dir.get() < 0) {
    return absl::FailedPreconditionError(absl::StrCat("root ", root, ": ", std::strerror(errno)));
  }
  std::string path = real;
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string part(parts[i]);
    absl::StrAppend(&path, "/", part);
    Fd next(::openat(dir.get(), part.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
    if (next.get() < 0) {
      if (errno == ENOENT) return absl::NotFoundError(absl::StrCat(path, ": no such file"));
      return absl::PermissionDeniedError(absl::StrCat(path, ": ", std::strerror(errno)));
    }
    struct stat st {};
    if (::fstat(next.get(), &st) != 0) {
      return absl::PermissionDeniedError(absl::StrCat(path, ": ", std::strerror(errno)));
    }
    const bool last = i + 1 == parts.size();
    if (S_ISLNK(st.st_mode)) {
      return absl::PermissionDeniedError(
          absl::StrCat(path, " is a symbolic link; links below ", root, " are refused"));
    }
    if (!last) {
      if (!S_ISDIR(st.st_mode)) {
        return absl::NotFoundError(absl::StrCat(path, " is ", KindOf(st.st_mode)));
      }
      dir.reset(next.release());
      continue;
    }
    if (!S_ISREG(st.st_mode)) {
      return absl::PermissionDeniedError(
          absl::StrCat(path, " is ", KindOf(st.st_mode), ", not a regular file"));
    }
    return ConfinedFile{.path = path, .bytes = static_cast<int64_t>(st.st_size)};
  }
  return absl::InternalError("unreachable: the loop returns at the last part");
}

}  // namespace parity::worker
