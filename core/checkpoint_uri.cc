#include "core/checkpoint_uri.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace parity::core {
namespace {

bool PartChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

// A plain file name: no separator, not "." or "..", no leading dot.
bool PlainPart(absl::string_view part) {
  if (part.empty() || part.front() == '.') return false;
  for (const char c : part) {
    if (!PartChar(c)) return false;
  }
  return true;
}

absl::Status Refused(absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat(why,
                   "; a checkpoint URI is <run_id>/<directory>/<file>, relative to the "
                   "checkpoint store, inside the run's own prefix"));
}

}  // namespace

absl::Status CheckCheckpointUri(absl::string_view run_id, absl::string_view uri) {
  if (uri.empty()) return absl::OkStatus();
  if (uri.size() > kMaxCheckpointUriBytes) {
    return Refused(absl::StrCat("longer than ", kMaxCheckpointUriBytes, " characters"));
  }
  if (uri.front() == '/') return Refused("an absolute path is refused");
  if (!PlainPart(run_id)) return Refused("the run's id cannot be a prefix in the store");
  const std::vector<absl::string_view> parts = absl::StrSplit(uri, '/');
  if (parts.front() != run_id) return Refused("outside the run's prefix (another run's or none)");
  if (parts.size() < 2) return Refused("names the run's prefix, not a checkpoint file");
  for (size_t i = 1; i < parts.size(); ++i) {
    const absl::string_view part = parts[i];
    if (part.empty()) return Refused("an empty part (\"//\" or a trailing '/')");
    if (part == "." || part == "..") return Refused("a \".\" or \"..\" part is refused");
    if (part.front() == '.') return Refused("a part starting with '.' is refused");
    for (const char c : part) {
      if (!PartChar(c)) return Refused("a part holds only letters, digits, '.', '_' and '-'");
    }
  }
  if (parts.size() - 1 > static_cast<size_t>(kMaxCheckpointUriDepth)) {
    return Refused(absl::StrCat("deeper than ", kMaxCheckpointUriDepth, " parts below the run"));
  }
  return absl::OkStatus();
}

std::string CheckpointUri(absl::string_view run_id, absl::string_view relative_path) {
  return absl::StrCat(run_id, "/", relative_path);
}

}  // namespace parity::core
