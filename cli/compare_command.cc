// `parity compare SWEEP_A SWEEP_B`: fetches both sweeps' runs and prints their matching cells
// with ΔBPC (cli/sweep_compare.h). Exit 2 when no cell matches (the sweeps are not two runs of
// one study); the other codes as every client command.
#include <iostream>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/scheduler_connection.h"
#include "cli/sweep_compare.h"
#include "cli/sweep_reference.h"

namespace parity::cli {
namespace {

struct CompareOptions {
  SchedulerOptions scheduler;
  std::string sweep_a;
  std::string sweep_b;
};

int RunCompare(const CompareOptions& options) {
  auto stub = ConnectSweepService(options.scheduler);
  // Each sweep by its id, a unique id prefix or its name, as every other client command takes it.
  std::string id_a, id_b;
  int exit_code = kExitOk;
  if (!ResolveSweepReference(*stub, options.scheduler, options.sweep_a, &id_a, &exit_code) ||
      !ResolveSweepReference(*stub, options.scheduler, options.sweep_b, &id_b, &exit_code)) {
    return exit_code;
  }
  grpc::Status status;
  const auto runs_a = ListAllRuns(*stub, id_a, options.scheduler, status);
  if (!status.ok()) return ReportRpcError(status, "compare " + options.sweep_a, options.scheduler);
  const auto runs_b = ListAllRuns(*stub, id_b, options.scheduler, status);
  if (!status.ok()) return ReportRpcError(status, "compare " + options.sweep_b, options.scheduler);
  auto name = [](const std::vector<parity::v1::Run>& runs, const std::string& id) {
    return runs.empty() ? id : runs.front().spec().sweep_name() + " (" + id + ")";
  };
  const SweepComparison comparison = CompareSweeps(runs_a, runs_b);
  std::cout << FormatComparison(comparison, name(runs_a, id_a), name(runs_b, id_b));
  if (comparison.matched.empty()) {
    std::cerr << "error: sweeps: no cell of " << options.sweep_a << " matches one of "
              << options.sweep_b << " (budget, data variant and grid point differ); compare two "
              << "runs of one study\n";
    return kExitInvalidSpec;
  }
  return kExitOk;
}

}  // namespace

void RegisterCompareCommand(CLI::App& app, int& exit_code) {
  auto options = std::make_shared<CompareOptions>();
  CLI::App* command = app.add_subcommand(
      "compare", "Compare the matching cells of two sweeps: mean BPC of each and ΔBPC (B − A)");
  command
      ->add_option("sweep_a", options->sweep_a,
                   "Sweep A, the reference: id, unique id prefix or name")
      ->required();
  command->add_option("sweep_b", options->sweep_b, "Sweep B: id, unique id prefix or name")
      ->required();
  AddSchedulerOptions(*command, options->scheduler);
  command->footer(std::string(kExitCodesHelp));
  command->callback([options, &exit_code] { exit_code = RunCompare(*options); });
}

}  // namespace parity::cli
