// The worker's environment defaults: yes/no variables read as words, not as "set or not".
#include "worker/worker_flags.h"

#include <cstdlib>

#include "CLI/CLI.hpp"
#include "gtest/gtest.h"

namespace parity::worker {
namespace {

constexpr char kPlaintext[] = "PARITY_WORKER_METRICS_INSECURE_PLAINTEXT";

// The flags as the worker parses them with no arguments and the variable set to `value`.
WorkerFlags FlagsWith(const char* value) {
  setenv(kPlaintext, value, /*overwrite=*/1);
  WorkerFlags flags;
  CLI::App app;
  flags.AddFlags(app);
  app.parse(std::vector<std::string>{});
  unsetenv(kPlaintext);
  return flags;
}

TEST(WorkerFlagsTest, MetricsPlaintextVariableIsAYesNoWord) {
  for (const char* no : {"", "0", "false", "No", "off"}) {
    const WorkerFlags flags = FlagsWith(no);
    EXPECT_FALSE(flags.metrics_insecure_plaintext) << "'" << no << "' must not turn plaintext on";
    EXPECT_TRUE(flags.Validate().ok()) << no;
  }
  for (const char* yes : {"1", "true", "YES", "on"}) {
    EXPECT_TRUE(FlagsWith(yes).metrics_insecure_plaintext) << "'" << yes << "' turns it on";
  }
  const WorkerFlags bad = FlagsWith("maybe");
  EXPECT_FALSE(bad.metrics_insecure_plaintext);
  const absl::Status status = bad.Validate();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("PARITY_WORKER_METRICS_INSECURE_PLAINTEXT='maybe'"),
            std::string::npos)
      << "the error should name the variable and its value, got: " << status.message();
}

}  // namespace
}  // namespace parity::worker
