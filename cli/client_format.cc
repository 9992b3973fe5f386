#include "cli/client_format.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "cli/table.h"
#include "core/eval_sets.h"
#include "core/failure_remedy.h"
#include "core/proto_time.h"
#include "fmt/format.h"
#include "google/protobuf/util/json_util.h"

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

std::map<std::string, std::string> FailuresByRun(const std::vector<parity::v1::Run>& runs) {
  std::map<std::string, std::string> failures;
  for (const auto& run : runs) {
    std::string text = FailureText(run);
    if (!text.empty()) failures[run.run_id()] = std::move(text);
  }
  return failures;
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

std::string FormatResults(const std::vector<parity::v1::ResultRow>& rows, ResultsFormat format,
                          const std::map<std::string, std::string>& failures) {
  if (format == ResultsFormat::kJson) {
    std::string out = "[\n";
    google::protobuf::util::JsonPrintOptions options;
    options.preserve_proto_field_names = true;
    for (size_t i = 0; i < rows.size(); ++i) {
      std::string json;
      (void)google::protobuf::util::MessageToJsonString(rows[i], &json, options);
      out += "  " + json + (i + 1 < rows.size() ? ",\n" : "\n");
    }
    return out + "]\n";
  }
  const bool table = format == ResultsFormat::kTable;
  // Evaluation sets beyond the primary (whose final BPC is "val BPC"): a final BPC and a ΔBPC
  // column each, by name.
  std::set<std::string> extra_sets;
  for (const auto& r : rows) {
    for (const auto& [name, bpc] : r.final_eval_bpc()) {
      if (name != parity::core::kPrimaryEvalSet) extra_sets.insert(name);
    }
  }
  auto count = [&](double v) { return table ? HumanCount(v) : fmt::format("{:.0f}", v); };
  auto sci = [&](double v) { return table ? Sci(v) : fmt::format("{:.6e}", v); };
  std::vector<TableRow> out_rows;
  for (const auto& r : rows) {
    const bool finished = r.final_val_bpc() > 0;
    std::string delta = "-";
    if (finished && r.delta_bpc_vs_dense() != 0)
      delta = fmt::format("{:+.4f}", r.delta_bpc_vs_dense());
    out_rows.push_back(
        {r.name(), r.layout(), RunStateName(r.state()),
         table ? fmt::format("{:.1f}%", r.activation_rate() * 100)
               : fmt::format("{:.6f}", r.activation_rate()),
         count(static_cast<double>(r.params())), count(static_cast<double>(r.active_params())),
         sci(r.compute_flops()), count(static_cast<double>(r.tokens())),
         count(static_cast<double>(r.unique_tokens())), fmt::format("{:.2f}", r.epochs()),
         finished ? fmt::format("{:.4f}", r.final_val_bpc()) : "-", delta,
         r.predicted_efficiency_leverage() > 0
             ? fmt::format("{:.2f}", r.predicted_efficiency_leverage())
             : "-"});
    for (const std::string& set : extra_sets) {
      auto final_bpc = r.final_eval_bpc().find(set);
      auto set_delta = r.delta_eval_bpc_vs_dense().find(set);
      out_rows.back().push_back(
          final_bpc == r.final_eval_bpc().end() ? "-" : fmt::format("{:.4f}", final_bpc->second));
      out_rows.back().push_back(set_delta == r.delta_eval_bpc_vs_dense().end()
                                    ? "-"
                                    : fmt::format("{:+.4f}", set_delta->second));
    }
    const auto failure = failures.find(r.run_id());
    out_rows.back().push_back(failure == failures.end() ? (table ? "-" : "")
                              : table                   ? Shorten(failure->second)
                                                        : failure->second);
  }
  const TableRow header = {"run",
                           "layout",
                           "state",
                           "r_a",
                           "N",
                           "N_a",
                           "C",
                           "D",
                           "D̂",
                           "epochs",
                           "val BPC",
                           "ΔBPC vs dense 1C",
                           "EL predicted (published law)"};
  TableRow full_header = header;
  for (const std::string& set : extra_sets) {
    full_header.push_back(table ? "BPC " + set : "final_bpc." + set);
    full_header.push_back(table ? "ΔBPC " + set : "delta_bpc." + set);
  }
  full_header.push_back("failure");
  if (table) return RenderTable(full_header, out_rows, {"run", "layout", "state", "failure"});
  // CSV also says which dataset each run trained on (its digest; too wide for the table).
  full_header.push_back("dataset digest");
  for (size_t i = 0; i < rows.size(); ++i) out_rows[i].push_back(rows[i].dataset_digest());
  return RenderCsv(full_header, out_rows);
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
