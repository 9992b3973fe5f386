#include "worker/failure_text.h"

#include <algorithm>
#include <cctype>

#include "absl/strings/str_replace.h"

namespace parity::worker {
namespace {

// Where a path may start: the start of the text or after one of these.
bool StartsWord(char before) {
  return std::isspace(static_cast<unsigned char>(before)) || before == '\'' || before == '"' ||
         before == '=' || before == ':' || before == '(' || before == '[' || before == ',' ||
         before == '`';
}

// Where a path ends: white space, a quote or a closing bracket or a comma.
bool EndsPath(char c) {
  return std::isspace(static_cast<unsigned char>(c)) || c == '\'' || c == '"' || c == ')' ||
         c == ']' || c == ',' || c == ';' || c == '`';
}

std::string ScrubPaths(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const bool starts = text[i] == '/' && (i == 0 || StartsWord(text[i - 1])) &&
                        i + 1 < text.size() && !EndsPath(text[i + 1]);
    if (!starts) {
      out += text[i++];
      continue;
    }
    while (i < text.size() && !EndsPath(text[i])) ++i;
    out += "<path>";
  }
  return out;
}

bool IsByteUnit(absl::string_view rest) {
  for (const absl::string_view unit : {"bytes", "byte", "B"}) {
    if (rest.substr(0, unit.size()) == unit &&
        (rest.size() == unit.size() ||
         !std::isalnum(static_cast<unsigned char>(rest[unit.size()])))) {
      return true;
    }
  }
  return false;
}

std::string ScrubByteCounts(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const bool word_start = i == 0 || !std::isalnum(static_cast<unsigned char>(text[i - 1]));
    if (!word_start || !std::isdigit(static_cast<unsigned char>(text[i]))) {
      out += text[i++];
      continue;
    }
    size_t end = i;
    while (end < text.size() && std::isdigit(static_cast<unsigned char>(text[end]))) ++end;
    size_t unit = end;
    if (unit < text.size() && text[unit] == ' ') ++unit;
    if (IsByteUnit(text.substr(unit))) {
      out += "<n> bytes";
      i = unit + (text.substr(unit, 5) == "bytes" ? 5 : text.substr(unit, 4) == "byte" ? 4 : 1);
    } else {
      out.append(text.data() + i, end - i);
      i = end;
    }
  }
  return out;
}

}  // namespace

std::string ScrubForViewers(absl::string_view text, std::vector<KnownPath> known) {
  known.erase(std::remove_if(known.begin(), known.end(),
                             [](const KnownPath& k) { return k.path.size() < 2; }),
              known.end());
  // Longest first, so a file below a root becomes its own placeholder, not the root's.
  std::sort(known.begin(), known.end(),
            [](const KnownPath& a, const KnownPath& b) { return a.path.size() > b.path.size(); });
  std::string out(text);
  for (const KnownPath& k : known) out = absl::StrReplaceAll(out, {{k.path, k.placeholder}});
  return ScrubByteCounts(ScrubPaths(out));
}

}  // namespace parity::worker
