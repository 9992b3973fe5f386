// How Parity's daemons (parity-scheduler, parity-worker) write their logs to stderr: `text`
// (time=… level=… key=value message) for people, or `json` (one object per line: time, level,
// logger, msg) for collectors. One place, so both daemons take the same --log-format and a
// collector parses both the same way.
#pragma once

#include <string>

#include "absl/status/status.h"

namespace parity::logging {

// Makes a stderr logger named `logger` the default and sets its format and level.
// InvalidArgument naming --log-format or --log-level when either is not one of the accepted
// spellings (text|json; trace|debug|info|warn|error|critical|off).
absl::Status ConfigureLogging(const std::string& logger, const std::string& format,
                              const std::string& level);

}  // namespace parity::logging
