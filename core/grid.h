// Grid expansion helpers shared by validation and the planner: the effective data variants, the
// hyperparameter combinations, default labels and the run count a spec expands to.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "parity/v1/sweep.pb.h"
#include "parity/v1/training.pb.h"

namespace parity::core {

// The data variants of a sweep: grid.data merged over SweepSpec.data (set fields override), or
// SweepSpec.data alone. Reuse defaults to UNIQUE; every variant gets a name.
std::vector<parity::v1::DataVariant> DataVariantsOf(const parity::v1::SweepSpec& spec);

// One combination of the hyperparameter axes: (TrainingSpec field, value) pairs in axis order.
using HyperparameterSetting = std::vector<std::pair<std::string, double>>;

// The cartesian product of grid.hyperparameters; one empty setting when there are no axes.
std::vector<HyperparameterSetting> HyperparameterSettingsOf(const parity::v1::Grid& grid);

// Sets a numeric TrainingSpec field by name; InvalidArgument when it is not a numeric field or
// the value does not fit it.
absl::Status SetTrainingField(parity::v1::TrainingSpec& training, const std::string& field,
                              double value);

// Labels used in run names when the spec leaves them empty. An MoE point's ablation fields
// (top_k pinned beside a target r_a, layout, shared expert, balance) are appended:
// "ra20-k4", "ra20-allmoe-se256-lossfree".
std::string MoePointLabel(const parity::v1::MoePoint& point);  // "ra20", "e64k8de512"
std::string BudgetLabel(const parity::v1::ComputeBudget& budget, int index);  // "C1"
std::string BaselineLabel(
    const parity::v1::DenseBaseline& baseline);                 // "dense-2C", "dense-1.91C-unique"
std::string DenseSizeLabel(const parity::v1::DenseSize& size);  // "n0.5", "n25M", "d128l4"

// Short names of the ablation values recorded in grid_point: "1dense+SE", "all-moe",
// "interleaved"; "aux_loss", "loss_free", "none"; "unique", "strict", "loose".
std::string LayoutName(parity::v1::MoeLayout layout);
std::string BalanceName(parity::v1::BalanceMethod balance);
std::string ReuseName(parity::v1::ReuseMode reuse);

// The backbone of one MoE point: the sweep's backbone with the point's ablation fields (layout,
// shared expert, balance) laid over it. A point that switches to 1dense+SE drops the backbone's
// shared expert (that layout sets D_se = K·D_e).
parity::v1::ModelSpec MoePointBackbone(const parity::v1::ModelSpec& backbone,
                                       const parity::v1::MoePoint& point);
std::string SettingLabel(const HyperparameterSetting& setting);  // "-lr0.0003" or ""

// Runs the spec expands to (MoE points, baselines and dense sizes × budgets × data × seeds ×
// settings) before identical runs are merged, saturating at UINT64_MAX.
uint64_t ExpectedRunCount(const parity::v1::SweepSpec& spec);

// Compact numbers for labels: 0.2 → "0.2", 68e9 → "68B".
std::string CompactNumber(double value);

}  // namespace parity::core
