// How a spec's names are written in YAML, in one place for the loader, its error messages and the
// generated reference (docs/spec-reference.md): the YAML spelling of every enum value, the other
// spellings the loader accepts, and the nearest valid name for a typo ("did you mean").
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "google/protobuf/descriptor.h"

namespace parity::core {

// The spelling a spec should use for an enum value: the listed preferred spelling ("1dense+SE",
// "all-moe") or else the proto name without the enum's prefix in lower case ("loss_free",
// "step_law", "loose"). UNSPECIFIED values give "unspecified".
std::string EnumYamlName(const google::protobuf::EnumValueDescriptor& value);

// The same by number; "unspecified" for a number the enum does not have.
std::string EnumYamlName(const google::protobuf::EnumDescriptor& type, int number);

// The YAML spellings of every specified value (all but UNSPECIFIED), in declaration order.
std::vector<std::string> EnumYamlNames(const google::protobuf::EnumDescriptor& type);

// Further spellings the loader accepts for `value` besides its YAML name, the same with '-' for
// '_' and any case, and the full proto name: the listed aliases ("mha", "rope", "aux").
std::vector<std::string> EnumAliases(const google::protobuf::EnumValueDescriptor& value);

// The enum value a listed alias names; nullptr when `canonical` (lower case, '_' for '-' and ' ')
// is no alias of `type`.
const google::protobuf::EnumValueDescriptor* FindEnumAlias(
    const google::protobuf::EnumDescriptor& type, std::string_view canonical);

// An enum type in words for messages: "ReuseMode" → "reuse mode", "LrSchedule" → "learning-rate
// schedule".
std::string EnumTypeWords(const google::protobuf::EnumDescriptor& type);

// The candidate nearest to `typed` when it is close enough to be a typo: edit distance after
// folding case and dropping '_', '-' and ' ', at most 1 for short names and a third of the length
// for longer ones. nullopt when none is that close.
std::optional<std::string> NearestName(std::string_view typed,
                                       std::span<const std::string> candidates);

// The keys a message takes in a spec (proto field names, snake_case), in declaration order.
std::vector<std::string> MessageKeys(const google::protobuf::Descriptor& type);

// "; did you mean 'X'?" when `typed` is near one of `candidates`, else "".
std::string DidYouMean(std::string_view typed, std::span<const std::string> candidates);

}  // namespace parity::core
