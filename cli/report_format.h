// How the CLI words the analysis's figures, shared by analysis.md, runs.csv and the terminal so
// they read the same everywhere (and as the dashboard's analysis panel words them): which EL a
// figure is, its interval and extrapolation mark, a group's region and lack-of-fit verdict, a
// point optimum or the reason there is none, and ΔBPC verdicts.
#pragma once

#include <string>

#include "parity/v1/sweep_service.pb.h"

namespace parity::cli {

// 0.221 → "22.1%".
std::string Percent(double fraction);
// 1.23456 → "1.2346" (`digits` after the point).
std::string Fixed(double value, int digits = 4);
// 0.0123 → "+0.0123", −0.0123 → "-0.0123".
std::string Signed(double value, int digits = 4);
// A p-value to three significant figures: 0.217, 0.000301.
std::string PValue(double p);
// "value [low – high]" in `digits` decimals, or the value alone without an interval.
std::string FixedWithInterval(double value, bool has_interval,
                              const parity::v1::ConfidenceInterval& interval, int digits);

// A grid point's EL: "2.31 [1.80 – 2.95]", with " (extrapolated ×1.9)" when its dense compute
// lies outside the measured dense range, or "— (reason)" when missing.
std::string LeverageText(const parity::v1::GridPointLeverage& leverage);

// "beyond seed spread", "within seed spread", "one seed: spread unknown", …
std::string VerdictText(parity::v1::DeltaVerdict verdict);

// "best", "inside", "outside", "untested".
std::string RegionStatusText(parity::v1::RegionStatus status);

// "15.0% – 40.0%" (with " (not contiguous)"), or "— (note)" when the group has no region.
std::string RegionText(const parity::v1::OptimalActivation& optimum);

// "passes (p = 0.43)", "rejected (p = 0.000301)" or "untested: why".
std::string LackOfFitText(const parity::v1::LackOfFit& lack_of_fit);

// "24.1% [15.0% – 40.0%]" for a point optimum with its bracket, else "none: reason".
std::string PointOptimumText(const parity::v1::OptimalActivation& optimum);

// "p = 0.031" or "—" when there is no Welch test (a side with one seed).
std::string WelchText(const parity::v1::BaselineDelta& delta);

}  // namespace parity::cli
