#include "cli/run_status_format.h"

#include <cmath>
#include <set>
#include <vector>

#include "absl/strings/str_join.h"
#include "cli/client_format.h"
#include "cli/table.h"
#include "core/memory_estimate.h"
#include "core/proto_time.h"
#include "fmt/format.h"

namespace parity::cli {
namespace {

std::string TimeText(const google::protobuf::Timestamp& time) {
  if (time.seconds() == 0 && time.nanos() == 0) return "-";
  return absl::FormatTime("%Y-%m-%d %H:%M:%S UTC", FromProtoTime(time), absl::UTCTimeZone());
}

std::string GangText(const parity::v1::GetRunResponse& response, absl::Time now) {
  const parity::v1::Run& run = response.run();
  const uint32_t ranks = run.spec().resources().ranks();
  if (!response.has_gang()) {
    if (run.state() != parity::v1::RUN_STATE_PENDING) return "";  // ended without a placement
    return fmt::format("gang: {} ranks, waiting to be placed whole\n", ranks);
  }
  const parity::v1::RunGang& gang = response.gang();
  std::set<std::string> hosts;
  for (const auto& rank : gang.ranks()) {
    hosts.insert(rank.hostname().empty() ? rank.worker_id() : rank.hostname());
  }
  std::string out = fmt::format("gang: {} ranks on {} host{}, epoch {}, placed {}\n",
                                gang.world_size(), hosts.size(), hosts.size() == 1 ? "" : "s",
                                gang.lease_epoch(), TimeText(gang.placed_time()));
  out += "rendezvous: " + RendezvousText(gang, now) + "\n\n";
  const absl::Time placed = FromProtoTime(gang.placed_time());
  std::vector<TableRow> rows;
  for (const auto& rank : gang.ranks()) {
    const std::string devices = absl::StrJoin(rank.device_indices(), ",");
    const std::string in =
        rank.checked_in()
            ? fmt::format("yes (+{})", SpanText(FromProtoTime(rank.check_in_time()) - placed))
            : "no";
    rows.push_back({std::to_string(rank.rank()), rank.worker_id(),
                    rank.hostname().empty() ? "-" : rank.hostname(),
                    devices.empty() ? "-" : devices, in});
  }
  return out + RenderTable({"rank", "worker", "host", "devices", "checked in"}, rows,
                           {"worker", "host", "devices", "checked in"});
}

}  // namespace

std::string SpanText(absl::Duration span) {
  const double seconds = std::fabs(absl::ToDoubleSeconds(span));
  if (seconds < 60) return fmt::format("{:.1f} s", seconds);
  const int64_t whole = static_cast<int64_t>(std::llround(seconds));
  if (whole < 3600) return fmt::format("{}m {}s", whole / 60, whole % 60);
  return fmt::format("{}h {}m", whole / 3600, (whole % 3600) / 60);
}

std::string RendezvousText(const parity::v1::RunGang& gang, absl::Time now) {
  const absl::Time placed = FromProtoTime(gang.placed_time());
  if (gang.released()) {
    return fmt::format("released {} after placement",
                       SpanText(FromProtoTime(gang.released_time()) - placed));
  }
  int checked_in = 0;
  for (const auto& rank : gang.ranks()) checked_in += rank.checked_in();
  const absl::Duration left = FromProtoTime(gang.rendezvous_deadline()) - now;
  const std::string deadline =
      left >= absl::ZeroDuration()
          ? fmt::format("deadline in {}", SpanText(left))
          : fmt::format("deadline passed {} ago (the scheduler fails and requeues the gang)",
                        SpanText(left));
  return fmt::format("waiting: {} of {} checked in, {}", checked_in, gang.world_size(), deadline);
}

std::string MemoryText(const parity::v1::RunSummary& summary) {
  std::vector<std::string> parts;
  if (summary.peak_memory_bytes() > 0) {
    parts.push_back("host peak " + core::HumanBytes(summary.peak_memory_bytes()));
  }
  const uint64_t peak = summary.peak_device_memory_bytes();
  const uint64_t estimate = summary.estimated_device_memory_bytes();
  if (peak > 0 && estimate > 0) {
    const double off = 100.0 * (static_cast<double>(peak) / static_cast<double>(estimate) - 1);
    parts.push_back(fmt::format("device {} of {} estimated ({:+.1f}%)", core::HumanBytes(peak),
                                core::HumanBytes(estimate), off));
  } else if (peak > 0) {
    parts.push_back("device peak " + core::HumanBytes(peak));
  }
  return parts.empty() ? "" : "memory: " + absl::StrJoin(parts, "; ");
}

std::string FormatRunStatus(const parity::v1::GetRunResponse& response, absl::Time now) {
  const parity::v1::Run& run = response.run();
  const uint64_t steps = run.spec().training().steps();
  std::string out = fmt::format(
      "run {} ({}) {}  attempt {} of {}  {}  step {}/{}\n", run.run_id(), run.spec().name(),
      RunStateName(run.state()), run.attempt(), run.max_attempts(),
      ProgressBar(static_cast<double>(run.latest_step()), static_cast<double>(steps), 16),
      run.latest_step(), steps);
  out += fmt::format("sweep {}\n", run.sweep_id());
  if (run.latest_val_bpc() > 0) out += fmt::format("val BPC: {:.4f}\n", run.latest_val_bpc());
  if (const std::string memory = MemoryText(run.summary()); !memory.empty()) out += memory + "\n";
  if (const std::string failure = FailureText(run); !failure.empty()) {
    out += "last failure: " + failure + "\n";
  }
  if (run.spec().resources().ranks() > 1 || response.has_gang()) {
    out += GangText(response, now);
  }
  return out;
}

}  // namespace parity::cli
