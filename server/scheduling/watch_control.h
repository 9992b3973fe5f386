// WatchControl: how a streaming or long-polling call (WatchSweep, WatchRun, LeaseRun) is told to
// stop, and asked whether its caller may still go on.
#pragma once

#include <functional>
#include <utility>

#include "absl/status/status.h"

namespace parity::server {

struct WatchControl {
  WatchControl() = default;
  // Implicit, so that `{cancelled}` reads as before `authorized` was added.
  WatchControl(std::function<bool()> cancelled,  // NOLINT(google-explicit-constructor)
               std::function<absl::Status()> authorized = nullptr)
      : cancelled(std::move(cancelled)), authorized(std::move(authorized)) {}

  std::function<bool()> cancelled;  // the client went away or the server is stopping
  // Whether the caller may still watch (its token not revoked or expired): asked every
  // SchedulerOptions::watch_reauth_interval; an error ends the stream with it. Null: never asked.
  std::function<absl::Status()> authorized;
};

}  // namespace parity::server
