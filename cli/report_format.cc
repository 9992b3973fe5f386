#include "cli/report_format.h"

#include "absl/strings/str_cat.h"
#include "fmt/format.h"

namespace parity::cli {

std::string Percent(double fraction) { return fmt::format("{:.1f}%", 100 * fraction); }

std::string Fixed(double value, int digits) { return fmt::format("{:.{}f}", value, digits); }

std::string Signed(double value, int digits) { return fmt::format("{:+.{}f}", value, digits); }

std::string PValue(double p) { return fmt::format("{:.3g}", p); }

std::string FixedWithInterval(double value, bool has_interval,
                              const parity::v1::ConfidenceInterval& interval, int digits) {
  if (!has_interval) return Fixed(value, digits);
  return fmt::format("{} [{} – {}]", Fixed(value, digits), Fixed(interval.low(), digits),
                     Fixed(interval.high(), digits));
}

std::string LeverageText(const parity::v1::GridPointLeverage& leverage) {
  if (leverage.value() <= 0) {
    return absl::StrCat(
        "— (", leverage.missing_reason().empty() ? "not measured" : leverage.missing_reason(), ")");
  }
  std::string text =
      FixedWithInterval(leverage.value(), leverage.has_interval(), leverage.interval(), 2);
  if (leverage.extrapolated()) {
    absl::StrAppend(&text, fmt::format(" (extrapolated ×{:.1f})", leverage.extrapolation_factor()));
  }
  return text;
}

std::string VerdictText(parity::v1::DeltaVerdict verdict) {
  switch (verdict) {
    case parity::v1::DELTA_VERDICT_EXCEEDS_SPREAD:
      return "beyond seed spread";
    case parity::v1::DELTA_VERDICT_WITHIN_SPREAD:
      return "within seed spread";
    case parity::v1::DELTA_VERDICT_NO_SPREAD:
      return "one seed: spread unknown";
    case parity::v1::DELTA_VERDICT_NO_BASELINE:
      return "no 1C dense baseline";
    case parity::v1::DELTA_VERDICT_IS_BASELINE:
      return "reference";
    default:
      return "";
  }
}

std::string RegionStatusText(parity::v1::RegionStatus status) {
  switch (status) {
    case parity::v1::REGION_STATUS_BEST:
      return "best";
    case parity::v1::REGION_STATUS_INSIDE:
      return "inside";
    case parity::v1::REGION_STATUS_OUTSIDE:
      return "outside";
    case parity::v1::REGION_STATUS_UNTESTED:
      return "untested";
    default:
      return "";
  }
}

std::string RegionText(const parity::v1::OptimalActivation& optimum) {
  if (!optimum.has_region()) return absl::StrCat("— (", optimum.region_note(), ")");
  const parity::v1::RegionSpan& region = optimum.region();
  return absl::StrCat(Percent(region.low()), " – ", Percent(region.high()),
                      region.contiguous() ? "" : " (not contiguous)");
}

std::string LackOfFitText(const parity::v1::LackOfFit& lack_of_fit) {
  switch (lack_of_fit.verdict()) {
    case parity::v1::LACK_OF_FIT_VERDICT_PASSES:
      return fmt::format("passes (p = {})", PValue(lack_of_fit.p_value()));
    case parity::v1::LACK_OF_FIT_VERDICT_REJECTED:
      return fmt::format("rejected (p = {})", PValue(lack_of_fit.p_value()));
    default:
      return absl::StrCat("untested: ", lack_of_fit.note());
  }
}

std::string PointOptimumText(const parity::v1::OptimalActivation& optimum) {
  if (optimum.status() != parity::v1::OPTIMUM_STATUS_BRACKETED) {
    return absl::StrCat("none: ", optimum.reason());
  }
  if (!optimum.has_activation_rate_interval()) return Percent(optimum.activation_rate());
  return fmt::format("{} [{} – {}]", Percent(optimum.activation_rate()),
                     Percent(optimum.activation_rate_interval().low()),
                     Percent(optimum.activation_rate_interval().high()));
}

std::string WelchText(const parity::v1::BaselineDelta& delta) {
  return delta.has_welch_p() ? absl::StrCat("p = ", PValue(delta.welch_p())) : "—";
}

}  // namespace parity::cli
