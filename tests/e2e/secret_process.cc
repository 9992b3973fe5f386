#include "tests/e2e/secret_process.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "clients/cpp/scheduler_channel.h"
#include "worker/scheduler_client.h"

namespace parity::e2e {
namespace {

namespace fs = std::filesystem;

int FreeLoopbackPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
    port = ntohs(address.sin_port);
  }
  ::close(fd);
  return port;
}

std::string Tail(const std::string& text) {
  return text.size() > 4000 ? text.substr(text.size() - 4000) : text;
}

}  // namespace

ScratchDir::ScratchDir(const std::string& name) {
  std::string pattern = (fs::temp_directory_path() / (name + ".XXXXXX")).string();
  if (::mkdtemp(pattern.data()) == nullptr) std::abort();
  path_ = pattern;
}

ScratchDir::~ScratchDir() {
  std::error_code ignored;
  fs::remove_all(path_, ignored);
}

CommandResult RunCommand(const std::string& command) {
  CommandResult result;
  const auto start = std::chrono::steady_clock::now();
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) result.output.append(buffer, n);
  const int status = ::pclose(pipe);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  return result;
}

std::string ShellQuote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

int FileMode(const std::string& path) {
  struct stat info {};
  if (::lstat(path.c_str(), &info) != 0) return -1;
  return static_cast<int>(info.st_mode & 07777);
}

absl::StatusOr<std::unique_ptr<SchedulerProcess>> SchedulerProcess::Start(
    const std::string& database_url, const std::string& log_path,
    std::vector<std::pair<std::string, std::string>> env) {
  std::unique_ptr<SchedulerProcess> process(new SchedulerProcess(FreeLoopbackPort(), log_path));
  std::vector<std::pair<std::string, std::string>> all = {{"PARITY_LISTEN", process->address()},
                                                          {"PARITY_DATABASE_URL", database_url},
                                                          {"PARITY_METRICS_LISTEN", "127.0.0.1:0"},
                                                          {"PARITY_HTTP_LISTEN", "127.0.0.1:0"}};
  all.insert(all.end(), env.begin(), env.end());
  absl::StatusOr<std::unique_ptr<worker::ChildProcess>> child = worker::ChildProcess::Spawn({
      .argv = {PARITY_SCHEDULER_BIN, "serve"},
      .env = all,
      .log_path = log_path,
      .output_fd = 3,  // unused: stdout and stderr both go to the log
  });
  if (!child.ok()) return child.status();
  process->child_ = *std::move(child);
  return process;
}

SchedulerProcess::~SchedulerProcess() { Stop(); }

std::string SchedulerProcess::address() const { return absl::StrCat("127.0.0.1:", port_); }

absl::Status SchedulerProcess::WaitHealthy() {
  clients::SchedulerChannelOptions target;
  target.address = address();
  for (int i = 0; i < 300; ++i) {
    if (worker::ProbeSchedulerHealth(target, absl::Milliseconds(200)).ok()) {
      return absl::OkStatus();
    }
    if (child_->TryWait().has_value()) break;
    absl::SleepFor(absl::Milliseconds(100));
  }
  return absl::UnavailableError(absl::StrCat("the scheduler did not become healthy; its log:\n",
                                             Tail(ReadWholeFile(log_path_))));
}

std::optional<worker::ExitStatus> SchedulerProcess::WaitExit() {
  return child_->WaitFor(absl::Seconds(30));
}

void SchedulerProcess::Stop() {
  if (child_) child_->Terminate(absl::Seconds(15));
  child_.reset();
}

}  // namespace parity::e2e
