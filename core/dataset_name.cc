#include "core/dataset_name.h"

#include "absl/strings/str_cat.h"

namespace parity::core {
namespace {

bool NameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

absl::Status Refused(absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(why, "; ", kDatasetNameRemedy));
}

}  // namespace

absl::Status CheckDatasetName(absl::string_view name) {
  if (name.empty()) return Refused("required");
  if (name.size() > kMaxDatasetNameBytes) {
    return Refused(absl::StrCat(name.size(), " characters, over the limit of ",
                                kMaxDatasetNameBytes, " for a dataset name"));
  }
  for (const char c : name) {
    if (c == '/' || c == '\\') return Refused("a dataset name has no '/': it is not a path");
    if (!NameChar(c)) {
      return Refused("a dataset name holds only letters, digits, '.', '_' and '-'");
    }
  }
  if (name.front() == '.') return Refused("a dataset name does not start with '.'");
  if (name.find("..") != absl::string_view::npos) return Refused("a dataset name has no \"..\"");
  return absl::OkStatus();
}

}  // namespace parity::core
