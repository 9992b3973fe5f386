#include "core/proto_time.h"

#include <gtest/gtest.h>

#include "core/status_macros.h"

namespace parity {
namespace {

TEST(ProtoTimeTest, TimestampsRoundTripToTheNanosecond) {
  for (const absl::Time t : {absl::UnixEpoch(), absl::FromUnixNanos(1764572400123456789),
                             absl::FromUnixNanos(-1500000001)}) {
    const google::protobuf::Timestamp p = ToProtoTime(t);
    EXPECT_GE(p.nanos(), 0) << "a Timestamp's nanos are never negative";
    EXPECT_LT(p.nanos(), 1000000000);
    EXPECT_EQ(FromProtoTime(p), t) << absl::FormatTime(t);
  }
}

TEST(ProtoTimeTest, DurationsRoundTripWithSecondsAndNanosOfOneSign) {
  for (const absl::Duration d : {absl::ZeroDuration(), absl::Milliseconds(1500),
                                 -absl::Milliseconds(1500), absl::Nanoseconds(-7)}) {
    const google::protobuf::Duration p = ToProtoDuration(d);
    EXPECT_TRUE((p.seconds() >= 0 && p.nanos() >= 0) || (p.seconds() <= 0 && p.nanos() <= 0))
        << p.ShortDebugString();
    EXPECT_EQ(FromProtoDuration(p), d) << absl::FormatDuration(d);
  }
}

TEST(ProtoTimeTest, InfiniteValuesSaturateAtTheProtobufLimits) {
  EXPECT_EQ(ToProtoDuration(absl::InfiniteDuration()).seconds(), 315576000000);
  EXPECT_EQ(ToProtoDuration(-absl::InfiniteDuration()).seconds(), -315576000000);
  EXPECT_EQ(ToProtoTime(absl::InfiniteFuture()).seconds(), 253402300799);
  EXPECT_EQ(ToProtoTime(absl::InfinitePast()).seconds(), -62135596800);
}

absl::StatusOr<int> Half(int x) {
  if (x % 2 != 0) return absl::InvalidArgumentError("odd");
  return x / 2;
}
absl::StatusOr<int> Quarter(int x) {
  PARITY_ASSIGN_OR_RETURN(const int half, Half(x));
  PARITY_ASSIGN_OR_RETURN(int quarter, Half(half), _.WithPrefix("second half: "));
  return quarter;
}
absl::Status CheckEven(int x) {
  PARITY_RETURN_IF_ERROR(Half(x).status());
  return absl::OkStatus();
}

TEST(StatusMacrosTest, AssignOrReturnPassesValuesAndReturnsErrorsWithContext) {
  EXPECT_EQ(*Quarter(8), 2);
  EXPECT_EQ(Quarter(3).status(), absl::InvalidArgumentError("odd"));
  EXPECT_EQ(Quarter(6).status(), absl::InvalidArgumentError("second half: odd"));
  EXPECT_TRUE(CheckEven(4).ok());
  EXPECT_EQ(CheckEven(5).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace parity
