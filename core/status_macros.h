// Early-return helpers for absl::Status / absl::StatusOr<T>, so a chain of fallible calls reads as
// the happy path (the hand-written `if (!x.ok()) return x.status();` they replace hid the logic).
//
//   PARITY_RETURN_IF_ERROR(store.Write(row));
//   PARITY_ASSIGN_OR_RETURN(const Plan plan, PlanSweep(spec));
//   PARITY_ASSIGN_OR_RETURN(auto rows, store.Read(id), _.WithPrefix("reading runs: "));
//
// The optional third argument of PARITY_ASSIGN_OR_RETURN is an expression of `_` (the failed
// status) whose value is returned instead, e.g. to add context or map the code.
#pragma once

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace parity::status_internal {

// The failed status under the name `_` that the third argument of PARITY_ASSIGN_OR_RETURN uses.
class StatusBuilder {
 public:
  explicit StatusBuilder(absl::Status status) : status_(std::move(status)) {}
  operator absl::Status() const& { return status_; }  // NOLINT: implicit by design
  operator absl::Status() && { return std::move(status_); }
  template <typename T>
  operator absl::StatusOr<T>() const& {  // NOLINT: lets `return _;` leave a StatusOr function
    return status_;
  }
  const absl::Status& status() const { return status_; }
  // The same code with `prefix` before the message.
  absl::Status WithPrefix(absl::string_view prefix) const {
    return absl::Status(status_.code(), absl::StrCat(prefix, status_.message()));
  }

 private:
  absl::Status status_;
};

}  // namespace parity::status_internal

#define PARITY_STATUS_CONCAT_INNER(a, b) a##b
#define PARITY_STATUS_CONCAT(a, b) PARITY_STATUS_CONCAT_INNER(a, b)

// Returns the status of `expr` from the enclosing function when it is not OK.
#define PARITY_RETURN_IF_ERROR(expr)                 \
  do {                                               \
    ::absl::Status parity_status_ = (expr);          \
    if (!parity_status_.ok()) return parity_status_; \
  } while (false)

#define PARITY_ASSIGN_OR_RETURN_2(lhs, expr) PARITY_ASSIGN_OR_RETURN_3(lhs, expr, _)
#define PARITY_ASSIGN_OR_RETURN_3(lhs, expr, on_error)                                      \
  PARITY_ASSIGN_OR_RETURN_IMPL(PARITY_STATUS_CONCAT(parity_statusor_, __LINE__), lhs, expr, \
                               on_error)
#define PARITY_ASSIGN_OR_RETURN_IMPL(statusor, lhs, expr, on_error)           \
  auto statusor = (expr);                                                     \
  if (!statusor.ok()) {                                                       \
    ::parity::status_internal::StatusBuilder _(std::move(statusor).status()); \
    return on_error;                                                          \
  }                                                                           \
  lhs = *std::move(statusor)
#define PARITY_ASSIGN_OR_RETURN_PICK(_1, _2, _3, name, ...) name
// Declares or assigns `lhs` from the value of the StatusOr `expr`, or returns its status.
#define PARITY_ASSIGN_OR_RETURN(...)                                                              \
  PARITY_ASSIGN_OR_RETURN_PICK(__VA_ARGS__, PARITY_ASSIGN_OR_RETURN_3, PARITY_ASSIGN_OR_RETURN_2, \
                               unused)                                                            \
  (__VA_ARGS__)
