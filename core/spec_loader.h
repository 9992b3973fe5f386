// Reading a SweepSpec from YAML or JSON. There is one loader: both formats become a JSON tree
// that is walked against the proto descriptor (so every scalar gets its field's type, enum values
// may use short friendly names and unknown keys are reported with their path), and only then
// handed to protobuf's JSON parser. Problems come back as InvalidArgument carrying every
// FieldViolation found (see core/field_violation.h); an unknown key or enum value names the
// nearest valid one ("did you mean"), enum values always in the spelling a spec uses.
//
// Accepted beyond plain proto JSON:
//   * keys by proto name ("top_k") or JSON name ("topK");
//   * enum values by full name ("MOE_LAYOUT_ALL_MOE"), by the name without the enum's prefix in
//     any case with '-' for '_' ("all-moe", "strict", "step_law", "cosine"), or by a listed alias
//     ("1dense+SE", "mha", "gqa", "rope"; the tables are in core/spec_names.cc);
//   * numbers written as strings in scientific notation ("2.86e21", "68e9") or with a decimal
//     suffix K = 1e3, M = 1e6, B or G = 1e9, T = 1e12, P = 1e15 ("68B", "1.5T", "500M"), and with
//     '_' separators ("1_000_000"); integer fields must receive an integral value in range.
#pragma once

#include <filesystem>
#include <optional>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "parity/v1/sweep.pb.h"

namespace parity::core {

enum class SpecFormat { kYaml, kJson };

// Parses `text` into a SweepSpec. No validation beyond types: see ValidateSweepSpec.
absl::StatusOr<parity::v1::SweepSpec> ParseSweepSpec(std::string_view text, SpecFormat format);

// Reads a file; .json is JSON, .yaml/.yml is YAML, anything else is JSON when its first
// non-blank character is '{' and YAML otherwise. NotFound when the file cannot be read.
absl::StatusOr<parity::v1::SweepSpec> LoadSweepSpecFile(const std::filesystem::path& path);

// The same loader for any message type (RunSpec files, tests).
absl::Status ParseMessage(std::string_view text, SpecFormat format,
                          google::protobuf::Message& message);

// An enum value by any accepted spelling; nullopt when none matches.
std::optional<int> ParseEnumValue(const google::protobuf::EnumDescriptor& type,
                                  std::string_view text);

// A number with optional scientific notation, suffix (k M B/G T P; byte units kB MB GB TB PB and
// KiB MiB GiB TiB) and '_' separators; nullopt when malformed or not finite.
std::optional<double> ParseQuantity(std::string_view text);

}  // namespace parity::core
