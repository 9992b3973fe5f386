// `parity report SWEEP --out DIR`: fetches a sweep over gRPC — GetSweep, ListRuns,
// QueryResults, AnalyzeSweep, and each run's metric history through WatchRun from step 0 — and
// writes the static report of report_writer.h. A run still training is read up to the step the
// listing reported, so the report is a consistent snapshot and the command never waits on it.
#include <filesystem>
#include <iostream>
#include <memory>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "cli/commands.h"
#include "cli/report_analysis.h"
#include "cli/report_writer.h"
#include "cli/scheduler_connection.h"
#include "cli/sweep_reference.h"
#include "fmt/format.h"
#include "web/dashboard_documents.h"

namespace parity::cli {
namespace {

struct ReportOptions {
  SchedulerOptions scheduler;
  std::string sweep_id;
  std::string out_dir;
  size_t curve_points = 200;
  size_t history_points = 1000;
};

bool IsFinal(parity::v1::RunState state) {
  return state == parity::v1::RUN_STATE_SUCCEEDED || state == parity::v1::RUN_STATE_FAILED ||
         state == parity::v1::RUN_STATE_CANCELLED;
}

// Every stored point of a run, oldest first. WatchRun sends the stored points first and, for an
// ended run, then ends; for a live run the stream is cut once the listed latest step arrived (or,
// for a run with no step yet, after a short wait).
grpc::Status MetricHistory(parity::v1::SweepService::Stub& stub, const parity::v1::Run& run,
                           const SchedulerOptions& options,
                           std::vector<parity::v1::MetricPoint>& points) {
  const bool live = !IsFinal(run.state());
  grpc::ClientContext context;
  const double seconds = live && run.latest_step() == 0 ? 1.0 : options.timeout_seconds * 4;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000)));
  parity::v1::WatchRunRequest request;
  request.set_run_id(run.run_id());
  request.set_from_step(0);
  std::unique_ptr<grpc::ClientReader<parity::v1::WatchRunResponse>> reader =
      stub.WatchRun(&context, request);
  parity::v1::WatchRunResponse message;
  while (reader->Read(&message)) {
    if (!message.has_metric()) continue;
    points.push_back(std::move(*message.mutable_metric()));
    if (live && points.back().step() >= run.latest_step()) {
      context.TryCancel();
      break;
    }
  }
  const grpc::Status status = reader->Finish();
  const bool cut_on_purpose = live && (status.error_code() == grpc::StatusCode::CANCELLED ||
                                       status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED);
  return cut_on_purpose ? grpc::Status::OK : status;
}

ReportRun ReduceHistory(parity::v1::Run run, std::vector<parity::v1::MetricPoint> points,
                        const ReportOptions& options) {
  ReportRun reduced;
  reduced.run = std::move(run);
  if (points.empty()) return reduced;
  std::vector<parity::v1::MetricPoint> validation;
  for (const parity::v1::MetricPoint& point : points) {
    if (point.has_val_bpc()) validation.push_back(point);
  }
  reduced.curve = web::SampleEvenly(validation, options.curve_points);
  reduced.history = web::SampleEvenly(points, options.history_points);
  // Over steps the load summaries suffice; only the latest point keeps its per-expert shares.
  for (parity::v1::MetricPoint& point : reduced.history) {
    for (parity::v1::ExpertLoadStats& load : *point.mutable_expert_load()) load.clear_shares();
  }
  reduced.latest = std::move(points.back());
  return reduced;
}

int RunReport(const ReportOptions& given) {
  auto stub = ConnectSweepService(given.scheduler);
  ReportOptions options = given;  // the sweep by name or id prefix → its UUID
  int resolve_code = kExitOk;
  if (!ResolveSweepReference(*stub, options.scheduler, given.sweep_id, &options.sweep_id,
                             &resolve_code)) {
    return resolve_code;
  }
  ReportData data;
  data.scheduler = options.scheduler.address;
  data.generated_at = absl::FormatTime(absl::RFC3339_sec, absl::Now(), absl::UTCTimeZone());
  const std::string what = "report " + options.sweep_id;

  parity::v1::GetSweepRequest get;
  get.set_sweep_id(options.sweep_id);
  parity::v1::GetSweepResponse sweep;
  grpc::Status status = stub->GetSweep(UnaryContext(options.scheduler).get(), get, &sweep);
  if (!status.ok()) return ReportRpcError(status, what, options.scheduler);
  data.sweep = sweep.sweep();
  std::vector<parity::v1::Run> runs =
      ListAllRuns(*stub, options.sweep_id, options.scheduler, status);
  if (!status.ok()) return ReportRpcError(status, what, options.scheduler);
  data.results = ListAllResults(*stub, options.sweep_id, options.scheduler, status);
  if (!status.ok()) return ReportRpcError(status, what, options.scheduler);

  parity::v1::AnalyzeSweepRequest analyze;
  analyze.set_sweep_id(options.sweep_id);
  parity::v1::AnalyzeSweepResponse analysis;
  status = stub->AnalyzeSweep(UnaryContext(options.scheduler).get(), analyze, &analysis);
  if (status.ok()) {
    data.analysis = std::move(analysis);
    // The same analysis on every other evaluation set the finished runs report.
    for (const std::string& set : data.analysis->eval_sets()) {
      if (set == data.analysis->eval_sets(0)) continue;
      analyze.set_eval_set(set);
      parity::v1::AnalyzeSweepResponse on_set;
      status = stub->AnalyzeSweep(UnaryContext(options.scheduler).get(), analyze, &on_set);
      if (!status.ok()) {
        return ReportRpcError(status, what + ": analysis on " + set, options.scheduler);
      }
      data.other_sets.push_back(std::move(on_set));
    }
  } else if (status.error_code() == grpc::StatusCode::FAILED_PRECONDITION) {
    data.analysis_error = absl::FailedPreconditionError(status.error_message());
  } else {
    return ReportRpcError(status, what + ": analysis", options.scheduler);
  }

  for (parity::v1::Run& run : runs) {
    std::vector<parity::v1::MetricPoint> points;
    const bool has_points = IsFinal(run.state()) || run.latest_step() > 0 ||
                            run.state() == parity::v1::RUN_STATE_RUNNING;
    if (has_points) {
      status = MetricHistory(*stub, run, options.scheduler, points);
      if (!status.ok()) {
        return ReportRpcError(status, what + ": metrics of " + run.spec().name(),
                              options.scheduler);
      }
    }
    data.runs.push_back(ReduceHistory(std::move(run), std::move(points), options));
  }

  if (absl::Status written = WriteReport(data, options.out_dir); !written.ok()) {
    std::cerr << "error: " << what << ": " << written.message() << "\n";
    return kExitFailure;
  }
  std::error_code error;
  const std::filesystem::path index =
      std::filesystem::absolute(std::filesystem::path(options.out_dir) / "index.html", error);
  std::cout << fmt::format("report of sweep {} ({} runs) written to {}\n", data.sweep.spec().name(),
                           data.runs.size(), options.out_dir);
  std::cout << fmt::format(
      "  open file://{}\n  runs table: {}/runs.csv\n  analysis: {}/analysis.md\n", index.string(),
      options.out_dir, options.out_dir);
  if (data.analysis) std::cout << OptimumLines(*data.analysis);
  return kExitOk;
}

}  // namespace

void RegisterReportCommand(CLI::App& app, int& exit_code) {
  auto options = std::make_shared<ReportOptions>();
  CLI::App* command = app.add_subcommand(
      "report",
      "Write a static HTML report of a sweep (the dashboard's tables and figures, offline) and "
      "its runs as CSV");
  command->add_option("sweep", options->sweep_id, "Sweep: id, unique id prefix or name")
      ->required();
  command
      ->add_option("-o,--out", options->out_dir,
                   "Directory to write index.html, data.js, assets/, runs.csv and analysis.md into "
                   "(created if missing)")
      ->required();
  command
      ->add_option("--curve-points", options->curve_points,
                   "Validation points kept per run for the sweep's curves")
      ->check(CLI::Range(2, 100000))
      ->capture_default_str();
  command
      ->add_option("--history-points", options->history_points,
                   "Points kept per run for its run page")
      ->check(CLI::Range(2, 1000000))
      ->capture_default_str();
  AddSchedulerOptions(*command, options->scheduler);
  command->footer(
      "The report opens from file:// in any browser; share the directory or put its figures in "
      "a paper. A sweep still running is captured as it is now. analysis.md and the terminal "
      "name each efficiency leverage: frontier EL (the papers', against the compute-optimal "
      "dense frontier) and fixed-N EL (against one dense shape's own law), marked "
      "\"extrapolated ×k\" when the dense compute lies outside the measured range; per group "
      "the region with each point's probability of being best, the lack-of-fit verdict and the "
      "point optimum or why there is none; ΔBPC against every dense baseline.\n\n" +
      std::string(kExitCodesHelp));
  command->callback([options, &exit_code] { exit_code = RunReport(*options); });
}

}  // namespace parity::cli
