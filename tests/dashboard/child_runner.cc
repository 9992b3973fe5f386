#include "tests/dashboard/child_runner.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "absl/time/clock.h"

namespace parity::dashboard_testing {

ChildResult RunChild(const std::vector<std::string>& argv, const std::string& log_path,
                     absl::Duration timeout, const std::function<void()>& while_running) {
  ChildResult result;
  std::vector<char*> args;
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) {
    result.output = "fork failed";
    return result;
  }
  if (pid == 0) {
    const int log = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (log >= 0) {
      dup2(log, STDOUT_FILENO);
      dup2(log, STDERR_FILENO);
      close(log);
    }
    setpgid(0, 0);  // so that a timeout kills the browser the script started too
    execvp(args[0], args.data());
    _exit(127);
  }
  const absl::Time deadline = absl::Now() + timeout;
  int status = 0;
  while (true) {
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (absl::Now() > deadline) {
      kill(-pid, SIGKILL);
      waitpid(pid, &status, 0);
      result.timed_out = true;
      break;
    }
    if (while_running) while_running();
    absl::SleepFor(absl::Milliseconds(100));
  }
  if (!result.timed_out && WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  std::ifstream log(log_path);
  std::stringstream text;
  text << log.rdbuf();
  result.output = text.str();
  return result;
}

}  // namespace parity::dashboard_testing
