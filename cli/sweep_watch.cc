#include "cli/sweep_watch.h"

#include <unistd.h>

#include <cctype>
#include <chrono>
#include <iostream>
#include <map>

#include "absl/time/clock.h"
#include "cli/client_format.h"
#include "cli/commands.h"
#include "core/backoff.h"
#include "core/eval_sets.h"
#include "core/failure_remedy.h"
#include "fmt/format.h"

namespace parity::cli {
namespace {

using Clock = std::chrono::steady_clock;

// Reconnects after 250 ms, doubling to 10 s; jittered so that many watchers do not all come back
// at the same instant after a scheduler restart.
constexpr core::BackoffOptions kReconnect{.initial = absl::Milliseconds(250),
                                          .max = absl::Seconds(10)};

void Wait(core::Backoff& backoff) { absl::SleepFor(backoff.NextDelay()); }

bool IsFinal(parity::v1::RunState state) {
  return state == parity::v1::RUN_STATE_SUCCEEDED || state == parity::v1::RUN_STATE_FAILED ||
         state == parity::v1::RUN_STATE_CANCELLED;
}

// A state change's reason names a failure class as the scheduler spells it ("USER_ERROR: ...");
// the CLI speaks the spec's spelling everywhere ("user_error: ...").
std::string ReasonText(const std::string& reason) {
  const auto* classes = parity::v1::FailureClass_descriptor();
  for (int i = 0; i < classes->value_count(); ++i) {
    const auto value = static_cast<parity::v1::FailureClass>(classes->value(i)->number());
    const std::string name = core::FailureClassName(value);
    if (name.empty()) continue;
    std::string upper = name;
    for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    if (reason.rfind(upper + ":", 0) == 0) return name + reason.substr(upper.size());
  }
  return reason;
}

// Ended for good: a final state and no run still pending, leased or running. A cancelled sweep
// is CANCELLED at once while its running runs stop at their workers' next heartbeat (some may
// still succeed): the watch follows them, and only after it can the sweep be deleted.
bool SweepEnded(const parity::v1::Sweep& sweep) {
  const parity::v1::RunCounts& c = sweep.counts();
  return sweep.state() != parity::v1::SWEEP_STATE_ACTIVE &&
         sweep.state() != parity::v1::SWEEP_STATE_UNSPECIFIED &&
         c.pending() + c.leased() + c.running() == 0;
}

// Everything the display knows about a sweep; rebuilt from a fresh snapshot on each reconnect.
struct SweepView {
  parity::v1::Sweep sweep;
  std::map<std::string, parity::v1::Run> runs;  // by run id
  std::vector<std::string> order;               // grid order
};

// False with `error` set when a call failed.
bool LoadSnapshot(parity::v1::SweepService::Stub& stub, const std::string& sweep_id,
                  const SchedulerOptions& options, SweepView& view, grpc::Status& error) {
  parity::v1::GetSweepRequest get;
  get.set_sweep_id(sweep_id);
  parity::v1::GetSweepResponse got;
  error = stub.GetSweep(UnaryContext(options).get(), get, &got);
  if (!error.ok()) return false;
  view.sweep = got.sweep();
  view.runs.clear();
  view.order.clear();
  for (parity::v1::Run& run : ListAllRuns(stub, sweep_id, options, error)) {
    view.order.push_back(run.run_id());
    view.runs[run.run_id()] = std::move(run);
  }
  if (!error.ok()) return false;
  return true;
}

void Render(const SweepView& view, bool tty, int& lines_drawn) {
  std::vector<parity::v1::Run> runs;
  for (const auto& id : view.order) runs.push_back(view.runs.at(id));
  const std::string text = FormatSweepRuns(view.sweep, runs);
  if (tty && lines_drawn > 0) std::cout << fmt::format("\x1b[{}F\x1b[J", lines_drawn);
  std::cout << text << std::flush;
  lines_drawn = static_cast<int>(std::count(text.begin(), text.end(), '\n'));
}

// A run's new state (or, with no from_state, its state at the stream's start); a change is
// printed as a line when the output is not a terminal.
void ApplyStateChange(const parity::v1::RunStateChange& change, bool tty, SweepView& view) {
  auto it = view.runs.find(change.run_id());
  if (it == view.runs.end()) return;
  it->second.set_state(change.to_state());
  it->second.set_attempt(change.attempt());
  if (!tty && change.from_state() != parity::v1::RUN_STATE_UNSPECIFIED) {
    std::cout << fmt::format(
        "{}  {} → {}{}\n", it->second.spec().name(), RunStateName(change.from_state()),
        RunStateName(change.to_state()),
        change.reason().empty() ? "" : " (" + ReasonText(change.reason()) + ")");
  }
}

}  // namespace

int WatchSweepUntilDone(parity::v1::SweepService::Stub& stub, const std::string& sweep_id,
                        const SchedulerOptions& options) {
  const bool tty = isatty(STDOUT_FILENO) == 1;
  SweepView view;
  int lines_drawn = 0;
  core::Backoff backoff(kReconnect);
  while (true) {
    grpc::Status error;
    if (!LoadSnapshot(stub, sweep_id, options, view, error)) {
      if (error.error_code() != grpc::StatusCode::UNAVAILABLE) {
        return ReportRpcError(error, "watch " + sweep_id, options);
      }
      const absl::Duration delay = backoff.NextDelay();
      std::cerr << "scheduler unavailable, retrying in " << absl::ToInt64Milliseconds(delay)
                << " ms\n";
      absl::SleepFor(delay);
      continue;
    }
    if (tty || lines_drawn == 0) Render(view, tty, lines_drawn);
    if (SweepEnded(view.sweep)) break;

    grpc::ClientContext context;
    parity::v1::WatchSweepRequest request;
    request.set_sweep_id(sweep_id);
    request.set_include_metrics(true);
    request.set_snapshot_pages(true);
    auto reader = stub.WatchSweep(&context, request);
    parity::v1::WatchSweepResponse event;
    Clock::time_point last_draw = Clock::now();
    while (reader->Read(&event)) {
      backoff.Reset();
      if (event.has_sweep()) view.sweep = event.sweep();
      if (event.has_state_change()) ApplyStateChange(event.state_change(), tty, view);
      for (const auto& change : event.snapshot().runs()) ApplyStateChange(change, tty, view);
      if (event.has_metric()) {
        auto it = view.runs.find(event.metric().run_id());
        if (it != view.runs.end()) {
          it->second.set_latest_step(std::max(it->second.latest_step(), event.metric().step()));
          if (event.metric().has_val_bpc()) it->second.set_latest_val_bpc(event.metric().val_bpc());
        }
      }
      if (tty && Clock::now() - last_draw > std::chrono::milliseconds(500)) {
        Render(view, tty, lines_drawn);
        last_draw = Clock::now();
      }
      if (SweepEnded(view.sweep)) break;
    }
    context.TryCancel();
    const grpc::Status finished = reader->Finish();
    if (SweepEnded(view.sweep)) break;
    if (!finished.ok() && finished.error_code() != grpc::StatusCode::UNAVAILABLE &&
        finished.error_code() != grpc::StatusCode::CANCELLED) {
      return ReportRpcError(finished, "watch " + sweep_id, options);
    }
    // The stream ended or broke: take a fresh snapshot (the stream restarts from current state).
    Wait(backoff);
  }
  grpc::Status error;
  if (LoadSnapshot(stub, sweep_id, options, view, error)) Render(view, tty, lines_drawn);
  if (!tty) std::cout << "sweep " << sweep_id << " " << SweepStateName(view.sweep.state()) << "\n";
  return view.sweep.state() == parity::v1::SWEEP_STATE_SUCCEEDED ? kExitOk : kExitRunsFailed;
}

int WatchRunUntilDone(parity::v1::SweepService::Stub& stub, const std::string& run_id,
                      const SchedulerOptions& options) {
  const bool tty = isatty(STDOUT_FILENO) == 1;
  uint64_t from_step = 0;
  core::Backoff backoff(kReconnect);
  parity::v1::Run run;
  while (true) {
    parity::v1::GetRunRequest get;
    get.set_run_id(run_id);
    parity::v1::GetRunResponse got;
    const grpc::Status status = stub.GetRun(UnaryContext(options).get(), get, &got);
    if (!status.ok()) {
      if (status.error_code() != grpc::StatusCode::UNAVAILABLE) {
        return ReportRpcError(status, "watch " + run_id, options);
      }
      Wait(backoff);
      continue;
    }
    run = got.run();
    if (IsFinal(run.state())) break;
    grpc::ClientContext context;
    parity::v1::WatchRunRequest request;
    request.set_run_id(run_id);
    request.set_from_step(from_step);
    auto reader = stub.WatchRun(&context, request);
    parity::v1::WatchRunResponse event;
    const double steps = static_cast<double>(run.spec().training().steps());
    while (reader->Read(&event)) {
      backoff.Reset();
      if (event.has_state_change()) {
        run.set_state(event.state_change().to_state());
        std::cout << (tty ? "\r\x1b[K" : "") << run.spec().name() << "  "
                  << RunStateName(run.state()) << "\n";
      }
      if (event.has_metric()) {
        const auto& m = event.metric();
        from_step = m.step() + 1;
        // The other evaluation sets after the primary's "val", by name.
        std::map<std::string, double> by_name;
        for (const auto& [name, bpc] : m.eval_bpc()) by_name[name] = bpc;
        std::string sets;
        for (const auto& [name, bpc] : by_name) {
          if (name != core::kPrimaryEvalSet) sets += fmt::format("  {} {:.4f}", name, bpc);
        }
        const std::string line =
            fmt::format("{}  {}  step {}  train {:.4f} BPC{}{}  {:.0f} tok/s", run.spec().name(),
                        ProgressBar(static_cast<double>(m.step()), steps), m.step(), m.train_bpc(),
                        m.has_val_bpc() ? fmt::format("  val {:.4f} BPC", m.val_bpc()) : "", sets,
                        m.tokens_per_second());
        std::cout << (tty ? "\r\x1b[K" + line : line + "\n") << std::flush;
      }
      if (IsFinal(run.state())) break;
    }
    context.TryCancel();
    (void)reader->Finish();
    if (IsFinal(run.state())) break;
    Wait(backoff);
  }
  if (tty) std::cout << "\n";
  std::cout << "run " << run_id << " " << RunStateName(run.state()) << "\n";
  if (run.state() == parity::v1::RUN_STATE_FAILED) {
    // The stream carries the state, not the failure: read the run once more for its reason.
    parity::v1::GetRunRequest get;
    get.set_run_id(run_id);
    parity::v1::GetRunResponse got;
    if (stub.GetRun(UnaryContext(options).get(), get, &got).ok()) run = got.run();
    std::cout << FormatFailureSummary({run});
  }
  return run.state() == parity::v1::RUN_STATE_SUCCEEDED ? kExitOk : kExitRunsFailed;
}

}  // namespace parity::cli
