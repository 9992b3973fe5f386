// The subcommands that talk to the scheduler: submit, status, watch, results, cancel, delete,
// workers.
// Each loads what it needs, makes its calls, prints, and sets the exit code (see commands.h).
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>

#include "cli/client_format.h"
#include "cli/commands.h"
#include "cli/results_export.h"
#include "cli/run_status_format.h"
#include "cli/scheduler_connection.h"
#include "cli/sweep_reference.h"
#include "cli/sweep_watch.h"
#include "core/field_violation.h"
#include "core/spec_loader.h"
#include "export/export_writers.h"
#include "fmt/format.h"

namespace parity::cli {
namespace {

// A random key per invocation: retries of this submission are deduplicated by the scheduler,
// while submitting the same file twice on purpose makes two sweeps.
std::string NewIdempotencyKey() {
  std::random_device device;
  std::mt19937_64 rng((static_cast<uint64_t>(device()) << 32) ^ device());
  return fmt::format("cli-{:016x}{:016x}", rng(), rng());
}

int PrintSpecErrors(const absl::Status& status) {
  const auto violations = core::FieldViolationsOf(status);
  if (violations.empty()) std::cerr << "error: " << status.message() << "\n";
  for (const auto& v : violations)
    std::cerr << "error: " << v.field << ": " << v.description << "\n";
  return status.code() == absl::StatusCode::kInvalidArgument ? kExitInvalidSpec : kExitFailure;
}

struct SubmitOptions {
  SchedulerOptions scheduler;
  std::string spec_path;
  std::string idempotency_key;
  std::string owner;
  bool wait = false;
};

int RunSubmit(const SubmitOptions& options) {
  absl::StatusOr<parity::v1::SweepSpec> spec = core::LoadSweepSpecFile(options.spec_path);
  if (!spec.ok()) return PrintSpecErrors(spec.status());
  auto stub = ConnectSweepService(options.scheduler);
  parity::v1::SubmitSweepRequest request;
  *request.mutable_spec() = *spec;
  request.set_idempotency_key(options.idempotency_key.empty() ? NewIdempotencyKey()
                                                              : options.idempotency_key);
  request.set_owner(options.owner);  // empty: the sweep is the token's name's
  parity::v1::SubmitSweepResponse response;
  // A broken connection is retried under the same key: the scheduler returns the same sweep.
  grpc::Status status;
  for (int attempt = 0; attempt < 5; ++attempt) {
    status = stub->SubmitSweep(UnaryContext(options.scheduler).get(), request, &response);
    if (status.error_code() != grpc::StatusCode::UNAVAILABLE) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(500 << attempt));
  }
  if (!status.ok()) return ReportRpcError(status, "submit " + options.spec_path, options.scheduler);
  for (const parity::v1::PlanWarning& w : response.warnings()) {
    std::cerr << "warning: " << w.field() << ": " << w.description() << "\n";
  }
  std::cout << fmt::format("sweep {} ({}): {} runs {}\n", response.sweep().sweep_id(), spec->name(),
                           response.run_ids_size(),
                           response.deduplicated() ? "(already submitted)" : "queued");
  if (!options.wait) return kExitOk;
  const int code = WatchSweepUntilDone(*stub, response.sweep().sweep_id(), options.scheduler);
  if (code != kExitOk && code != kExitRunsFailed) return code;
  grpc::Status results_status;
  const exports::ExportTable table =
      FetchExportTable(*stub, response.sweep().sweep_id(), options.scheduler, results_status);
  if (!results_status.ok()) return ReportRpcError(results_status, "results", options.scheduler);
  const std::vector<parity::v1::Run> runs =
      ListAllRuns(*stub, response.sweep().sweep_id(), options.scheduler, results_status);
  if (!results_status.ok()) return ReportRpcError(results_status, "results", options.scheduler);
  std::cout << "\n" << FormatResultsTable(table);
  // The last words of a failed sweep say why, and what to do (the table above only names it).
  const std::string failures = FormatFailureSummary(runs);
  if (!failures.empty()) std::cout << "\nWhy runs failed:\n" << failures;
  return code;
}

struct SweepIdOptions {
  SchedulerOptions scheduler;
  std::string id;
  std::string reason;
  ResultsFormat format = ResultsFormat::kTable;
  bool columns = false;  // results: print the documented columns instead
  std::string out;       // results: write here instead of stdout
};

int RunStatus(const SweepIdOptions& options) {
  auto stub = ConnectSweepService(options.scheduler);
  if (options.id.empty()) {
    std::vector<parity::v1::Sweep> sweeps;
    parity::v1::ListSweepsRequest request;
    request.set_page_size(100);
    parity::v1::ListSweepsResponse response;
    const grpc::Status status =
        stub->ListSweeps(UnaryContext(options.scheduler).get(), request, &response);
    if (!status.ok()) return ReportRpcError(status, "status", options.scheduler);
    sweeps.assign(response.sweeps().begin(), response.sweeps().end());
    std::cout << FormatSweepList(sweeps);
    return kExitOk;
  }
  parity::v1::GetSweepRequest get;
  get.set_sweep_id(options.id);
  parity::v1::GetSweepResponse sweep;
  grpc::Status status = stub->GetSweep(UnaryContext(options.scheduler).get(), get, &sweep);
  if (status.error_code() == grpc::StatusCode::NOT_FOUND) {  // not a sweep: a run?
    parity::v1::GetRunRequest get_run;
    get_run.set_run_id(options.id);
    parity::v1::GetRunResponse run;
    status = stub->GetRun(UnaryContext(options.scheduler).get(), get_run, &run);
    if (!status.ok()) return ReportRpcError(status, "status " + options.id, options.scheduler);
    std::cout << FormatRunStatus(run, absl::Now());
    return kExitOk;
  }
  if (!status.ok()) return ReportRpcError(status, "status " + options.id, options.scheduler);
  const std::vector<parity::v1::Run> runs =
      ListAllRuns(*stub, options.id, options.scheduler, status);
  if (!status.ok()) return ReportRpcError(status, "status " + options.id, options.scheduler);
  std::cout << FormatSweepRuns(sweep.sweep(), runs);
  return kExitOk;
}

int RunWatch(const SweepIdOptions& options) {
  auto stub = ConnectSweepService(options.scheduler);
  parity::v1::GetSweepRequest get;
  get.set_sweep_id(options.id);
  parity::v1::GetSweepResponse sweep;
  const grpc::Status status = stub->GetSweep(UnaryContext(options.scheduler).get(), get, &sweep);
  if (status.ok()) return WatchSweepUntilDone(*stub, options.id, options.scheduler);
  if (status.error_code() == grpc::StatusCode::NOT_FOUND) {
    return WatchRunUntilDone(*stub, options.id, options.scheduler);  // not a sweep: a run?
  }
  return ReportRpcError(status, "watch " + options.id, options.scheduler);
}

int RunResults(const SweepIdOptions& options) {
  if (options.columns) {  // the reference docs/export.md is, or the list the Python client reads
    std::cout << (options.format == ResultsFormat::kJson ? exports::ColumnsJson()
                                                         : exports::ColumnsMarkdown());
    return kExitOk;
  }
  if (options.id.empty()) {
    std::cerr << "error: results: name the sweep (id, unique id prefix or name), or pass "
                 "--columns for the column reference\n";
    return kExitUsage;
  }
  const bool binary = options.format == ResultsFormat::kParquet;
  if (binary && options.out.empty() && isatty(STDOUT_FILENO)) {
    std::cerr << "error: results --format parquet: Parquet is binary; pass --out FILE or "
                 "redirect stdout to a file\n";
    return kExitUsage;
  }
  auto stub = ConnectSweepService(options.scheduler);
  grpc::Status status;
  const FetchedSweep fetched = FetchSweepForExport(*stub, options.id, options.scheduler, status);
  if (!status.ok()) return ReportRpcError(status, "results " + options.id, options.scheduler);
  const exports::ExportBuilder export_rows(fetched.rows, fetched.runs);
  std::ofstream file;
  if (!options.out.empty()) {
    file.open(options.out, std::ios::binary | std::ios::trunc);
    if (!file) {
      std::cerr << "error: results --out " << options.out
                << ": cannot write: " << std::strerror(errno) << "\n";
      return kExitFailure;
    }
  }
  std::ostream& out = options.out.empty() ? std::cout : file;
  const absl::Status written = WriteResults(export_rows, options.format, out);
  out.flush();
  if (!written.ok() || !out) {
    std::cerr << "error: results: writing the output failed: "
              << (written.ok() ? std::strerror(errno) : std::string(written.message())) << "\n";
    return kExitFailure;
  }
  return kExitOk;
}

int RunCancel(const SweepIdOptions& options) {
  auto stub = ConnectSweepService(options.scheduler);
  parity::v1::CancelSweepRequest request;
  request.set_sweep_id(options.id);
  request.set_reason(options.reason);
  parity::v1::CancelSweepResponse response;
  const grpc::Status status =
      stub->CancelSweep(UnaryContext(options.scheduler).get(), request, &response);
  if (!status.ok()) return ReportRpcError(status, "cancel " + options.id, options.scheduler);
  std::cout << fmt::format("sweep {}: {} runs cancelled; state {}\n", options.id,
                           response.cancelled_runs(), SweepStateName(response.sweep().state()));
  // The count includes runs flagged while training: they stop at their workers' next heartbeat,
  // and one that reaches its last step first still succeeds.
  const parity::v1::RunCounts& counts = response.sweep().counts();
  if (const uint64_t live = counts.leased() + counts.running(); live > 0) {
    std::cout << fmt::format(
        "{} runs still training stop at their workers' next heartbeat (one that finishes first "
        "succeeds); `parity watch {}` returns once they have, and then it can be deleted\n",
        live, options.id);
  }
  return kExitOk;
}

int RunDelete(const SweepIdOptions& options) {
  auto stub = ConnectSweepService(options.scheduler);
  parity::v1::DeleteSweepRequest request;
  request.set_sweep_id(options.id);
  parity::v1::DeleteSweepResponse response;
  const grpc::Status status =
      stub->DeleteSweep(UnaryContext(options.scheduler).get(), request, &response);
  if (!status.ok()) return ReportRpcError(status, "delete " + options.id, options.scheduler);
  std::cout << fmt::format(
      "sweep {}: deleted with its {} runs, their events and metrics; workers delete their "
      "checkpoints at their next retention pass\n",
      options.id, response.deleted_runs());
  return kExitOk;
}

int RunWorkers(const SweepIdOptions& options) {
  auto stub = ConnectSweepService(options.scheduler);
  parity::v1::ListWorkersRequest request;
  parity::v1::ListWorkersResponse response;
  const grpc::Status status =
      stub->ListWorkers(UnaryContext(options.scheduler).get(), request, &response);
  if (!status.ok()) return ReportRpcError(status, "workers", options.scheduler);
  std::cout << FormatWorkers({response.workers().begin(), response.workers().end()});
  return kExitOk;
}

// What a subcommand's id names: a sweep, or (watch) a sweep or a run.
enum class IdNames { kSweep, kSweepOrRun };

// Registers a subcommand taking an optional or required id; `run` does the work.
CLI::App* AddIdCommand(CLI::App& app, int& exit_code, const std::string& name,
                       const std::string& help, const std::string& id_help, bool id_required,
                       int (*run)(const SweepIdOptions&),
                       const std::shared_ptr<SweepIdOptions>& options,
                       IdNames names = IdNames::kSweep) {
  CLI::App* command = app.add_subcommand(name, help);
  if (!id_help.empty()) {
    auto* id = command->add_option("id", options->id, id_help);
    if (id_required) id->required();
  }
  AddSchedulerOptions(*command, options->scheduler);
  command->footer(std::string(kExitCodesHelp));
  command->callback([options, run, names, &exit_code] {
    // A sweep (or, for `watch`, a run) may be given by name or by a unique id prefix; every RPC
    // takes the UUID.
    SweepIdOptions resolved = *options;
    if (!resolved.id.empty()) {
      auto stub = ConnectSweepService(resolved.scheduler);
      bool is_run = false;
      const bool found = names == IdNames::kSweepOrRun
                             ? ResolveSweepOrRunReference(*stub, resolved.scheduler, options->id,
                                                          &resolved.id, &is_run, &exit_code)
                             : ResolveSweepReference(*stub, resolved.scheduler, options->id,
                                                     &resolved.id, &exit_code);
      if (!found) return;
    }
    exit_code = run(resolved);
  });
  return command;
}

}  // namespace

void RegisterClientCommands(CLI::App& app, int& exit_code) {
  auto submit = std::make_shared<SubmitOptions>();
  CLI::App* command =
      app.add_subcommand("submit", "Plan a sweep spec on the scheduler and queue its runs");
  command->add_option("spec", submit->spec_path, "Sweep spec file (.yaml, .yml or .json)")
      ->required();
  command->add_flag("-w,--wait", submit->wait,
                    "Follow progress until every run ended, then print the results");
  command->add_option("--idempotency-key", submit->idempotency_key,
                      "Resubmitting with the same key returns the same sweep");
  command->add_option("--owner", submit->owner,
                      "Submit on behalf of this identity (admin tokens only; default: the "
                      "token's name)");
  AddSchedulerOptions(*command, submit->scheduler);
  command->footer(std::string(kExitCodesHelp));
  command->callback([submit, &exit_code] { exit_code = RunSubmit(*submit); });

  AddIdCommand(app, exit_code, "status",
               "List sweeps, show one sweep's runs, or one run (a gang's ranks, hosts and "
               "rendezvous)",
               "Sweep (id, id prefix or name) or run (id, unique id prefix, name, or SWEEP/RUN); "
               "omit to list sweeps",
               false, &RunStatus, std::make_shared<SweepIdOptions>(), IdNames::kSweepOrRun);
  AddIdCommand(app, exit_code, "watch", "Follow a sweep or a run live, with progress bars",
               "Sweep (id, id prefix or name) or run (id, unique id prefix, name, or "
               "SWEEP/RUN)",
               true, &RunWatch, std::make_shared<SweepIdOptions>(), IdNames::kSweepOrRun);
  auto results = std::make_shared<SweepIdOptions>();
  CLI::App* results_command =
      AddIdCommand(app, exit_code, "results",
                   "A sweep's results: ids, grid point, hyperparameters, accounting, final BPC, "
                   "ΔBPC vs each dense baseline, failure (docs/export.md)",
                   "Sweep: id, unique id prefix or name", false, &RunResults, results);
  const std::map<std::string, ResultsFormat> formats = {{"table", ResultsFormat::kTable},
                                                        {"csv", ResultsFormat::kCsv},
                                                        {"json", ResultsFormat::kJson},
                                                        {"parquet", ResultsFormat::kParquet}};
  results_command
      ->add_option("-f,--format", results->format,
                   "table, or csv, json or parquet: every column of docs/export.md at full "
                   "precision, missing values empty/null")
      ->transform(CLI::CheckedTransformer(formats, CLI::ignore_case))
      ->option_text("table|csv|json|parquet");
  results_command->add_option("-o,--out", results->out, "Write to this file instead of stdout");
  results_command->add_flag("--columns", results->columns,
                            "Print the export columns (docs/export.md; with --format json, as "
                            "JSON) instead of results");
  auto cancel = std::make_shared<SweepIdOptions>();
  AddIdCommand(app, exit_code, "cancel", "Cancel every run of a sweep that has not ended",
               "Sweep: id, unique id prefix or name", true, &RunCancel, cancel)
      ->add_option("--reason", cancel->reason, "Recorded with each cancelled run");
  AddIdCommand(app, exit_code, "delete",
               "Delete an ended sweep with its runs, events, metrics and checkpoints",
               "Sweep: id, unique id prefix or name", true, &RunDelete,
               std::make_shared<SweepIdOptions>());
  AddIdCommand(app, exit_code, "workers", "Workers seen recently, with devices and active runs", "",
               false, &RunWorkers, std::make_shared<SweepIdOptions>());
}

}  // namespace parity::cli
