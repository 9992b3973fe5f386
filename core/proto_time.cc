#include "core/proto_time.h"

#include <cstdint>
#include <limits>

namespace parity {
namespace {

// The protobuf limits: Timestamps within years 1–9999, Durations within ±10,000 years.
constexpr int64_t kMinTimestampSeconds = -62135596800;
constexpr int64_t kMaxTimestampSeconds = 253402300799;
constexpr int64_t kMaxDurationSeconds = 315576000000;

}  // namespace

google::protobuf::Timestamp ToProtoTime(absl::Time time) {
  google::protobuf::Timestamp out;
  if (time <= absl::FromUnixSeconds(kMinTimestampSeconds)) {
    out.set_seconds(kMinTimestampSeconds);
    return out;
  }
  if (time >= absl::FromUnixSeconds(kMaxTimestampSeconds)) {
    out.set_seconds(kMaxTimestampSeconds);
    return out;
  }
  const int64_t seconds = absl::ToUnixSeconds(time);  // rounds toward −∞, so nanos ≥ 0
  out.set_seconds(seconds);
  out.set_nanos(
      static_cast<int32_t>(absl::ToInt64Nanoseconds(time - absl::FromUnixSeconds(seconds))));
  return out;
}

absl::Time FromProtoTime(const google::protobuf::Timestamp& time) {
  return absl::FromUnixSeconds(time.seconds()) + absl::Nanoseconds(time.nanos());
}

google::protobuf::Duration ToProtoDuration(absl::Duration duration) {
  google::protobuf::Duration out;
  if (duration >= absl::Seconds(kMaxDurationSeconds)) {
    out.set_seconds(kMaxDurationSeconds);
    return out;
  }
  if (duration <= -absl::Seconds(kMaxDurationSeconds)) {
    out.set_seconds(-kMaxDurationSeconds);
    return out;
  }
  // Seconds and nanos share a sign, as the protobuf type requires: truncate toward zero.
  const int64_t seconds = absl::IDivDuration(duration, absl::Seconds(1), &duration);
  out.set_seconds(seconds);
  out.set_nanos(static_cast<int32_t>(absl::ToInt64Nanoseconds(duration)));
  return out;
}

absl::Duration FromProtoDuration(const google::protobuf::Duration& duration) {
  return absl::Seconds(duration.seconds()) + absl::Nanoseconds(duration.nanos());
}

}  // namespace parity
