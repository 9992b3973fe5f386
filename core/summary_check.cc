#include "core/summary_check.h"

#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace parity::core {

std::string SummaryMismatch(const v1::RunSpec& spec, const v1::RunSummary& summary,
                            uint64_t resumed_from_step) {
  std::vector<std::string> why;
  const uint64_t planned_steps = spec.training().steps();
  if (planned_steps > 0 && summary.steps() != planned_steps) {
    why.push_back(absl::StrCat("steps ", summary.steps(), ", planned ", planned_steps));
  }
  if (const uint64_t planned = spec.accounting().tokens();
      planned > 0 && summary.tokens() != planned) {
    why.push_back(absl::StrCat("tokens ", summary.tokens(), ", planned ", planned));
  }
  if (!std::isfinite(summary.final_val_bpc()) || !std::isfinite(summary.final_train_bpc())) {
    why.push_back(absl::StrCat("final BPC train ", summary.final_train_bpc(), ", validation ",
                               summary.final_val_bpc()));
  }
  const bool resumed_finished = planned_steps > 0 && resumed_from_step >= planned_steps;
  if (const double planned = spec.accounting().flops_per_token(); planned > 0) {
    const double measured = summary.measured_flops_per_token();
    // Written so that a NaN measurement disagrees.
    if (!(resumed_finished && measured == 0) &&
        !(std::abs(measured / planned - 1) <= kFlopsPerTokenTolerance)) {
      why.push_back(absl::StrCat("counted ", measured, " FLOPs per token, planned M ", planned,
                                 " (more than 1% apart)"));
    }
  }
  return absl::StrJoin(why, "; ");
}

v1::RunSummary PlannedSummary(const v1::RunSpec& spec, double final_val_bpc,
                              double final_train_bpc) {
  v1::RunSummary summary;
  summary.set_final_val_bpc(final_val_bpc);
  summary.set_final_train_bpc(final_train_bpc);
  summary.set_steps(spec.training().steps());
  summary.set_tokens(spec.accounting().tokens());
  summary.set_measured_flops_per_token(spec.accounting().flops_per_token());
  return summary;
}

}  // namespace parity::core
