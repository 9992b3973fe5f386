#include "logging/log_format.h"

#include <memory>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "spdlog/pattern_formatter.h"
#include "spdlog/sinks/stdout_sinks.h"
#include "spdlog/spdlog.h"

namespace parity::logging {
namespace {

// The message JSON-escaped, so that a log line stays one valid JSON object whatever an error
// text holds (quotes, newlines from libpq).
class JsonEscapedMessage final : public spdlog::custom_flag_formatter {
 public:
  static void Append(spdlog::memory_buf_t& dest, std::string_view text) {
    dest.append(text.data(), text.data() + text.size());
  }
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    for (const char c : std::string_view(msg.payload.data(), msg.payload.size())) {
      switch (c) {
        case '"':
          Append(dest, "\\\"");
          break;
        case '\\':
          Append(dest, "\\\\");
          break;
        case '\n':
          Append(dest, "\\n");
          break;
        case '\t':
          Append(dest, "\\t");
          break;
        default:
          if (static_cast<unsigned char>(c) >= 0x20) dest.push_back(c);
      }
    }
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<JsonEscapedMessage>();
  }
};

}  // namespace

absl::Status ConfigureLogging(const std::string& logger, const std::string& format,
                              const std::string& level) {
  if (format != "text" && format != "json") {
    return absl::InvalidArgumentError(
        absl::StrCat("--log-format: '", format, "' is neither text nor json"));
  }
  const spdlog::level::level_enum parsed = spdlog::level::from_str(level);
  // from_str answers "off" for any word it does not know: only "off" itself may mean off.
  if (parsed == spdlog::level::off && level != "off") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--log-level: '", level, "' is not one of trace, debug, info, warn, error, critical, off"));
  }
  spdlog::drop(logger);  // configured again (tests): the registry refuses a second of one name
  spdlog::set_default_logger(spdlog::stderr_logger_mt(logger));
  if (format == "json") {
    // One JSON object per line; the message (key=value text) is the escaped "msg".
    auto formatter = std::make_unique<spdlog::pattern_formatter>(spdlog::pattern_time_type::utc);
    formatter->add_flag<JsonEscapedMessage>('*').set_pattern(
        R"({"time":"%Y-%m-%dT%H:%M:%S.%fZ","level":"%l","logger":"%n","msg":"%*"})");
    spdlog::set_formatter(std::move(formatter));
  } else {
    spdlog::set_pattern("time=%Y-%m-%dT%H:%M:%S.%fZ level=%l %v", spdlog::pattern_time_type::utc);
  }
  spdlog::set_level(parsed);
  return absl::OkStatus();
}

}  // namespace parity::logging
