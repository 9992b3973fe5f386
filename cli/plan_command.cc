// `parity plan SPEC`: load, validate and plan a sweep locally (no server) and print its runs.
// Every problem with the spec is printed as "error: FIELD: REASON" and the exit code is 2; every
// warning (core/planner_warnings.h) as "warning: FIELD: REASON", which leaves the exit code 0.
// Last comes the sweep's estimated wall time on the workers it assumes (core/sweep_estimate.h).
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "cli/commands.h"
#include "cli/plan_format.h"
#include "core/field_violation.h"
#include "core/planner.h"
#include "core/planner_warnings.h"
#include "core/spec_loader.h"
#include "core/sweep_estimate.h"

namespace parity::cli {
namespace {

struct PlanOptions {
  std::string spec_path;
  std::string format = "table";  // checked by CLI11 against kFormats
  int workers = 1;               // for the wall-time estimate
  std::string worker_flops;      // FLOP/s per worker ("4e9", "2G"); empty = DefaultWorkerFlops
};

const std::map<std::string, PlanFormat> kFormats = {
    {"table", PlanFormat::kTable}, {"csv", PlanFormat::kCsv}, {"json", PlanFormat::kJson}};

// Prints a failed status: each field violation on its own line, else the message.
void PrintErrors(const absl::Status& status) {
  const std::vector<core::FieldViolation> violations = core::FieldViolationsOf(status);
  if (violations.empty()) {
    std::cerr << "error: " << status.message() << "\n";
    return;
  }
  for (const auto& v : violations)
    std::cerr << "error: " << v.field << ": " << v.description << "\n";
}

int RunPlan(const PlanOptions& options) {
  std::optional<double> flops;  // checked before the spec, so a typo costs no planning
  if (!options.worker_flops.empty()) {
    const std::optional<double> given = core::ParseQuantity(options.worker_flops);
    if (!given || *given <= 0) {
      std::cerr << "error: --worker-flops: '" << options.worker_flops
                << "' is not a rate > 0 (FLOP/s per worker, e.g. 4e9, 2G or 4e14)\n";
      return kExitUsage;
    }
    flops = given;
  }
  absl::StatusOr<parity::v1::SweepSpec> spec = core::LoadSweepSpecFile(options.spec_path);
  if (!spec.ok()) {
    PrintErrors(spec.status());
    return spec.status().code() == absl::StatusCode::kInvalidArgument ? kExitInvalidSpec
                                                                      : kExitFailure;
  }
  absl::StatusOr<std::vector<parity::v1::RunSpec>> runs = core::PlanSweep(*spec);
  if (!runs.ok()) {
    PrintErrors(runs.status());
    return runs.status().code() == absl::StatusCode::kInvalidArgument ? kExitInvalidSpec
                                                                      : kExitFailure;
  }
  std::cout << FormatPlan(*runs, kFormats.at(options.format));
  for (const core::FieldViolation& w : core::PlanWarnings(*spec, *runs)) {
    std::cerr << "warning: " << w.field << ": " << w.description << "\n";
  }
  size_t shared = 0;
  for (const parity::v1::RunSpec& run : *runs) shared += run.also_serves().empty() ? 0 : 1;
  std::cerr << "planned " << runs->size() << " runs of sweep '" << spec->name() << "'";
  if (shared > 0) std::cerr << " (" << shared << " planned once for several groups: see 'also')";
  std::cerr << "\n"
            << core::WallTimeLine(*runs, options.workers,
                                  flops ? *flops : core::DefaultWorkerFlops(*runs))
            << "\n";
  return kExitOk;
}

}  // namespace

void RegisterPlanCommand(CLI::App& app, int& exit_code) {
  // Shared with the callback, which runs after parsing; the app outlives both.
  auto options = std::make_shared<PlanOptions>();
  CLI::App* plan = app.add_subcommand(
      "plan", "Plan a sweep spec (YAML or JSON) locally and print one row per run");
  plan->add_option("spec", options->spec_path, "Sweep spec file (.yaml, .yml or .json)")
      ->required();
  plan->add_option("-f,--format", options->format,
                   "table (aligned, human units; default), csv (full precision) or json (the "
                   "RunSpec list as proto JSON)")
      ->check(CLI::IsMember({"table", "csv", "json"}));
  plan->add_option("--workers", options->workers,
                   "Workers the wall-time estimate assumes (default 1)")
      ->check(CLI::Range(1, 1000000));
  plan->add_option("--worker-flops", options->worker_flops,
                   "FLOP/s of one worker for the wall-time estimate, e.g. 3.5e10 or 35G (default: "
                   "35 GFLOP/s per CPU thread a run asks for, the CPU engine's measured rate; "
                   "400 TFLOP/s per GPU when runs ask for GPUs, an H200 at 40% MFU); each run "
                   "also counts 5 s of start-up and evaluation");
  plan->footer(
      "\"EL law\" is the efficiency leverage the published joint law predicts for an MoE run, "
      "not a measurement; `parity report` gives the measured frontier EL (the papers') and "
      "fixed-N EL of a finished sweep.\n\n" +
      std::string(kExitCodesHelp));
  plan->callback([options, &exit_code] { exit_code = RunPlan(*options); });
}

}  // namespace parity::cli
