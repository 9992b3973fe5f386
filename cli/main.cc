// `parity`: a thin registry of subcommands (see commands.h); each subcommand owns its flags and
// its work. Add a subcommand by writing its Register function and listing it below.
#include <string>

#include "CLI/CLI.hpp"
#include "cli/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"parity: equal-resource MoE vs dense studies"};
  app.require_subcommand(1);
  app.footer(std::string(parity::cli::kExitCodesHelp));
  int exit_code = parity::cli::kExitOk;
  using Register = void (*)(CLI::App&, int&);
  for (Register register_command :
       {&parity::cli::RegisterPlanCommand, &parity::cli::RegisterClientCommands,
        &parity::cli::RegisterCompareCommand, &parity::cli::RegisterReportCommand,
        &parity::cli::RegisterTokenCommands, &parity::cli::RegisterSpecCommand,
        &parity::cli::RegisterDataCommands}) {
    register_command(app, exit_code);
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? parity::cli::kExitOk : parity::cli::kExitUsage;
  }
  return exit_code;
}
