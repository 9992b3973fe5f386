// YAML/JSON → JSON tree → descriptor-guided normalisation → protobuf JSON parser. yaml-cpp and
// nlohmann::json throw; both are caught here so no exception leaves core/.
#include "core/spec_loader.h"

#include <cctype>
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "core/field_violation.h"
#include "core/spec_names.h"
#include "core/status_macros.h"
#include "core/utf8.h"
#include "google/protobuf/util/json_util.h"
#include "nlohmann/json.hpp"
#include "yaml-cpp/yaml.h"

namespace parity::core {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::EnumDescriptor;
using google::protobuf::FieldDescriptor;
using nlohmann::json;

// Every YAML scalar becomes a JSON string; the normaliser gives it its field's type.
json YamlToJson(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Scalar:
      return node.Scalar();
    case YAML::NodeType::Sequence: {
      json out = json::array();
      for (const YAML::Node& item : node) out.push_back(YamlToJson(item));
      return out;
    }
    case YAML::NodeType::Map: {
      json out = json::object();
      for (const auto& kv : node) out[kv.first.as<std::string>()] = YamlToJson(kv.second);
      return out;
    }
    default:
      return nullptr;
  }
}

// dump() throws on text that is not UTF-8; ParseMessage refuses such specs first, and the
// replacement keeps that true of anything else that reaches here.
std::string Dump(const json& value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string Shown(const json& value) {
  return value.is_string() ? value.get<std::string>() : Dump(value);
}

// Walks `in` against a message descriptor, writing proto JSON to `out` and collecting problems.
class Normalizer {
 public:
  std::vector<FieldViolation>& violations() { return violations_; }

  void Message(const json& in, const Descriptor& type, const std::string& path, json& out) {
    if (!in.is_object()) {
      Fail(path.empty() ? "spec" : path,
           absl::StrCat("expected a mapping for ", type.name(), ", got '", Shown(in), "'"));
      return;
    }
    out = json::object();
    for (const auto& [key, value] : in.items()) {
      const std::string field_path = path.empty() ? key : absl::StrCat(path, ".", key);
      const FieldDescriptor* field = FindField(type, key);
      if (field == nullptr) {
        UnknownKey(key, type, field_path);
        continue;
      }
      if (value.is_null()) continue;
      json converted;
      if (field->is_map()) {
        if (!Map(value, *field, field_path, converted)) continue;
      } else if (field->is_repeated()) {
        if (!value.is_array()) {
          Fail(field_path, absl::StrCat("expected a list, got '", Shown(value), "'"));
          continue;
        }
        converted = json::array();
        for (size_t i = 0; i < value.size(); ++i) {
          json item;
          if (Single(value[i], *field, absl::StrCat(field_path, "[", i, "]"), item)) {
            converted.push_back(std::move(item));
          }
        }
      } else if (!Single(value, *field, field_path, converted)) {
        continue;
      }
      out[field->name()] = std::move(converted);
    }
  }

 private:
  void Fail(std::string field, std::string description) {
    violations_.push_back({std::move(field), std::move(description)});
  }

  // "did you mean" for a near miss, else the keys the message takes; both in YAML spelling.
  void UnknownKey(const std::string& key, const Descriptor& type, const std::string& path) {
    const std::vector<std::string> keys = MessageKeys(type);
    std::string hint = DidYouMean(key, keys);
    if (hint.empty()) {
      hint = absl::StrCat(" (its keys: ", absl::StrJoin(keys, ", "),
                          "; every key is in docs/spec-reference.md)");
    }
    Fail(path, absl::StrCat("unknown field of ", type.name(), hint));
  }

  static const FieldDescriptor* FindField(const Descriptor& type, const std::string& key) {
    if (const FieldDescriptor* f = type.FindFieldByName(key)) return f;
    if (const FieldDescriptor* f = type.FindFieldByName(absl::StrReplaceAll(key, {{"-", "_"}}))) {
      return f;
    }
    for (int i = 0; i < type.field_count(); ++i) {
      if (type.field(i)->json_name() == key) return type.field(i);
    }
    return nullptr;
  }

  bool Map(const json& value, const FieldDescriptor& field, const std::string& path, json& out) {
    if (!value.is_object()) {
      Fail(path, absl::StrCat("expected a mapping, got '", Shown(value), "'"));
      return false;
    }
    const FieldDescriptor* value_field = field.message_type()->map_value();
    out = json::object();
    for (const auto& [key, item] : value.items()) {
      json converted;
      if (Single(item, *value_field, absl::StrCat(path, ".", key), converted)) {
        out[key] = std::move(converted);
      }
    }
    return true;
  }

  bool Single(const json& value, const FieldDescriptor& field, const std::string& path, json& out) {
    switch (field.cpp_type()) {
      case FieldDescriptor::CPPTYPE_MESSAGE: {
        const size_t before = violations_.size();
        Message(value, *field.message_type(), path, out);
        return violations_.size() == before;
      }
      case FieldDescriptor::CPPTYPE_STRING:
        if (value.is_object() || value.is_array()) {
          Fail(path, "expected text, got a structure");
          return false;
        }
        out = Shown(value);
        return true;
      case FieldDescriptor::CPPTYPE_BOOL:
        return Bool(value, path, out);
      case FieldDescriptor::CPPTYPE_ENUM:
        return Enum(value, *field.enum_type(), path, out);
      case FieldDescriptor::CPPTYPE_DOUBLE:
      case FieldDescriptor::CPPTYPE_FLOAT: {
        std::optional<double> number = Number(value);
        if (!number) {
          Fail(path, absl::StrCat("expected a number, got '", Shown(value), "'"));
          return false;
        }
        out = *number;
        return true;
      }
      default:
        return Integer(value, field, path, out);
    }
  }

  static std::optional<double> Number(const json& value) {
    if (value.is_number()) return value.get<double>();
    if (value.is_string()) return ParseQuantity(value.get<std::string>());
    return std::nullopt;
  }

  bool Integer(const json& value, const FieldDescriptor& field, const std::string& path,
               json& out) {
    const bool is_signed = field.cpp_type() == FieldDescriptor::CPPTYPE_INT32 ||
                           field.cpp_type() == FieldDescriptor::CPPTYPE_INT64;
    const bool is_64 = field.cpp_type() == FieldDescriptor::CPPTYPE_INT64 ||
                       field.cpp_type() == FieldDescriptor::CPPTYPE_UINT64;
    const double max =
        is_64 ? (is_signed ? 9.2e18 : 1.8e19) : (is_signed ? 2147483647.0 : 4294967295.0);
    const double min = is_signed ? -max : 0.0;
    // Plain digits parse exactly (no double rounding above 2^53).
    if (value.is_number_integer() || value.is_string()) {
      const std::string text = value.is_string()
                                   ? absl::StrReplaceAll(value.get<std::string>(), {{"_", ""}})
                                   : Dump(value);
      int64_t i64;
      uint64_t u64;
      if (is_signed && absl::SimpleAtoi(text, &i64) && i64 >= min && i64 <= max) {
        out = i64;
        return true;
      }
      if (!is_signed && absl::SimpleAtoi(text, &u64) && double(u64) <= max) {
        out = u64;
        return true;
      }
    }
    std::optional<double> number = Number(value);
    if (!number) {
      Fail(path, absl::StrCat("expected an integer, got '", Shown(value), "'"));
      return false;
    }
    if (std::floor(*number) != *number || *number < min || *number > max) {
      Fail(path,
           absl::StrCat("expected an integer in [", min, ", ", max, "], got '", Shown(value), "'"));
      return false;
    }
    if (is_signed) {
      out = static_cast<int64_t>(*number);
    } else {
      out = static_cast<uint64_t>(*number);
    }
    return true;
  }

  bool Bool(const json& value, const std::string& path, json& out) {
    if (value.is_boolean()) {
      out = value.get<bool>();
      return true;
    }
    if (value.is_string()) {
      const std::string t = absl::AsciiStrToLower(value.get<std::string>());
      if (t == "true" || t == "yes" || t == "on") {
        out = true;
        return true;
      }
      if (t == "false" || t == "no" || t == "off") {
        out = false;
        return true;
      }
    }
    Fail(path, absl::StrCat("expected true or false, got '", Shown(value), "'"));
    return false;
  }

  bool Enum(const json& value, const EnumDescriptor& type, const std::string& path, json& out) {
    std::optional<int> number;
    if (value.is_number_integer()) {
      if (type.FindValueByNumber(value.get<int>()) != nullptr) number = value.get<int>();
    } else if (value.is_string()) {
      number = ParseEnumValue(type, value.get<std::string>());
    }
    if (!number) {
      // In the spelling a spec uses ("loose"), never the proto's ("REUSE_MODE_LOOSE").
      const std::vector<std::string> names = EnumYamlNames(type);
      const std::string words = EnumTypeWords(type);
      const bool an = std::string_view("aeiou").find(words.front()) != std::string_view::npos;
      Fail(path,
           absl::StrCat("'", Shown(value), "' is not ", an ? "an " : "a ", words,
                        DidYouMean(Shown(value), names), " (", absl::StrJoin(names, ", "), ")"));
      return false;
    }
    out = type.FindValueByNumber(*number)->name();
    return true;
  }

  std::vector<FieldViolation> violations_;
};

std::string Canonical(std::string_view text) {
  std::string out = absl::AsciiStrToLower(
      absl::StripAsciiWhitespace(absl::string_view(text.data(), text.size())));
  for (char& c : out) {
    if (c == '-' || c == ' ') c = '_';
  }
  return out;
}

}  // namespace

std::optional<int> ParseEnumValue(const EnumDescriptor& type, std::string_view text) {
  const std::string want = Canonical(text);
  if (want.empty()) return std::nullopt;
  // The shared prefix of the value names, e.g. "moe_layout_".
  const std::string prefix =
      Canonical(type.value(0)->name())
          .substr(0, Canonical(type.value(0)->name()).rfind("_unspecified") + 1);
  for (int i = 0; i < type.value_count(); ++i) {
    const std::string full = Canonical(type.value(i)->name());
    if (want == full || (full.starts_with(prefix) && want == full.substr(prefix.size()))) {
      return type.value(i)->number();
    }
  }
  if (const auto* alias = FindEnumAlias(type, want)) return alias->number();
  return std::nullopt;
}

std::optional<double> ParseQuantity(std::string_view raw) {
  std::string text = absl::StrReplaceAll(
      absl::StripAsciiWhitespace(absl::string_view(raw.data(), raw.size())), {{"_", ""}});
  if (text.empty()) return std::nullopt;
  // Byte sizes: "141GB" (decimal) and "80GiB" (binary); a bare "B" stays billions ("68B").
  static constexpr std::pair<std::string_view, double> kByteUnits[] = {
      {"KiB", 0x1p10}, {"MiB", 0x1p20}, {"GiB", 0x1p30}, {"TiB", 0x1p40}, {"kB", 1e3},
      {"KB", 1e3},     {"MB", 1e6},     {"GB", 1e9},     {"TB", 1e12},    {"PB", 1e15}};
  for (const auto& [unit, bytes] : kByteUnits) {
    if (text.size() > unit.size() && text.ends_with(unit)) {
      double value;
      const std::string number = text.substr(0, text.size() - unit.size());
      if (!absl::SimpleAtod(number, &value) || !std::isfinite(value)) return std::nullopt;
      return value * bytes;
    }
  }
  double scale = 1.0;
  switch (text.back()) {
    case 'k':
    case 'K':
      scale = 1e3;
      break;
    case 'M':
      scale = 1e6;
      break;
    case 'B':
    case 'G':
      scale = 1e9;
      break;
    case 'T':
      scale = 1e12;
      break;
    case 'P':
      scale = 1e15;
      break;
    default:
      break;
  }
  if (scale != 1.0) text.pop_back();
  double value;
  if (!absl::SimpleAtod(text, &value) || !std::isfinite(value)) return std::nullopt;
  // SimpleAtod accepts "inf"/"nan" spellings; isfinite above rejects them.
  return value * scale;
}

absl::Status ParseMessage(std::string_view text, SpecFormat format,
                          google::protobuf::Message& message) {
  // Protobuf strings are UTF-8; yaml-cpp passes any bytes through, and a spec saved in Latin-1
  // would otherwise fail later, further from the byte at fault.
  if (const size_t bad = InvalidUtf8Offset(text); bad != std::string_view::npos) {
    size_t line = 1, column = 1;
    for (size_t i = 0; i < bad; ++i) {
      column = text[i] == '\n' ? 1 : column + 1;
      line += text[i] == '\n';
    }
    const FieldViolation v{"spec", absl::StrCat("not UTF-8 text: byte ", bad, " (line ", line,
                                                ", column ", column, ") is invalid")};
    return InvalidArgumentWithViolations("spec is not UTF-8 text", {&v, 1});
  }
  json tree;
  try {
    if (format == SpecFormat::kYaml) {
      YAML::Node root = YAML::Load(std::string(text));
      tree = YamlToJson(root);
    } else {
      tree = json::parse(text);
    }
  } catch (const YAML::Exception& e) {
    const FieldViolation v{"spec", absl::StrCat("YAML syntax error at line ", e.mark.line + 1,
                                                ", column ", e.mark.column + 1, ": ", e.msg)};
    return InvalidArgumentWithViolations("spec is not valid YAML", {&v, 1});
  } catch (const json::exception& e) {
    const FieldViolation v{"spec", absl::StrCat("JSON syntax error: ", e.what())};
    return InvalidArgumentWithViolations("spec is not valid JSON", {&v, 1});
  }
  Normalizer normalizer;
  json normalized;
  normalizer.Message(tree, *message.GetDescriptor(), "", normalized);
  if (!normalizer.violations().empty()) {
    return InvalidArgumentWithViolations(
        absl::StrCat("spec has ", normalizer.violations().size(), " malformed field(s)"),
        normalizer.violations());
  }
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  message.Clear();
  const auto status =
      google::protobuf::util::JsonStringToMessage(Dump(normalized), &message, options);
  if (!status.ok()) {
    // Not expected after normalisation; reported whole rather than lost.
    const FieldViolation v{"spec", std::string(status.message())};
    return InvalidArgumentWithViolations("spec does not match the schema", {&v, 1});
  }
  return absl::OkStatus();
}

absl::StatusOr<parity::v1::SweepSpec> ParseSweepSpec(std::string_view text, SpecFormat format) {
  parity::v1::SweepSpec spec;
  PARITY_RETURN_IF_ERROR(ParseMessage(text, format, spec));
  return spec;
}

absl::StatusOr<parity::v1::SweepSpec> LoadSweepSpecFile(const std::filesystem::path& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return absl::NotFoundError(absl::StrCat("cannot read spec file ", path.string()));
  std::stringstream buffer;
  buffer << file.rdbuf();
  const std::string text = buffer.str();
  const std::string ext = absl::AsciiStrToLower(path.extension().string());
  SpecFormat format = SpecFormat::kYaml;
  if (ext == ".json") {
    format = SpecFormat::kJson;
  } else if (ext != ".yaml" && ext != ".yml") {
    const size_t first = text.find_first_not_of(" \t\r\n");
    if (first != std::string::npos && text[first] == '{') format = SpecFormat::kJson;
  }
  return ParseSweepSpec(text, format);
}

}  // namespace parity::core
