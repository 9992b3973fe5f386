// The one conversion between Abseil's time types and the protobuf well-known types, used by every
// room that puts times or durations on the wire (scheduler, worker, CLI). Saturates instead of
// overflowing: an infinite absl::Duration becomes the largest protobuf Duration.
#pragma once

#include "absl/time/time.h"
#include "google/protobuf/duration.pb.h"
#include "google/protobuf/timestamp.pb.h"

namespace parity {

google::protobuf::Timestamp ToProtoTime(absl::Time time);
absl::Time FromProtoTime(const google::protobuf::Timestamp& time);

google::protobuf::Duration ToProtoDuration(absl::Duration duration);
absl::Duration FromProtoDuration(const google::protobuf::Duration& duration);

}  // namespace parity
