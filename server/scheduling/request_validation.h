// Request checks shared by the scheduler's calls: each collects every problem of a request as a
// field violation and returns one INVALID_ARGUMENT carrying a google.rpc.BadRequest payload.
#pragma once

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

}  // namespace parity::server
