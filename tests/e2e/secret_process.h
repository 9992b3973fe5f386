// What the secrets tests (secrets_test.cc, plaintext_guard_test.cc) share: a scratch directory,
// running a command line for its exit code and output, the real parity-scheduler started on a
// free loopback port, and file modes.
#pragma once

#include <sys/stat.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/child_process.h"

namespace parity::e2e {

// A new empty directory under TMPDIR (mode 0700), removed by the destructor.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& name);
  ~ScratchDir();
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

struct CommandResult {
  int exit_code = -1;  // -1: did not exit normally
  std::string output;  // stdout and stderr together
  double seconds = 0;  // how long it ran
};

// Runs `command` with /bin/sh, stdout and stderr captured together.
CommandResult RunCommand(const std::string& command);

// Single-quoted for the shell.
std::string ShellQuote(const std::string& text);

std::string ReadWholeFile(const std::string& path);

// The permission bits of `path` (lstat), or -1 when it does not exist.
int FileMode(const std::string& path);

// The real parity-scheduler, `serve`, on 127.0.0.1:port() with stdout and stderr in log_path.
class SchedulerProcess {
 public:
  // `env` on top of the defaults (listen address, database, metrics and HTTP on any free port).
  static absl::StatusOr<std::unique_ptr<SchedulerProcess>> Start(
      const std::string& database_url, const std::string& log_path,
      std::vector<std::pair<std::string, std::string>> env);
  ~SchedulerProcess();

  // Waits until the gRPC health service says SERVING; an error with the log's tail when the
  // process exits or 30 s pass.
  absl::Status WaitHealthy();
  // Waits up to 30 s for the process to exit by itself.
  std::optional<worker::ExitStatus> WaitExit();
  void Stop();

  int port() const { return port_; }
  std::string address() const;

 private:
  SchedulerProcess(int port, std::string log_path) : port_(port), log_path_(std::move(log_path)) {}

  int port_;
  std::string log_path_;
  std::unique_ptr<worker::ChildProcess> child_;
};

}  // namespace parity::e2e
