// Generating docs/spec-reference.md. The structure is walked on the compiled descriptors (what the
// loader parses against); comments are looked up by full name in a second pool built from the
// embedded descriptor set, which protoc wrote with --include_source_info from the same .proto
// files (the generated code itself carries no comments).
#include "core/spec_reference.h"

#include <algorithm>
#include <cstddef>
#include <map>
#include <set>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "core/spec_defaults.h"
#include "core/spec_names.h"
#include "google/protobuf/descriptor.pb.h"
#include "parity/v1/sweep.pb.h"

namespace parity::proto {
// proto/embed_bytes.cmake: a FileDescriptorSet of sweep.proto and its imports, with source info.
extern const unsigned char kSpecDescriptorSet[];
extern const std::size_t kSpecDescriptorSetSize;
}  // namespace parity::proto

namespace parity::core {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::DescriptorPool;
using google::protobuf::EnumDescriptor;
using google::protobuf::EnumValueDescriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::SourceLocation;

// The pool with comments; built once, never freed (like the generated pool).
const DescriptorPool& CommentPool() {
  static const DescriptorPool* const pool = [] {
    auto* p = new DescriptorPool();
    google::protobuf::FileDescriptorSet set;
    if (set.ParseFromArray(parity::proto::kSpecDescriptorSet,
                           static_cast<int>(parity::proto::kSpecDescriptorSetSize))) {
      for (const auto& file : set.file()) p->BuildFile(file);
    }
    return p;
  }();
  return *pool;
}

// One line: the comment's lines joined, runs of whitespace collapsed.
std::string OneLine(const std::string& comment) {
  std::vector<std::string> words =
      absl::StrSplit(comment, absl::ByAnyChar(" \n\t"), absl::SkipEmpty());
  return absl::StrJoin(words, " ");
}

template <typename D>
std::string CommentOf(const D* in_pool) {
  SourceLocation location;
  if (in_pool == nullptr || !in_pool->GetSourceLocation(&location)) return {};
  return OneLine(location.leading_comments);
}

std::string MessageComment(const Descriptor& type) {
  return CommentOf(CommentPool().FindMessageTypeByName(type.full_name()));
}
std::string EnumComment(const EnumDescriptor& type) {
  return CommentOf(CommentPool().FindEnumTypeByName(type.full_name()));
}
std::string ValueComment(const EnumValueDescriptor& value) {
  return CommentOf(CommentPool().FindEnumValueByName(value.full_name()));
}

// The units the protos' comments use, longest first so "logit units" wins over "units".
constexpr std::string_view kUnits[] = {"tokens per optimizer step",
                                       "in the field's unit",
                                       "width per layer",
                                       "text → text",
                                       "dimensionless",
                                       "logit units",
                                       "parameters",
                                       "sequences",
                                       "fraction",
                                       "integers",
                                       "integer",
                                       "L2 norm",
                                       "threads",
                                       "seconds",
                                       "layers",
                                       "passes",
                                       "tokens",
                                       "ratio",
                                       "units",
                                       "count",
                                       "bytes",
                                       "FLOPs",
                                       "steps",
                                       "text",
                                       "flag",
                                       "enum"};

std::string Anchor(const std::string& name) { return absl::AsciiStrToLower(name); }

std::string Cell(std::string text) {
  return text.empty() ? "—" : absl::StrReplaceAll(text, {{"|", "\\|"}});
}

std::string EnumList(const EnumDescriptor& type) {
  std::vector<std::string> names;
  for (const std::string& n : EnumYamlNames(type)) names.push_back(absl::StrCat("`", n, "`"));
  return absl::StrJoin(names, ", ");
}

std::string ScalarType(const FieldDescriptor& f) {
  switch (f.cpp_type()) {
    case FieldDescriptor::CPPTYPE_DOUBLE:
    case FieldDescriptor::CPPTYPE_FLOAT:
      return "number";
    case FieldDescriptor::CPPTYPE_INT32:
    case FieldDescriptor::CPPTYPE_INT64:
      return "integer";
    case FieldDescriptor::CPPTYPE_UINT32:
    case FieldDescriptor::CPPTYPE_UINT64:
      return "integer ≥ 0";
    case FieldDescriptor::CPPTYPE_BOOL:
      return "true/false";
    case FieldDescriptor::CPPTYPE_STRING:
      return "text";
    case FieldDescriptor::CPPTYPE_ENUM:
      return absl::StrCat("one of ", EnumList(*f.enum_type()));
    case FieldDescriptor::CPPTYPE_MESSAGE:
      return absl::StrCat("[", f.message_type()->name(), "](#", Anchor(f.message_type()->name()),
                          ")");
  }
  return "?";
}

// The type as a spec writes it: "list of [MoePoint](#moepoint)", "map text → text".
std::string TypeOf(const FieldDescriptor& f, bool markdown) {
  std::string type;
  if (f.is_map()) {
    type = absl::StrCat("map text → ", ScalarType(*f.message_type()->map_value()));
  } else {
    type = ScalarType(f);
    if (f.is_repeated()) type = absl::StrCat("list of ", type);
  }
  if (!markdown) {
    type = absl::StrReplaceAll(type, {{"`", ""}});
    if (f.message_type() != nullptr && !f.is_map()) {
      type = absl::StrCat(f.is_repeated() ? "list of " : "", f.message_type()->name());
    }
  }
  return type;
}

// The unit column: numbers only (text, flags, enums and sections say what they are in the type).
std::string ShownUnit(const FieldDescriptor& f) {
  switch (f.cpp_type()) {
    case FieldDescriptor::CPPTYPE_STRING:
    case FieldDescriptor::CPPTYPE_BOOL:
    case FieldDescriptor::CPPTYPE_ENUM:
    case FieldDescriptor::CPPTYPE_MESSAGE:
      return {};
    default:
      return FieldUnit(f);
  }
}

// The message type a field nests, if any (a map's message values included).
const Descriptor* Nested(const FieldDescriptor& f) {
  if (f.is_map()) return f.message_type()->map_value()->message_type();
  return f.message_type();
}

// Every key path of `type` under `prefix`, depth first, each with its field.
void WalkKeys(const Descriptor& type, const std::string& prefix,
              std::vector<std::pair<std::string, const FieldDescriptor*>>& out) {
  for (int i = 0; i < type.field_count(); ++i) {
    const FieldDescriptor* f = type.field(i);
    std::string path = prefix.empty() ? f->name() : absl::StrCat(prefix, ".", f->name());
    if (f->is_repeated() && !f->is_map()) absl::StrAppend(&path, "[]");
    out.emplace_back(path, f);
    if (const Descriptor* nested = Nested(*f)) WalkKeys(*nested, path, out);
  }
}

std::vector<std::pair<std::string, const FieldDescriptor*>> AllKeys() {
  std::vector<std::pair<std::string, const FieldDescriptor*>> keys;
  WalkKeys(*parity::v1::SweepSpec::descriptor(), "", keys);
  return keys;
}

// The enums a spec can contain, in first-use order.
std::vector<const EnumDescriptor*> SpecEnums() {
  std::vector<const EnumDescriptor*> out;
  for (const auto& [path, f] : AllKeys()) {
    const EnumDescriptor* e = f->enum_type();
    if (e != nullptr && std::find(out.begin(), out.end(), e) == out.end()) out.push_back(e);
  }
  return out;
}

constexpr std::string_view kIntro = R"(# Sweep spec reference

<!-- Generated by `parity spec reference` from the protos (proto/parity/v1/), the spec loader's
spellings (core/spec_names.cc) and the planner's defaults (core/spec_defaults.h). Do not edit:
regenerate with `build/cli/parity spec reference > docs/spec-reference.md`; the test
cli_spec_reference_in_sync fails while this page is out of date. -->

A sweep spec is a YAML (or JSON) file that `parity plan SPEC` checks and plans locally and
`parity submit SPEC` sends to the scheduler. This page lists every key it may contain, with its
type, unit, default and the spelling of every enum value. `parity spec keys` prints the same keys
one per line, for grep.

## Writing values

- **Keys** are written as below (snake_case); the JSON name (`topK`) and `-` for `_` (`top-k`)
  are accepted too. An unknown key is an error that names its path and the nearest valid key
  (`moe.moe.top_kk: unknown field of MoeSpec; did you mean 'top_k'?`).
- **Numbers** may use scientific notation (`2.86e21`), a decimal suffix `K` = 10³, `M` = 10⁶,
  `B` or `G` = 10⁹, `T` = 10¹², `P` = 10¹⁵ (`68B`, `1.5T`), byte units (`141GB`, `80GiB`) and `_`
  separators (`1_000_000`). Integer keys need an integral value in range.
- **Enums** take the spellings listed with each key, in any case and with `-` or `_`; the
  aliases in [Enumerations](#enumerations) and the full proto name (`REUSE_MODE_LOOSE`) are
  accepted too. A value that is none of them is an error that lists the spellings and suggests
  the nearest (`data.reuse: 'lose' is not a reuse mode; did you mean 'loose'? (unique, strict,
  loose)`).
- **Booleans**: `true`/`false`, `yes`/`no`, `on`/`off`.
- A key left out, or `0`/empty, means its default: the **default** column where one is listed,
  otherwise "unset", which the description explains (usually "solved by the planner" or "none").

Units: *units* are hidden-dimension widths, *tokens* count training tokens, *FLOPs* count
training compute C = M·D (docs/domain.md), *fraction* is a share in [0, 1].

`parity plan SPEC` prints, besides the runs, each warning (for example two grid points that plan
the identical model) and the sweep's estimated wall time on the workers it assumes
(`--workers N`, `--worker-flops F`).
)";

// A comment with the proto's enum names in the spelling a spec uses: "D̂ for STRICT reuse" →
// "D̂ for `strict` reuse", "unspecified means AUX_LOSS" → "… `aux_loss`". Only whole upper-case
// words that are a value of an enum a spec can contain are replaced.
std::string YamlSpelled(const std::string& comment) {
  std::map<std::string, std::string> spelling;
  for (const EnumDescriptor* e : SpecEnums()) {
    const std::string prefix = e->value(0)->name().substr(0, e->value(0)->name().rfind('_') + 1);
    for (int i = 1; i < e->value_count(); ++i) {
      const std::string yaml = absl::StrCat("`", EnumYamlName(*e->value(i)), "`");
      spelling[e->value(i)->name()] = yaml;
      spelling[e->value(i)->name().substr(prefix.size())] = yaml;
    }
  }
  const auto is_word = [](char c) { return absl::ascii_isalnum(c) || c == '_'; };
  std::string out;
  for (size_t i = 0; i < comment.size();) {
    size_t j = i;
    while (j < comment.size() && is_word(comment[j])) ++j;
    if (j == i) {
      out.push_back(comment[i++]);
      continue;
    }
    const std::string word = comment.substr(i, j - i);
    auto it = spelling.find(word);
    out += it != spelling.end() && word.size() >= 3 ? it->second : word;
    i = j;
  }
  return out;
}

// A default or example number as written: "1e-8", not "1e-08".
std::string Plain(std::string text) {
  return absl::StrReplaceAll(text, {{"e-0", "e-"}, {"e+0", "e"}, {"e+", "e"}});
}

void AppendSection(const Descriptor& type, const std::vector<std::string>& paths,
                   std::string& out) {
  std::vector<std::string> where;
  for (const std::string& p : paths) where.push_back(absl::StrCat("`", p, "`"));
  absl::StrAppend(&out, "\n<a id=\"", Anchor(type.name()), "\"></a>\n## ", type.name(), "\n\n");
  if (!where.empty()) absl::StrAppend(&out, "At ", absl::StrJoin(where, ", "), ". ");
  absl::StrAppend(&out, MessageComment(type), "\n\n");
  absl::StrAppend(&out, "| key | type | unit | default | description |\n|---|---|---|---|---|\n");
  for (int i = 0; i < type.field_count(); ++i) {
    const FieldDescriptor& f = *type.field(i);
    absl::StrAppend(&out, "| `", f.name(), "` | ", Cell(TypeOf(f, true)), " | ", Cell(ShownUnit(f)),
                    " | ", Cell(Plain(SpecDefaultOf(f.full_name()))), " | ",
                    Cell(YamlSpelled(FieldComment(f))), " |\n");
  }
  for (const SpecExample& example : SpecExamples()) {
    if (example.type != &type) continue;
    absl::StrAppend(&out, "\nExample", paths.empty() ? "" : absl::StrCat(" (at ", where[0], ")"),
                    ":\n\n```yaml\n", std::string(example.yaml), "```\n");
  }
}

void AppendEnums(std::string& out) {
  absl::StrAppend(&out, "\n<a id=\"enumerations\"></a>\n## Enumerations\n");
  for (const EnumDescriptor* e : SpecEnums()) {
    absl::StrAppend(&out, "\n<a id=\"", Anchor(e->name()), "\"></a>\n### ", e->name(), "\n\n",
                    EnumComment(*e), "\n\n| YAML | also accepted | meaning |\n|---|---|---|\n");
    for (int i = 0; i < e->value_count(); ++i) {
      const EnumValueDescriptor& v = *e->value(i);
      if (v.name().ends_with("_UNSPECIFIED")) continue;
      std::vector<std::string> aliases;
      for (const std::string& a : EnumAliases(v)) aliases.push_back(absl::StrCat("`", a, "`"));
      absl::StrAppend(&out, "| `", EnumYamlName(v), "` | ", Cell(absl::StrJoin(aliases, ", ")),
                      " | ", Cell(YamlSpelled(ValueComment(v))), " |\n");
    }
  }
}

}  // namespace

std::string FieldComment(const FieldDescriptor& field) {
  return CommentOf(CommentPool().FindFieldByName(field.full_name()));
}

std::string FieldUnit(const FieldDescriptor& field) {
  const std::string comment = FieldComment(field);
  for (size_t open = comment.find('('); open != std::string::npos;
       open = comment.find('(', open + 1)) {
    const std::string_view rest = std::string_view(comment).substr(open + 1);
    for (std::string_view unit : kUnits) {
      if (!rest.starts_with(unit)) continue;
      const std::string_view after = rest.substr(unit.size());
      if (after.empty() || after[0] == ')' || after[0] == ';' || after[0] == ',' ||
          after[0] == ' ') {
        return std::string(unit);
      }
    }
  }
  return {};
}

std::vector<const Descriptor*> SpecMessageTypes() {
  std::vector<const Descriptor*> order = {parity::v1::SweepSpec::descriptor()};
  for (size_t i = 0; i < order.size(); ++i) {  // breadth first: top-level sections come first
    for (int j = 0; j < order[i]->field_count(); ++j) {
      const Descriptor* nested = Nested(*order[i]->field(j));
      if (nested != nullptr && std::find(order.begin(), order.end(), nested) == order.end()) {
        order.push_back(nested);
      }
    }
  }
  return order;
}

std::string SpecReferenceMarkdown() {
  std::map<const Descriptor*, std::vector<std::string>> paths;
  for (const auto& [path, f] : AllKeys()) {
    if (const Descriptor* nested = Nested(*f)) paths[nested].push_back(path);
  }
  std::string out(kIntro);
  for (const Descriptor* type : SpecMessageTypes()) AppendSection(*type, paths[type], out);
  AppendEnums(out);
  return out;
}

std::string SpecKeysText() {
  std::string out;
  for (const auto& [path, f] : AllKeys()) {
    const std::string unit = ShownUnit(*f);
    const std::string def = Plain(SpecDefaultOf(f->full_name()));
    absl::StrAppend(&out, path, "  ", TypeOf(*f, false), unit.empty() ? "" : "  ", unit,
                    def.empty() ? "" : "  default ", def, "\n");
  }
  return out;
}

}  // namespace parity::core
