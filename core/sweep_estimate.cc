#include "core/sweep_estimate.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <queue>

#include "absl/strings/str_format.h"

namespace parity::core {

double DefaultWorkerFlops(const std::vector<parity::v1::RunSpec>& runs) {
  uint32_t gpus = 0;
  uint32_t threads = 1;
  for (const parity::v1::RunSpec& run : runs) {
    gpus = std::max(gpus, run.resources().gpus());
    threads = std::max(threads, run.resources().cpu_threads());
  }
  return gpus > 0 ? gpus * kGpuFlopsPerSecond : threads * kCpuThreadFlopsPerSecond;
}

double TotalComputeFlops(const std::vector<parity::v1::RunSpec>& runs) {
  double total = 0;
  for (const parity::v1::RunSpec& run : runs) total += run.accounting().compute_flops();
  return total;
}

double EstimateWallSeconds(const std::vector<parity::v1::RunSpec>& runs, int workers,
                           double flops_per_worker, double overhead_seconds) {
  if (runs.empty() || workers <= 0 || !(flops_per_worker > 0)) return 0;
  std::vector<double> seconds;
  for (const parity::v1::RunSpec& run : runs) {
    seconds.push_back(run.accounting().compute_flops() / flops_per_worker + overhead_seconds);
  }
  std::sort(seconds.begin(), seconds.end(), std::greater<>());
  // Each worker's busy-until time; the next run goes to the one that frees first.
  std::priority_queue<double, std::vector<double>, std::greater<>> busy;
  for (int w = 0; w < workers; ++w) busy.push(0);
  double end = 0;
  for (double s : seconds) {
    const double start = busy.top();
    busy.pop();
    busy.push(start + s);
    end = std::max(end, start + s);
  }
  return end;
}

std::string FormatDuration(double seconds) {
  if (seconds < 90) return absl::StrFormat("~%.0f s", std::max(1.0, std::round(seconds)));
  const double minutes = std::round(seconds / 60);
  if (minutes < 60) return absl::StrFormat("~%.0f min", minutes);
  if (minutes < 48 * 60) {
    const auto m = static_cast<long long>(minutes);
    return absl::StrFormat("~%d h %d min", m / 60, m % 60);
  }
  return absl::StrFormat("~%.1f days", seconds / 86400);
}

std::string FormatFlopRate(double flops_per_second) {
  constexpr std::pair<double, const char*> kScales[] = {
      {1e18, "EFLOP/s"}, {1e15, "PFLOP/s"}, {1e12, "TFLOP/s"}, {1e9, "GFLOP/s"}, {1e6, "MFLOP/s"}};
  for (const auto& [scale, unit] : kScales) {
    if (flops_per_second >= scale) {
      const double v = flops_per_second / scale;
      // Two literal formats: clang checks absl::StrFormat's format at compile time.
      return v < 10 ? absl::StrFormat("%.1f %s", v, unit) : absl::StrFormat("%.0f %s", v, unit);
    }
  }
  return absl::StrFormat("%.0f FLOP/s", flops_per_second);
}

std::string WallTimeLine(const std::vector<parity::v1::RunSpec>& runs, int workers,
                         double flops_per_worker) {
  return absl::StrFormat(
      "estimated wall time: %s for Σ C = %.2g FLOPs on %d worker%s at %s each (assumed; "
      "--workers, --worker-flops)",
      FormatDuration(EstimateWallSeconds(runs, workers, flops_per_worker)), TotalComputeFlops(runs),
      workers, workers == 1 ? "" : "s", FormatFlopRate(flops_per_worker));
}

}  // namespace parity::core
