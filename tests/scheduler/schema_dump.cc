#include "tests/scheduler/schema_dump.h"

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace parity::server::testing {
namespace {

std::string ShellQuote(absl::string_view text) {
  std::string quoted = "'";
  for (char c : text) {
    if (c == '\'') {
      quoted += "'\\''";
    } else {
      quoted += c;
    }
  }
  return quoted + "'";
}

}  // namespace

absl::StatusOr<std::string> DumpSchema(const std::string& connection_string) {
  const char* bin = std::getenv("PARITY_PG_BIN");
  const std::string pg_dump =
      absl::StrCat(bin != nullptr ? bin : "/usr/lib/postgresql/15/bin", "/pg_dump");
  const std::string command = absl::StrCat(
      ShellQuote(pg_dump), " --schema-only --no-owner --no-privileges --no-tablespaces --dbname ",
      ShellQuote(connection_string), " 2>&1");
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return absl::InternalError(absl::StrCat("cannot run ", pg_dump));
  std::string output;
  char buffer[8192];
  for (size_t n; (n = fread(buffer, 1, sizeof buffer, pipe)) > 0;) output.append(buffer, n);
  const int status = pclose(pipe);
  if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::InternalError(absl::StrCat(pg_dump, " failed (status ", status, "): ", output));
  }
  return NormalizeDump(output);
}

std::string NormalizeDump(absl::string_view dump) {
  std::string normalized;
  bool blank_pending = false;
  for (absl::string_view line : absl::StrSplit(dump, '\n')) {
    if (absl::StartsWith(line, "--") || absl::StartsWith(line, "SET ") ||
        absl::StartsWith(line, "SELECT pg_catalog.set_config(") ||
        absl::StartsWith(line, "\\restrict") || absl::StartsWith(line, "\\unrestrict")) {
      continue;
    }
    if (line.empty()) {
      blank_pending = !normalized.empty();
      continue;
    }
    if (blank_pending) normalized += '\n';
    blank_pending = false;
    absl::StrAppend(&normalized, line, "\n");
  }
  return normalized;
}

std::string FirstDifference(absl::string_view expected, absl::string_view actual, int context) {
  if (expected == actual) return "";
  const std::vector<absl::string_view> want = absl::StrSplit(expected, '\n');
  const std::vector<absl::string_view> got = absl::StrSplit(actual, '\n');
  size_t line = 0;
  while (line < want.size() && line < got.size() && want[line] == got[line]) ++line;
  auto excerpt = [&](const std::vector<absl::string_view>& lines) {
    std::vector<std::string> shown;
    for (size_t i = line; i < lines.size() && i < line + context; ++i) {
      shown.push_back(absl::StrCat("  ", i + 1, ": ", lines[i]));
    }
    return shown.empty() ? std::string("  (ends here)") : absl::StrJoin(shown, "\n");
  };
  return absl::StrCat("first difference at line ", line + 1, " (", want.size(), " lines expected, ",
                      got.size(), " found)\nexpected:\n", excerpt(want), "\nfound:\n",
                      excerpt(got));
}

}  // namespace parity::server::testing
