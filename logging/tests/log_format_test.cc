#include "logging/log_format.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"

namespace parity::logging {
namespace {

using ::testing::HasSubstr;

TEST(LogFormatTest, JsonLinesStayValidJsonWhateverTheMessageHolds) {
  ASSERT_TRUE(ConfigureLogging("parity-test", "json", "info").ok());
  testing::internal::CaptureStderr();
  spdlog::info("error=\"quoted\" path=C:\\tmp\nsecond line\tand a tab");
  spdlog::debug("below the level: not written");
  spdlog::default_logger()->flush();
  const std::string out = testing::internal::GetCapturedStderr();
  ASSERT_EQ(out.find('\n'), out.size() - 1) << "expected exactly one line, got: " << out;
  const nlohmann::json line = nlohmann::json::parse(out, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(line.is_discarded()) << "not valid JSON: " << out;
  EXPECT_EQ(line["msg"], "error=\"quoted\" path=C:\\tmp\nsecond line\tand a tab");
  EXPECT_EQ(line["level"], "info");
  EXPECT_EQ(line["logger"], "parity-test");
  EXPECT_THAT(line["time"].get<std::string>(), HasSubstr("T"));
}

TEST(LogFormatTest, TextLinesAreKeyValue) {
  ASSERT_TRUE(ConfigureLogging("parity-test", "text", "warn").ok());
  testing::internal::CaptureStderr();
  spdlog::info("below the level: not written");
  spdlog::warn("run=7 state=failed");
  spdlog::default_logger()->flush();
  const std::string out = testing::internal::GetCapturedStderr();
  EXPECT_THAT(out, HasSubstr("level=warning run=7 state=failed"));
  EXPECT_THAT(out, ::testing::Not(HasSubstr("not written")));
}

TEST(LogFormatTest, UnknownFormatOrLevelIsRefusedByFlagName) {
  absl::Status format = ConfigureLogging("parity-test", "yaml", "info");
  EXPECT_EQ(format.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(format.message(), HasSubstr("--log-format: 'yaml'"));
  absl::Status level = ConfigureLogging("parity-test", "text", "verbose");
  EXPECT_EQ(level.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(level.message(), HasSubstr("--log-level: 'verbose'"));
  EXPECT_TRUE(ConfigureLogging("parity-test", "text", "off").ok()) << "'off' itself is a level";
}

}  // namespace
}  // namespace parity::logging
