// A child process in its own process group: spawn, signal the group, reap, read its output lines.
//
// No gRPC and no knowledge of runs: this is plain POSIX process supervision. The child gets a new
// process group (so a signal reaches its grandchildren too), SIGKILL when the thread that spawned
// it dies (PR_SET_PDEATHSIG: a kill -9 of the worker does not leave engines training unsupervised;
// so spawn from a thread that outlives the child), default signal dispositions and an empty signal
// mask, and only the file descriptors we hand it. Linux only.
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace parity::worker {

// How a child ended.
struct ExitStatus {
  enum class Kind { kExited, kSignaled };
  Kind kind = Kind::kExited;
  int code = 0;    // exit code when kExited
  int signal = 0;  // signal number when kSignaled

  bool success() const { return kind == Kind::kExited && code == 0; }
  std::string ToString() const;
};

struct SpawnOptions {
  // argv[0] is the program: a path, or a name looked up on PATH.
  std::vector<std::string> argv;
  // Extra environment variables on top of the worker's own.
  std::vector<std::pair<std::string, std::string>> env = {};
  // Variables of the worker's own environment the child does not inherit: a name, or a prefix
  // ending in '*' ("PARITY_TLS_*"). For secrets (the worker's token, its TLS key).
  std::vector<std::string> remove_env = {};
  // Directory the child starts in; empty = the worker's.
  std::string working_dir = {};
  // File that receives the child's stderr (and stdout when output_fd != 1), appended; empty =
  // /dev/null.
  std::string log_path = {};
  // The descriptor number in the child whose writes we read line by line (1 = stdout).
  int output_fd = 1;
  // Kill the child when the spawning thread exits.
  bool die_with_parent = true;
};

// Owns one child process. Thread-safe: SignalGroup and the wait calls may come from any thread;
// the output descriptor is read by one thread (see LineReader). The destructor SIGKILLs the group
// if the child was never reaped, and reaps it.
class ChildProcess {
 public:
  static absl::StatusOr<std::unique_ptr<ChildProcess>> Spawn(const SpawnOptions& options);
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  // Read end of the child's output pipe; owned by this object, closed in the destructor.
  int output_fd() const { return output_fd_; }

  // Sends `signal` to the whole process group. OK (and a no-op) once the child was reaped.
  absl::Status SignalGroup(int signal);
  // Non-blocking: the exit status if the child has ended (reaping it), else nullopt.
  std::optional<ExitStatus> TryWait();
  // Waits up to `timeout` for the child to end.
  std::optional<ExitStatus> WaitFor(absl::Duration timeout);
  // SIGTERM to the group, then SIGKILL after `grace` if it is still running; returns how it ended.
  ExitStatus Terminate(absl::Duration grace);

 private:
  ChildProcess(pid_t pid, int output_fd) : pid_(pid), output_fd_(output_fd) {}

  const pid_t pid_;  // also the process group id
  const int output_fd_;
  absl::Mutex mu_;
  std::optional<ExitStatus> exit_ ABSL_GUARDED_BY(mu_);  // set once reaped; pid_ is stale after
};

// Splits a descriptor's bytes into lines. Not thread-safe: one reader thread.
class LineReader {
 public:
  explicit LineReader(int fd, size_t max_line_bytes = 1 << 20)
      : fd_(fd), max_line_(max_line_bytes) {}

  enum class Result { kLines, kTimeout, kEof };
  // Waits up to `timeout` for bytes; calls on_line for each complete line (without '\n'). At end of
  // file a last unterminated line is delivered too. Over-long lines are cut at max_line_bytes.
  Result ReadSome(absl::Duration timeout, const std::function<void(std::string_view)>& on_line);

 private:
  int fd_;
  size_t max_line_;
  std::string partial_;
};

}  // namespace parity::worker
