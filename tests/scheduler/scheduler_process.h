// SchedulerProcess: the real parity-scheduler binary as a child process on a throwaway database,
// for tests that need its own process (its memory, its start-up refusals) and raw sockets to its
// web port. The ports are read from its log (event=serving / event=http_serving lines).
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace parity::server::testing {

class SchedulerProcess {
 public:
  // Starts `binary` with `args` (stderr and stdout into `log_path`). Use Wait...() next.
  SchedulerProcess(const std::string& binary, const std::vector<std::string>& args,
                   std::string log_path)
      : log_path_(std::move(log_path)) {
    std::vector<std::string> argv = {binary};
    argv.insert(argv.end(), args.begin(), args.end());
    pid_ = ::fork();
    if (pid_ == 0) {
      const int fd = ::open(log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      std::vector<char*> c_argv;
      for (std::string& arg : argv) c_argv.push_back(arg.data());
      c_argv.push_back(nullptr);
      ::execv(c_argv[0], c_argv.data());
      ::_exit(127);
    }
  }
  ~SchedulerProcess() { Stop(); }

  pid_t pid() const { return pid_; }
  std::string Log() const {
    std::ifstream in(log_path_);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

  // Waits for both ports to be logged; false when the process exits or `timeout` passes.
  bool WaitServing(absl::Duration timeout = absl::Seconds(60)) {
    const absl::Time deadline = absl::Now() + timeout;
    while (absl::Now() < deadline) {
      const std::string log = Log();
      std::smatch grpc, http;
      static const std::regex kGrpc(R"(event=serving address=\S+ port=(\d+))");
      static const std::regex kHttp(R"(event=http_serving address=\S+ port=(\d+))");
      if (std::regex_search(log, grpc, kGrpc) && std::regex_search(log, http, kHttp)) {
        return absl::SimpleAtoi(grpc[1].str(), &grpc_port_) &&
               absl::SimpleAtoi(http[1].str(), &http_port_);
      }
      if (ExitCode().has_value()) return false;
      absl::SleepFor(absl::Milliseconds(50));
    }
    return false;
  }

  // The exit code once it has exited (waiting up to `timeout`); nullopt while it runs.
  std::optional<int> ExitCode(absl::Duration timeout = absl::ZeroDuration()) {
    const absl::Time deadline = absl::Now() + timeout;
    do {
      if (exit_code_.has_value()) return exit_code_;
      int status = 0;
      if (pid_ > 0 && ::waitpid(pid_, &status, WNOHANG) == pid_) {
        exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        return exit_code_;
      }
      if (timeout > absl::ZeroDuration()) absl::SleepFor(absl::Milliseconds(20));
    } while (absl::Now() < deadline);
    return std::nullopt;
  }

  void Stop() {
    if (pid_ <= 0 || exit_code_.has_value()) return;
    ::kill(pid_, SIGTERM);
    if (!ExitCode(absl::Seconds(20)).has_value()) {
      ::kill(pid_, SIGKILL);
      ExitCode(absl::Seconds(5));
    }
  }

  int grpc_port() const { return grpc_port_; }
  int http_port() const { return http_port_; }

  // Resident memory of the process (VmRSS), in KiB; -1 when unreadable.
  long RssKib() const {
    std::ifstream status(absl::StrCat("/proc/", pid_, "/status"));
    std::string line;
    while (std::getline(status, line)) {
      long kib = 0;
      if (line.rfind("VmRSS:", 0) == 0 &&
          absl::SimpleAtoi(absl::StripAsciiWhitespace(line.substr(6, line.size() - 6 - 3)), &kib)) {
        return kib;
      }
    }
    return -1;
  }

 private:
  std::string log_path_;
  pid_t pid_ = -1;
  std::optional<int> exit_code_;
  int grpc_port_ = 0;
  int http_port_ = 0;
};

// A TCP connection to 127.0.0.1:`port` from `source` (any 127.x address); -1 on failure.
inline int ConnectFrom(const std::string& source, int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in local{};
  local.sin_family = AF_INET;
  ::inet_pton(AF_INET, source.c_str(), &local.sin_addr);
  sockaddr_in remote{};
  remote.sin_family = AF_INET;
  remote.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, "127.0.0.1", &remote.sin_addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&local), sizeof(local)) != 0 ||
      ::connect(fd, reinterpret_cast<sockaddr*>(&remote), sizeof(remote)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

inline bool SendAll(int fd, const std::string& data) {
  size_t sent = 0;
  while (sent < data.size()) {
    const ssize_t n = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

// Whether the server has closed `fd` (end of stream or reset), waiting up to `wait`.
inline bool ClosedByPeer(int fd, absl::Duration wait) {
  pollfd p{fd, POLLIN | POLLRDHUP, 0};
  if (::poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(wait))) <= 0) return false;
  char buffer[4096];
  while (true) {
    const ssize_t n = ::recv(fd, buffer, sizeof(buffer), MSG_DONTWAIT);
    if (n == 0) return true;
    if (n < 0) return errno != EAGAIN && errno != EWOULDBLOCK;
    // a response before the close: read on
  }
}

// Reads until the end of the response headers (or `wait`); "" when nothing came.
inline std::string ReadHead(int fd, absl::Duration wait) {
  std::string text;
  const absl::Time deadline = absl::Now() + wait;
  char buffer[4096];
  while (text.find("\r\n\r\n") == std::string::npos && absl::Now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(deadline - absl::Now()))) <= 0) {
      break;
    }
    const ssize_t n = ::recv(fd, buffer, sizeof(buffer), 0);
    if (n <= 0) break;
    text.append(buffer, static_cast<size_t>(n));
  }
  return text;
}

// The status code of a response head ("HTTP/1.1 413 ..." → 413); 0 when there is none.
inline int StatusOf(const std::string& head) {
  int status = 0;
  if (head.size() < 12 || !absl::SimpleAtoi(head.substr(9, 3), &status)) return 0;
  return status;
}

}  // namespace parity::server::testing
