#include "core/eval_sets.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace parity::core {
namespace {

bool NameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

absl::Status Refused(absl::string_view name, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("evaluation set name '", name.substr(0, kMaxEvalSetNameBytes), "': ", why,
                   "; name a set with letters, digits, '.', '_' and '-' (e.g. \"code\")"));
}

}  // namespace

absl::Status CheckEvalSetName(absl::string_view name) {
  if (name.empty()) return Refused(name, "empty");
  if (name.size() > kMaxEvalSetNameBytes) {
    return Refused(name,
                   absl::StrCat(name.size(), " bytes, over the limit of ", kMaxEvalSetNameBytes));
  }
  for (const char c : name) {
    if (!NameChar(c)) return Refused(name, "holds a character other than [A-Za-z0-9._-]");
  }
  if (name.front() == '.' || name.front() == '-' || name.front() == '_') {
    return Refused(name, "does not start with a letter or digit");
  }
  if (name.find("..") != absl::string_view::npos) return Refused(name, "holds \"..\"");
  return absl::OkStatus();
}

absl::Status CheckEvalBpc(const google::protobuf::Map<std::string, double>& bpc) {
  if (bpc.size() > kMaxEvalSets) {
    return absl::InvalidArgumentError(absl::StrCat(bpc.size(),
                                                   " evaluation sets, over the limit of ",
                                                   kMaxEvalSets, "; evaluate on fewer sets"));
  }
  for (const auto& [name, value] : bpc) {
    if (absl::Status status = CheckEvalSetName(name); !status.ok()) return status;
    if (!std::isfinite(value) || value < 0) {
      return absl::InvalidArgumentError(absl::StrCat("evaluation set '", name, "': BPC ", value,
                                                     " is not a finite, non-negative number"));
    }
  }
  return absl::OkStatus();
}

}  // namespace parity::core
