#include "server/bootstrap_token.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace parity::server {
namespace {

std::string Octal(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

// Refuses a file someone other than its owner could read or replace (see the header).
absl::Status CheckAccess(const struct stat& info, const std::string& path, const char* flag) {
  const uid_t me = ::geteuid();
  const mode_t mode = info.st_mode & 07777;
  if (info.st_uid == me) {
    if ((mode & 077) == 0) return absl::OkStatus();
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " '", path, "' has mode ", Octal(mode),
                     ": other users could read the admin token; run `chmod 600 ", path, "`"));
  }
  if (info.st_uid == 0) {
    if ((mode & 027) == 0) return absl::OkStatus();
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " '", path, "' is owned by root with mode ", Octal(mode),
                     ": other users could read or replace the admin token; run `chmod 640 ", path,
                     "` (0440 for a Kubernetes Secret: defaultMode)"));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      flag, " '", path, "' is owned by uid ", info.st_uid, ", not by the scheduler's user (uid ",
      me, ") or root: that user could read or replace the admin token; run `chown ", me, " ", path,
      " && chmod 600 ", path, "`, or delete it to have a new one made"));
}

// Creates the missing directories above `path`, each 0700 (the ones that exist are left alone).
absl::Status MakeParents(const std::string& path, const char* flag) {
  std::vector<std::filesystem::path> missing;
  for (std::filesystem::path dir = std::filesystem::path(path).parent_path();
       !dir.empty() && !std::filesystem::exists(dir); dir = dir.parent_path()) {
    missing.push_back(dir);
    if (dir == dir.parent_path()) break;
  }
  for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
    if (::mkdir(it->c_str(), 0700) != 0 && errno != EEXIST) {
      return absl::InvalidArgumentError(absl::StrCat(flag, ": cannot create the directory '",
                                                     it->string(), "': ", std::strerror(errno)));
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::string DefaultBootstrapTokenFile(const char* xdg_state_home, const char* home) {
  if (xdg_state_home != nullptr && *xdg_state_home == '/') {
    return absl::StrCat(xdg_state_home, "/parity/admin.token");
  }
  if (home != nullptr && *home != '\0') {
    return absl::StrCat(home, "/.local/state/parity/admin.token");
  }
  return "";
}

absl::StatusOr<std::string> ReadBootstrapTokenFile(const std::string& path, const char* flag) {
  // O_NONBLOCK: a FIFO planted at the path must not hang the start; it is refused below.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ENOENT) return absl::NotFoundError(absl::StrCat(flag, " '", path, "': none"));
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": cannot read '", path, "': ", std::strerror(errno)));
  }
  struct stat info {};
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat(flag, " '", path, "' is not a regular file"));
  }
  if (absl::Status access = CheckAccess(info, path, flag); !access.ok()) {
    ::close(fd);
    return access;
  }
  std::string text(4096, '\0');
  const ssize_t n = ::read(fd, text.data(), text.size());
  ::close(fd);
  if (n < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": cannot read '", path, "': ", std::strerror(errno)));
  }
  text.resize(static_cast<size_t>(n));
  const std::string token(absl::StripAsciiWhitespace(text.substr(0, text.find('\n'))));
  if (token.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " '", path, "' is empty: delete it to have a new one made"));
  }
  return token;
}

absl::Status CreateBootstrapTokenFile(const std::string& path, const std::string& token,
                                      const char* flag) {
  if (absl::Status parents = MakeParents(path, flag); !parents.ok()) return parents;
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    if (errno == EEXIST) return absl::AlreadyExistsError(absl::StrCat(flag, " '", path, "'"));
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": cannot create '", path, "': ", std::strerror(errno)));
  }
  const std::string line = token + "\n";
  const bool written = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size()) &&
                       ::fsync(fd) == 0;
  ::close(fd);
  if (!written) {
    ::unlink(path.c_str());
    return absl::InvalidArgumentError(absl::StrCat(flag, ": cannot write '", path, "'"));
  }
  return absl::OkStatus();
}

}  // namespace parity::server
