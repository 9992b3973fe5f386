#include "datasets/prepare/staging.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "datasets/format/manifest.h"

namespace parity::datasets {
namespace {

namespace fs = std::filesystem;

absl::Status Errno(absl::string_view what, const std::string& path) {
  return absl::InternalError(absl::StrCat(what, " '", path, "': ", std::strerror(errno)));
}

absl::Status SyncPath(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Errno("cannot open", path);
  const int rc = ::fsync(fd);
  ::close(fd);
  return rc == 0 ? absl::OkStatus() : Errno("cannot sync", path);
}

// .<name>.partial-<pid> directories whose process is gone: a killed preparation's leftovers.
void RemoveAbandonedStaging(const std::string& out_dir, const std::string& name) {
  const std::string prefix = absl::StrCat(".", name, ".partial-");
  std::error_code error;
  for (fs::directory_iterator it(out_dir, error); !error && it != fs::directory_iterator();
       it.increment(error)) {
    const fs::directory_entry& entry = *it;
    const std::string file = entry.path().filename().string();
    int pid = 0;
    if (!absl::StartsWith(file, prefix) ||
        !absl::SimpleAtoi(absl::string_view(file).substr(prefix.size()), &pid) || pid <= 0) {
      continue;
    }
    if (::kill(pid, 0) == 0 || errno != ESRCH) continue;  // still running (or not ours to judge)
    std::error_code removal;
    fs::remove_all(entry.path(), removal);
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<StagingDirectory>> StagingDirectory::Create(
    const std::string& out_dir, const std::string& name, bool force) {
  const std::string destination = absl::StrCat(out_dir, "/", name);
  struct stat st {};
  if (!force && ::lstat(destination.c_str(), &st) == 0) {
    return absl::AlreadyExistsError(absl::StrCat(
        "--out: '", destination, "' exists; give --force to replace it, or another --name"));
  }
  std::error_code error;
  fs::create_directories(out_dir, error);
  if (error) {
    return absl::InvalidArgumentError(
        absl::StrCat("--out: cannot create '", out_dir, "': ", error.message()));
  }
  RemoveAbandonedStaging(out_dir, name);
  const std::string path = absl::StrCat(out_dir, "/.", name, ".partial-", ::getpid());
  fs::remove_all(path, error);  // our own pid's: a leftover of a process that had it before
  if (::mkdir(path.c_str(), 0755) != 0) return Errno("--out: cannot create", path);
  return std::unique_ptr<StagingDirectory>(new StagingDirectory(path, destination, force));
}

StagingDirectory::~StagingDirectory() {
  if (committed_) return;
  std::error_code error;
  fs::remove_all(path_, error);
}

absl::Status StagingDirectory::CopyIn(const std::string& source, const std::string& file_name,
                                      const std::string& sha256) {
  const std::string target = absl::StrCat(path_, "/", file_name);
  std::error_code error;
  fs::copy_file(source, target, error);
  if (error) {
    return absl::InternalError(
        absl::StrCat("cannot copy '", source, "' to '", target, "': ", error.message()));
  }
  absl::StatusOr<std::string> copied = Sha256OfFile(target);
  if (!copied.ok()) return copied.status();
  if (*copied != sha256) {
    return absl::FailedPreconditionError(
        absl::StrCat("'", source, "' changed while it was being read; prepare again"));
  }
  return SyncPath(target);
}

absl::StatusOr<std::string> StagingDirectory::Commit(const std::string& manifest_json) {
  const std::string temp = absl::StrCat(path_, "/", kManifestFile, ".tmp");
  const std::string manifest = absl::StrCat(path_, "/", kManifestFile);
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    out << manifest_json;
    out.close();
    if (!out) return Errno("cannot write", temp);
  }
  if (absl::Status synced = SyncPath(temp); !synced.ok()) return synced;
  if (::rename(temp.c_str(), manifest.c_str()) != 0) return Errno("cannot rename", temp);
  if (absl::Status synced = SyncPath(path_); !synced.ok()) return synced;

  struct stat st {};
  if (::lstat(destination_.c_str(), &st) == 0) {
    if (!force_) {
      return absl::AlreadyExistsError(absl::StrCat(
          "--out: '", destination_, "' appeared while preparing; give --force to replace it"));
    }
    // Swap the new directory in and the old one out in one step, then delete the old.
    if (::renameat2(AT_FDCWD, path_.c_str(), AT_FDCWD, destination_.c_str(), RENAME_EXCHANGE) !=
        0) {
      return Errno("cannot swap in", destination_);
    }
    committed_ = true;
    std::error_code error;
    fs::remove_all(path_, error);  // now the old dataset
  } else {
    if (::rename(path_.c_str(), destination_.c_str()) != 0) {
      return Errno("cannot rename the prepared dataset to", destination_);
    }
    committed_ = true;
  }
  if (absl::Status synced = SyncPath(fs::path(destination_).parent_path().string()); !synced.ok()) {
    return synced;
  }
  return Sha256Hex(manifest_json);
}

}  // namespace parity::datasets
