// The sweep spec reference, generated: docs/spec-reference.md is this module's output
// (`parity spec reference`), and a test fails when the committed page differs. Everything in it
// comes from a source the code itself uses, so it cannot drift:
//   * the keys, their types and nesting from the compiled protos (SweepSpec and below);
//   * each key's description and unit from its proto comment (the protos built with their
//     source info, embedded at build time: proto/CMakeLists.txt, parity_spec_descriptors);
//   * enum spellings from the loader's tables (core/spec_names.h);
//   * defaults from core/spec_defaults.h, the constants the planner fills in.
// Each section's example is parsed by the test, so the examples stay valid too.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "google/protobuf/descriptor.h"

namespace parity::core {

// The whole reference as Markdown.
std::string SpecReferenceMarkdown();

// One line per key path ("grid.moe[].top_k  integer ≥ 0  count  K (count); 0 = solved."), for
// `parity spec keys` and grep.
std::string SpecKeysText();

// A field's proto comment on one line (leading comment, whitespace collapsed); empty when the
// embedded source info has none.
std::string FieldComment(const google::protobuf::FieldDescriptor& field);

// The unit a field's comment states in parentheses ("(tokens)", "(fraction in (0, 1])" →
// "fraction"); empty when it states none of the units the protos use.
std::string FieldUnit(const google::protobuf::FieldDescriptor& field);

// The example YAML of each section, by message type.
struct SpecExample {
  const google::protobuf::Descriptor* type;
  std::string_view yaml;
};
std::span<const SpecExample> SpecExamples();

// The message types a spec can contain, SweepSpec first, in the order the reference lists them.
std::vector<const google::protobuf::Descriptor*> SpecMessageTypes();

}  // namespace parity::core
