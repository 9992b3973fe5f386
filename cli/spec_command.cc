// `parity spec reference` prints the sweep spec reference (docs/spec-reference.md is its output,
// kept in sync by the test cli_spec_reference_in_sync); `parity spec keys` prints every key path
// with its type, unit and default, one per line, for grep.
#include <iostream>

#include "cli/commands.h"
#include "core/spec_reference.h"

namespace parity::cli {

void RegisterSpecCommand(CLI::App& app, int& exit_code) {
  CLI::App* spec = app.add_subcommand("spec", "What a sweep spec may contain");
  spec->require_subcommand(1);
  spec->add_subcommand("reference",
                       "Print the spec reference as Markdown (docs/spec-reference.md): every key, "
                       "type, unit, default, enum spelling and an example per section")
      ->callback([&exit_code] {
        std::cout << core::SpecReferenceMarkdown();
        exit_code = kExitOk;
      });
  spec->add_subcommand("keys", "Print every key path with its type, unit and default")
      ->callback([&exit_code] {
        std::cout << core::SpecKeysText();
        exit_code = kExitOk;
      });
}

}  // namespace parity::cli
