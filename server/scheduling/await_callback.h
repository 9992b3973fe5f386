// AwaitCallback: the blocking form of a call that answers through a callback, for callers with
// a thread to spare (tests, tools, RequestCombiner::Submit).
#pragma once

#include <optional>
#include <utility>

#include "absl/functional/any_invocable.h"
#include "absl/synchronization/notification.h"

namespace parity::server {

// Calls `start` with a callback taking a Result and blocks until that callback has run once.
template <typename Result, typename Start>
Result AwaitCallback(Start start) {
  std::optional<Result> answer;
  absl::Notification answered;
  start(absl::AnyInvocable<void(Result)>([&](Result result) {
    answer.emplace(std::move(result));
    answered.Notify();
  }));
  answered.WaitForNotification();
  return std::move(*answer);
}

}  // namespace parity::server
