// UTF-8 checks, and field violations quoting text that is not UTF-8 (core/utf8.h,
// core/field_violation.h).
#include "core/utf8.h"

#include "core/field_violation.h"
#include "gtest/gtest.h"

namespace parity::core {
namespace {

TEST(Utf8Test, ValidTextIsKept) {
  for (const std::string text : {"", "plain", "caf\xc3\xa9", "\xe2\x82\xac 5", "\xf0\x9f\x98\x80",
                                 "\xef\xbf\xbd", "\xf4\x8f\xbf\xbf"}) {
    EXPECT_EQ(InvalidUtf8Offset(text), std::string_view::npos) << text;
    EXPECT_EQ(ToValidUtf8(text), text);
  }
}

TEST(Utf8Test, InvalidSequencesAreFoundAndReplaced) {
  EXPECT_EQ(InvalidUtf8Offset("ab\xff"), 2u);
  EXPECT_EQ(InvalidUtf8Offset("caf\xe9"), 3u);           // Latin-1
  EXPECT_EQ(InvalidUtf8Offset("\xc0\xaf"), 0u);          // overlong '/'
  EXPECT_EQ(InvalidUtf8Offset("\xed\xa0\x80"), 0u);      // a surrogate
  EXPECT_EQ(InvalidUtf8Offset("\xf4\x90\x80\x80"), 0u);  // above U+10FFFF
  EXPECT_EQ(InvalidUtf8Offset("x\xe2\x82"), 1u);         // cut mid-character
  EXPECT_EQ(ToValidUtf8("caf\xe9!"), "caf\xef\xbf\xbd!");
  EXPECT_EQ(ToValidUtf8("x\xe2\x82"), "x\xef\xbf\xbd\xef\xbf\xbd");
}

// Found by tests/fuzz: a violation quoting bytes that are not UTF-8 (a spec value, an id cut at 64
// bytes mid-character) made the google.rpc.BadRequest payload unparseable, so the status reached
// the CLI and the gRPC client with its violations silently gone.
TEST(Utf8Test, ViolationsQuotingInvalidTextSurviveThePayload) {
  const FieldViolation violations[] = {{"run_id", "'\xe2\x82' is not a UUID"},
                                       {"spec\xff", "caf\xe9"}};
  const absl::Status status = InvalidArgumentWithViolations("invalid \xff request", violations);
  const std::vector<FieldViolation> back = FieldViolationsOf(status);
  ASSERT_EQ(back.size(), 2u) << status;
  EXPECT_EQ(back[0].field, "run_id");
  EXPECT_EQ(back[0].description, "'\xef\xbf\xbd\xef\xbf\xbd' is not a UUID");
  EXPECT_EQ(back[1].field, "spec\xef\xbf\xbd");
  EXPECT_EQ(back[1].description, "caf\xef\xbf\xbd");
  EXPECT_EQ(InvalidUtf8Offset(std::string(status.message())), std::string_view::npos);
}

}  // namespace
}  // namespace parity::core
