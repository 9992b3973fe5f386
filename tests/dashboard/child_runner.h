// Runs a command (node with the browser script, the parity CLI) as a child process with its
// output in a log file, calling `while_running` every 100 ms until it exits — how the test
// answers the browser script's live-update handshake — and killing it past a timeout.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace parity::dashboard_testing {

struct ChildResult {
  int exit_code = -1;  // -1 when killed (timeout) or not started
  std::string output;  // stdout and stderr together
  bool timed_out = false;
};

ChildResult RunChild(const std::vector<std::string>& argv, const std::string& log_path,
                     absl::Duration timeout, const std::function<void()>& while_running = nullptr);

}  // namespace parity::dashboard_testing
