// Parses server/sql/statements/*.sql once per process. A file is a header comment, then blocks:
// "-- name: NAME" starts a statement and "-- fragment: NAME" a piece of one, each running to the
// next block; "{{NAME}}" in a statement is replaced by that fragment's text (fragments may use
// fragments of files parsed earlier or of their own file, above them). A comment line starting
// "-- unprepared" in a statement's block keeps it out of PrepareStatements. Comments stay in the
// text PostgreSQL receives; it ignores them.
#include "server/store/postgres/pg_statements.h"

#include <cstdio>
#include <cstdlib>
#include <map>
#include <pqxx/pqxx>
#include <set>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace parity::server::pg {
namespace {

struct Catalog {
  std::map<std::string, std::string, std::less<>> statements;
  std::set<std::string, std::less<>> unprepared;
};

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "server/sql/statements: %s\n", what.c_str());
  std::abort();
}

Catalog Parse() {
  Catalog catalog;
  std::vector<std::pair<std::string, std::string>> fragments;  // "{{name}}" → text
  auto finish = [&](const std::string& kind, const std::string& name, std::string text,
                    bool unprepared) {
    if (name.empty()) return;
    text = absl::StrReplaceAll(absl::StripAsciiWhitespace(text), fragments);
    if (kind == "fragment") {
      fragments.emplace_back("{{" + name + "}}", std::move(text));
      return;
    }
    if (!catalog.statements.emplace(name, std::move(text)).second) Die("two statements " + name);
    if (unprepared) catalog.unprepared.insert(name);
  };
  for (const StatementFile& file : EmbeddedStatementFiles()) {
    std::string kind, name, text;
    bool unprepared = false;
    for (absl::string_view line : absl::StrSplit(file.text, '\n')) {
      absl::string_view rest = line;
      if (absl::ConsumePrefix(&rest, "-- name: ") || absl::ConsumePrefix(&rest, "-- fragment: ")) {
        finish(kind, name, std::move(text), unprepared);
        kind = absl::StartsWith(line, "-- name: ") ? "statement" : "fragment";
        name = std::string(absl::StripAsciiWhitespace(rest));
        text.clear();
        unprepared = false;
        continue;
      }
      if (name.empty()) continue;  // the file's header comment
      unprepared |= absl::StartsWith(line, "-- unprepared");
      text.append(line.data(), line.size()).push_back('\n');
    }
    finish(kind, name, std::move(text), unprepared);
  }
  return catalog;
}

const Catalog& TheCatalog() {
  static const Catalog* catalog = new Catalog(Parse());
  return *catalog;
}

}  // namespace

const std::string& Statement(absl::string_view name) {
  const Catalog& catalog = TheCatalog();
  auto it = catalog.statements.find(name);
  if (it == catalog.statements.end()) Die("no statement named " + std::string(name));
  return it->second;
}

void PrepareStatements(pqxx::connection& connection) {
  const Catalog& catalog = TheCatalog();
  for (const auto& [name, text] : catalog.statements) {
    if (!catalog.unprepared.contains(name)) connection.prepare(name, text);
  }
}

}  // namespace parity::server::pg
