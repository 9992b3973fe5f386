// Request checks shared by the scheduler's calls: each collects every problem of a request as a
// field violation and returns one INVALID_ARGUMENT carrying a google.rpc.BadRequest payload.
#pragma once

#include <algorithm>
#include <cctype>
#include <cmath>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "core/field_violation.h"
#include "server/store/uuid.h"

namespace parity::server {

class Violations {
 public:
  void Add(std::string field, std::string description) {
    list_.push_back({std::move(field), std::move(description)});
  }
  void RequireUuid(absl::string_view field, absl::string_view value) {
    if (value.empty()) {
      Add(std::string(field), "required (UUID text)");
    } else if (!IsUuid(value)) {
      Add(std::string(field), absl::StrCat("'", value.substr(0, 64), "' is not a UUID"));
    }
  }
  void RequireFinite(absl::string_view field, double value) {
    if (!std::isfinite(value)) Add(std::string(field), "must be a finite number");
  }
  // Page sizes: 0 = `fallback`, otherwise 1..max.
  uint32_t PageSize(absl::string_view field, uint32_t value, uint32_t fallback, uint32_t max) {
    if (value == 0) return fallback;
    if (value > max) {
      Add(std::string(field), absl::StrCat(value, " exceeds the maximum of ", max));
      return fallback;
    }
    return value;
  }
  bool empty() const { return list_.empty(); }
  absl::Status ToStatus(absl::string_view summary) const {
    if (list_.empty()) return absl::OkStatus();
    return core::InvalidArgumentWithViolations(std::string_view(summary.data(), summary.size()),
                                               list_);
  }

 private:
  std::vector<core::FieldViolation> list_;
};

// LeaseRunRequest's request_id (at most kMaxLeaseRequestIdChars of [A-Za-z0-9_-], empty = none)
// and retry, which repeats a request and so needs its id.
inline constexpr size_t kMaxLeaseRequestIdChars = 64;
inline void CheckLeaseRequestId(Violations& violations, absl::string_view request_id, bool retry) {
  const bool allowed = std::all_of(request_id.begin(), request_id.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
  });
  if (request_id.size() > kMaxLeaseRequestIdChars || !allowed) {
    violations.Add("request_id",
                   absl::StrCat(request_id.size() > kMaxLeaseRequestIdChars
                                    ? absl::StrCat(request_id.size(), " characters, over the limit")
                                    : "holds a character outside [A-Za-z0-9_-]",
                                "; send at most ", kMaxLeaseRequestIdChars,
                                " letters, digits, '_' or '-' (a fresh random id per attempt)"));
  }
  if (retry && request_id.empty()) {
    violations.Add("retry",
                   "set without a request_id: a retry repeats a call by its request_id; send the "
                   "id of the call whose answer was lost, or leave retry false");
  }
}

}  // namespace parity::server
