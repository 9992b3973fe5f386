#include "cli/client_format.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "cli/table.h"
#include "core/failure_remedy.h"
#include "core/proto_time.h"
#include "fmt/format.h"

namespace parity::cli {
namespace {

std::string StripPrefix(const std::string& name, std::string_view prefix) {
  return name.rfind(prefix, 0) == 0 ? name.substr(prefix.size()) : name;
}

std::string Time(const google::protobuf::Timestamp& time) {
  if (time.seconds() == 0 && time.nanos() == 0) return "-";
  return absl::FormatTime("%Y-%m-%d %H:%M:%S", FromProtoTime(time), absl::UTCTimeZone());
}

std::string Bpc(double value) { return value > 0 ? fmt::format("{:.4f}", value) : "-"; }

// A table cell holds the start of a long message; FormatFailureSummary prints it whole.
std::string Shorten(const std::string& text, size_t max_bytes = 72) {
  if (text.size() <= max_bytes) return text;
  size_t cut = max_bytes - 3;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;  // UTF-8
  std::string out(text, 0, cut);
  out.append("...");
  return out;
}

}  // namespace

std::string RunStateName(parity::v1::RunState state) {
  return StripPrefix(parity::v1::RunState_Name(state), "RUN_STATE_");
}

std::string SweepStateName(parity::v1::SweepState state) {
  return StripPrefix(parity::v1::SweepState_Name(state), "SWEEP_STATE_");
}

std::string FailureText(const parity::v1::Run& run) {
  if (run.failure_class() == parity::v1::FAILURE_CLASS_UNSPECIFIED &&
      run.failure().message().empty())
    return "";
  const std::string name = core::FailureClassName(run.failure_class());
  if (run.failure().message().empty()) return name;
  return name.empty() ? run.failure().message() : name + ": " + run.failure().message();
}

std::string FormatFailureSummary(const std::vector<parity::v1::Run>& runs) {
  struct Distinct {
    parity::v1::FailureClass failure_class;
    std::string text;
    int runs = 0;
  };
  std::vector<Distinct> distinct;  // in the order first seen
  for (const auto& run : runs) {
    if (run.state() != parity::v1::RUN_STATE_FAILED) continue;
    std::string text = FailureText(run);
    if (text.empty()) text = "(no reason recorded)";
    auto it = std::find_if(distinct.begin(), distinct.end(), [&](const Distinct& d) {
      return d.failure_class == run.failure_class() && d.text == text;
    });
    if (it == distinct.end()) it = distinct.insert(distinct.end(), {run.failure_class(), text});
    ++it->runs;
  }
  std::string out;
  for (const auto& d : distinct) {
    out += fmt::format("{} run{} failed: {}\n", d.runs, d.runs == 1 ? "" : "s", d.text);
    const std::string_view remedy = core::FailureRemedy(d.failure_class);
    if (!remedy.empty()) out += fmt::format("  remedy: {}\n", remedy);
  }
  return out;
}

std::string ProgressBar(double done, double total, int width) {
  const double fraction = total > 0 ? std::clamp(done / total, 0.0, 1.0) : 0.0;
  const int filled = static_cast<int>(std::lround(fraction * width));
  return fmt::format("[{}{}] {:3.0f}%", std::string(filled, '#'), std::string(width - filled, '.'),
                     fraction * 100);
}

std::string FormatSweepList(const std::vector<parity::v1::Sweep>& sweeps) {
  std::vector<TableRow> rows;
  for (const auto& s : sweeps) {
    const auto& c = s.counts();
    rows.push_back({s.sweep_id(), s.spec().name(), SweepStateName(s.state()),
                    std::to_string(c.pending() + c.leased()), std::to_string(c.running()),
                    std::to_string(c.succeeded()), std::to_string(c.failed()),
                    std::to_string(c.cancelled()), std::to_string(c.total()),
                    Time(s.create_time())});
  }
  return RenderTable({"sweep", "name", "state", "queued", "running", "succeeded", "failed",
                      "cancelled", "total", "created"},
                     rows, {"sweep", "name", "state", "created"});
}

std::string FormatSweepRuns(const parity::v1::Sweep& sweep,
                            const std::vector<parity::v1::Run>& runs) {
  const auto& c = sweep.counts();
  const uint32_t ended = c.succeeded() + c.failed() + c.cancelled();
  std::string out = fmt::format(
      "sweep {} ({}) {}  {}  {} of {} runs ended: {} succeeded, {} failed, {} cancelled; {} "
      "running, {} queued\n\n",
      sweep.sweep_id(), sweep.spec().name(), SweepStateName(sweep.state()),
      ProgressBar(ended, c.total()), ended, c.total(), c.succeeded(), c.failed(), c.cancelled(),
      c.running(), c.pending() + c.leased());
  std::vector<TableRow> rows;
  for (const auto& r : runs) {
    const uint64_t steps = r.spec().training().steps();
    const std::string failure = FailureText(r);
    rows.push_back(
        {r.spec().name(), RunStateName(r.state()), std::to_string(r.attempt()),
         ProgressBar(static_cast<double>(r.latest_step()), static_cast<double>(steps), 16),
         fmt::format("{}/{}", r.latest_step(), steps), Bpc(r.latest_val_bpc()), r.run_id(),
         failure.empty() ? std::string(1, '-') : Shorten(failure)});
  }
  out +=
      RenderTable({"run", "state", "attempt", "progress", "step", "val BPC", "id", "last failure"},
                  rows, {"run", "state", "progress", "id", "last failure"});
  const std::string failures = FormatFailureSummary(runs);
  return failures.empty() ? out : out + "\n" + failures;
}

std::string FormatWorkers(const std::vector<parity::v1::Worker>& workers) {
  std::vector<TableRow> rows;
  for (const auto& w : workers) {
    uint32_t threads = 0, gpus = 0;
    for (const auto& d : w.devices()) {
      if (d.kind() == parity::v1::DEVICE_KIND_CPU) threads += d.threads();
      if (d.kind() == parity::v1::DEVICE_KIND_CUDA) ++gpus;
    }
    // Each dataset as name@digest, the digest whole: what data.dataset_digest pins.
    std::vector<std::string> datasets;
    for (const auto& d : w.datasets())
      datasets.push_back(fmt::format("{}@{}", d.name(), d.digest()));
    rows.push_back({w.worker_id(), w.hostname(), std::to_string(threads), std::to_string(gpus),
                    std::to_string(w.active_runs()), Time(w.last_seen_time()), w.version(),
                    datasets.empty() ? "-" : absl::StrJoin(datasets, " ")});
  }
  return RenderTable(
      {"worker", "host", "threads", "gpus", "active runs", "last seen", "version", "datasets"},
      rows, {"worker", "host", "last seen", "version", "datasets"});
}

}  // namespace parity::cli
