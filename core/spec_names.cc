// The YAML names of a spec. The tables here are the only place a spelling is listed: the loader
// parses with them, its errors suggest with them and `parity spec reference` prints them.
#include "core/spec_names.h"

#include <algorithm>
#include <cctype>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace parity::core {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::EnumDescriptor;
using google::protobuf::EnumValueDescriptor;

// Spellings a spec should use where the suffix of the proto name is not the usual one.
struct Preferred {
  std::string_view value;  // full proto name
  std::string_view text;
};
constexpr Preferred kPreferred[] = {
    {"MOE_LAYOUT_ONE_DENSE_SHARED_EXPERT", "1dense+SE"},
    {"MOE_LAYOUT_ALL_MOE", "all-moe"},
};

// Friendly spellings that are not a suffix of the proto name (lower case, '_' for '-').
struct Alias {
  std::string_view value;  // full proto name
  std::string_view text;
};
constexpr Alias kAliases[] = {
    {"MOE_LAYOUT_ONE_DENSE_SHARED_EXPERT", "1dense+se"},
    {"MOE_LAYOUT_ONE_DENSE_SHARED_EXPERT", "1dense_se"},
    {"MOE_LAYOUT_ONE_DENSE_SHARED_EXPERT", "one_dense_se"},
    {"ATTENTION_KIND_MULTI_HEAD", "mha"},
    {"ATTENTION_KIND_GROUPED_QUERY", "gqa"},
    {"POSITION_ENCODING_ROTARY", "rope"},
    {"HYPERPARAMETER_RULE_STEP_LAW", "steplaw"},
    {"BALANCE_METHOD_AUX_LOSS", "aux"},
};

// The shared prefix of an enum's value names, e.g. "MOE_LAYOUT_" (from its UNSPECIFIED value).
std::string Prefix(const EnumDescriptor& type) {
  const std::string& first = type.value(0)->name();
  const size_t at = first.rfind("_UNSPECIFIED");
  return at == std::string::npos ? std::string() : first.substr(0, at + 1);
}

std::string Folded(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '_' || c == '-' || c == ' ') continue;
    out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  return out;
}

// Optimal string alignment distance: insertions, deletions, substitutions and adjacent
// transpositions ("learnign" is one edit from "learning").
size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

}  // namespace

std::string EnumYamlName(const EnumValueDescriptor& value) {
  for (const Preferred& p : kPreferred) {
    if (p.value == value.name()) return std::string(p.text);
  }
  const std::string prefix = Prefix(*value.type());
  std::string_view name = value.name();
  if (name.starts_with(prefix)) name.remove_prefix(prefix.size());
  return absl::AsciiStrToLower(std::string(name));
}

std::string EnumYamlName(const EnumDescriptor& type, int number) {
  const EnumValueDescriptor* value = type.FindValueByNumber(number);
  return value == nullptr ? "unspecified" : EnumYamlName(*value);
}

std::vector<std::string> EnumYamlNames(const EnumDescriptor& type) {
  std::vector<std::string> out;
  for (int i = 0; i < type.value_count(); ++i) {
    if (type.value(i)->name().ends_with("_UNSPECIFIED")) continue;
    out.push_back(EnumYamlName(*type.value(i)));
  }
  return out;
}

std::vector<std::string> EnumAliases(const EnumValueDescriptor& value) {
  std::vector<std::string> out;
  const std::string preferred = Folded(EnumYamlName(value));
  for (const Alias& alias : kAliases) {
    if (alias.value == value.name() && Folded(alias.text) != preferred) {
      out.emplace_back(alias.text);
    }
  }
  // The suffix when a preferred spelling replaced it ("all_moe" for all-moe is the same name).
  const std::string prefix = Prefix(*value.type());
  const std::string suffix = absl::AsciiStrToLower(value.name().substr(prefix.size()));
  if (Folded(suffix) != preferred) out.insert(out.begin(), suffix);
  return out;
}

const EnumValueDescriptor* FindEnumAlias(const EnumDescriptor& type, std::string_view canonical) {
  for (const Alias& alias : kAliases) {
    if (alias.text != canonical) continue;
    if (const EnumValueDescriptor* v = type.FindValueByName(std::string(alias.value))) return v;
  }
  return nullptr;
}

std::string EnumTypeWords(const EnumDescriptor& type) {
  std::string out;
  for (char c : type.name()) {
    if (std::isupper(static_cast<unsigned char>(c)) && !out.empty()) out.push_back(' ');
    out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  if (out.starts_with("lr ")) out.replace(0, 2, "learning-rate");  // LrSchedule
  return out;
}

std::optional<std::string> NearestName(std::string_view typed,
                                       std::span<const std::string> candidates) {
  const std::string want = Folded(typed);
  // No name is longer than this; a longer text is no typo of one (and costs no quadratic table).
  if (want.empty() || want.size() > 64) return std::nullopt;
  const size_t limit = std::max<size_t>(1, (want.size() + 1) / 3);
  size_t best = std::numeric_limits<size_t>::max();
  std::optional<std::string> out;
  for (const std::string& candidate : candidates) {
    const std::string folded = Folded(candidate);
    if (folded.size() > want.size() + limit || want.size() > folded.size() + limit) continue;
    const size_t d = EditDistance(want, folded);
    if (d <= limit && d < best) {
      best = d;
      out = candidate;
    }
  }
  return out;
}

std::vector<std::string> MessageKeys(const Descriptor& type) {
  std::vector<std::string> out;
  for (int i = 0; i < type.field_count(); ++i) out.push_back(type.field(i)->name());
  return out;
}

std::string DidYouMean(std::string_view typed, std::span<const std::string> candidates) {
  std::optional<std::string> nearest = NearestName(typed, candidates);
  return nearest ? absl::StrCat("; did you mean '", *nearest, "'?") : std::string();
}

}  // namespace parity::core
