#include "worker/child_process.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/status_macros.h"

extern char** environ;

namespace parity::worker {
namespace {

absl::Status ErrnoStatus(const std::string& what, int err) {
  return absl::InternalError(absl::StrCat(what, ": ", std::strerror(err)));
}

// argv[0] as an executable path: as given when it has a '/', else the first match on PATH.
absl::StatusOr<std::string> ResolveProgram(const std::string& name) {
  if (name.find('/') != std::string::npos) {
    if (access(name.c_str(), X_OK) != 0)
      return absl::NotFoundError(absl::StrCat("not executable: ", name));
    return name;
  }
  const char* path = getenv("PATH");
  const std::vector<std::string> dirs = absl::StrSplit(path ? path : "/usr/bin:/bin", ':');
  for (const std::string& dir : dirs) {
    std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return absl::NotFoundError(absl::StrCat("not found on PATH: ", name));
}

ExitStatus FromWaitStatus(int status) {
  ExitStatus e;
  if (WIFSIGNALED(status)) {
    e.kind = ExitStatus::Kind::kSignaled;
    e.signal = WTERMSIG(status);
  } else {
    e.kind = ExitStatus::Kind::kExited;
    e.code = WEXITSTATUS(status);
  }
  return e;
}

}  // namespace

std::string ExitStatus::ToString() const {
  if (kind == Kind::kSignaled)
    return absl::StrCat("killed by signal ", signal, " (", strsignal(signal), ")");
  return absl::StrCat("exited with code ", code);
}

absl::StatusOr<std::unique_ptr<ChildProcess>> ChildProcess::Spawn(const SpawnOptions& options) {
  if (options.argv.empty()) return absl::InvalidArgumentError("spawn: empty argv");
  if (options.output_fd < 1) return absl::InvalidArgumentError("spawn: output_fd must be >= 1");
  PARITY_ASSIGN_OR_RETURN(const std::string program, ResolveProgram(options.argv[0]));

  // Everything the child needs is built before fork: after it only async-signal-safe calls.
  std::vector<char*> argv;
  for (const std::string& a : options.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::set<std::string> overridden;
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : options.env) {
    overridden.insert(k);
    env_strings.push_back(absl::StrCat(k, "=", v));
  }
  const auto removed = [&options](std::string_view name) {
    for (const std::string& r : options.remove_env) {
      const bool prefix = !r.empty() && r.back() == '*';
      if (prefix ? name.starts_with(std::string_view(r).substr(0, r.size() - 1)) : name == r) {
        return true;
      }
    }
    return false;
  };
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string_view entry(*e);
    const std::string_view name = entry.substr(0, entry.find('='));
    if (!overridden.contains(std::string(name)) && !removed(name)) env_strings.emplace_back(entry);
  }
  std::vector<char*> envp;
  for (const std::string& s : env_strings) envp.push_back(const_cast<char*>(s.c_str()));
  envp.push_back(nullptr);

  int out_pipe[2], exec_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) return ErrnoStatus("pipe", errno);
  if (pipe2(exec_pipe, O_CLOEXEC) != 0) {
    int err = errno;
    close(out_pipe[0]);
    close(out_pipe[1]);
    return ErrnoStatus("pipe", err);
  }
  const std::string log = options.log_path.empty() ? "/dev/null" : options.log_path;
  int log_fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  auto close_all = [&] {
    for (int fd : {out_pipe[0], out_pipe[1], exec_pipe[0], exec_pipe[1], log_fd, null_fd}) {
      if (fd >= 0) close(fd);
    }
  };
  if (log_fd < 0 || null_fd < 0) {
    int err = errno;
    close_all();
    return ErrnoStatus(absl::StrCat("open ", log), err);
  }

  const pid_t parent = getpid();
  const int target_out = options.output_fd;
  const char* cwd = options.working_dir.empty() ? nullptr : options.working_dir.c_str();
  const bool pdeathsig = options.die_with_parent;
  pid_t pid = fork();
  if (pid < 0) {
    int err = errno;
    close_all();
    return ErrnoStatus("fork", err);
  }
  if (pid == 0) {
    // The child. Own process group, die with the spawning thread, clean signal state.
    setpgid(0, 0);
    if (pdeathsig) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(127);
    }
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    struct sigaction dfl;
    std::memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    for (int s = 1; s < NSIG; ++s) sigaction(s, &dfl, nullptr);
    // Move the sources out of the way first so that dup2 onto 0..target_out cannot clobber one.
    int src_in = fcntl(null_fd, F_DUPFD, 1000);
    int src_log = fcntl(log_fd, F_DUPFD, 1000);
    int src_out = fcntl(out_pipe[1], F_DUPFD, 1000);
    int src_exec = fcntl(exec_pipe[1], F_DUPFD_CLOEXEC, 1000);
    if (src_in < 0 || src_log < 0 || src_out < 0 || src_exec < 0) _exit(127);
    dup2(src_in, 0);
    dup2(target_out == 1 ? src_out : src_log, 1);
    dup2(src_log, 2);
    if (target_out > 2) dup2(src_out, target_out);
    for (int fd = 3; fd < target_out; ++fd) close(fd);
    // Keep only 0..max(2,target_out) and the exec-report pipe (close-on-exec).
    for (int fd : {src_in, src_log, src_out}) close(fd);
    const int keep_to = std::max(2, target_out);
    if (src_exec > keep_to + 1)
      close_range(static_cast<unsigned>(keep_to + 1), static_cast<unsigned>(src_exec - 1), 0);
    close_range(static_cast<unsigned>(src_exec + 1), ~0U, 0);
    if (cwd != nullptr && chdir(cwd) != 0) {
      int err = errno;
      (void)!write(src_exec, &err, sizeof err);
      _exit(127);
    }
    execve(program.c_str(), argv.data(), envp.data());
    int err = errno;
    (void)!write(src_exec, &err, sizeof err);
    _exit(127);
  }

  // The parent. setpgid here too, so the group exists before anyone signals it.
  setpgid(pid, pid);
  close(out_pipe[1]);
  close(exec_pipe[1]);
  close(log_fd);
  close(null_fd);
  int child_errno = 0;
  ssize_t n;
  do {
    n = read(exec_pipe[0], &child_errno, sizeof child_errno);
  } while (n < 0 && errno == EINTR);
  close(exec_pipe[0]);
  if (n == static_cast<ssize_t>(sizeof child_errno)) {
    int status;
    waitpid(pid, &status, 0);
    close(out_pipe[0]);
    return ErrnoStatus(absl::StrCat("exec ", program), child_errno);
  }
  return std::unique_ptr<ChildProcess>(new ChildProcess(pid, out_pipe[0]));
}

ChildProcess::~ChildProcess() {
  bool reaped;
  {
    absl::MutexLock lock(&mu_);
    reaped = exit_.has_value();
  }
  if (!reaped) {
    (void)SignalGroup(SIGKILL);
    WaitFor(absl::InfiniteDuration());
  }
  close(output_fd_);
}

absl::Status ChildProcess::SignalGroup(int signal) {
  absl::MutexLock lock(&mu_);
  if (exit_.has_value()) return absl::OkStatus();  // reaped: the pid may belong to someone else now
  if (killpg(pid_, signal) != 0 && errno != ESRCH) return ErrnoStatus("killpg", errno);
  return absl::OkStatus();
}

std::optional<ExitStatus> ChildProcess::TryWait() {
  absl::MutexLock lock(&mu_);
  if (exit_.has_value()) return exit_;
  siginfo_t info;
  std::memset(&info, 0, sizeof info);
  // WNOWAIT: look without reaping, so the group id stays ours while we clear out stragglers.
  if (waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) != 0 ||
      info.si_pid == 0) {
    return std::nullopt;
  }
  killpg(pid_, SIGKILL);  // grandchildren left behind by the leader
  int status = 0;
  pid_t r;
  do {
    r = waitpid(pid_, &status, 0);
  } while (r < 0 && errno == EINTR);
  exit_ = FromWaitStatus(status);
  return exit_;
}

std::optional<ExitStatus> ChildProcess::WaitFor(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    if (std::optional<ExitStatus> e = TryWait()) return e;
    if (absl::Now() >= deadline) return std::nullopt;
    absl::SleepFor(absl::Milliseconds(10));
  }
}

ExitStatus ChildProcess::Terminate(absl::Duration grace) {
  (void)SignalGroup(SIGTERM);
  if (std::optional<ExitStatus> e = WaitFor(grace)) return *e;
  (void)SignalGroup(SIGKILL);
  return *WaitFor(absl::InfiniteDuration());
}

LineReader::Result LineReader::ReadSome(absl::Duration timeout,
                                        const std::function<void(std::string_view)>& on_line) {
  pollfd p{fd_, POLLIN, 0};
  int ms = static_cast<int>(std::clamp<int64_t>(absl::ToInt64Milliseconds(timeout), 0, 1 << 30));
  int ready = poll(&p, 1, ms);
  if (ready == 0 || (ready < 0 && errno == EINTR)) return Result::kTimeout;
  char buf[65536];
  ssize_t n = read(fd_, buf, sizeof buf);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return Result::kTimeout;
  if (n <= 0) {
    if (!partial_.empty()) on_line(partial_);
    partial_.clear();
    return Result::kEof;
  }
  std::string_view data(buf, static_cast<size_t>(n));
  while (!data.empty()) {
    size_t nl = data.find('\n');
    if (nl == std::string_view::npos) {
      partial_.append(data.substr(0, max_line_ - std::min(max_line_, partial_.size())));
      break;
    }
    partial_.append(data.substr(0, std::min(nl, max_line_ - std::min(max_line_, partial_.size()))));
    on_line(partial_);
    partial_.clear();
    data.remove_prefix(nl + 1);
  }
  return Result::kLines;
}

}  // namespace parity::worker
