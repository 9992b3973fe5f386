// Time as a dependency, so tests can reason about deadlines without sleeping on the wall clock.
#pragma once

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace parity::server {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() const = 0;
};

class RealClock final : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
};

}  // namespace parity::server
