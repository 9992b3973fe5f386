// Identity by deterministic serialisation of the run with every group-specific field cleared:
// adding a RunSpec field makes it part of the identity unless it is cleared here, which errs on
// the side of training a run twice rather than merging two different ones.
#include "core/planner_sharing.h"

#include "absl/container/flat_hash_map.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"

namespace parity::core {

using parity::v1::GroupRef;
using parity::v1::RunSpec;

std::string RunIdentity(const RunSpec& run) {
  RunSpec key = run;
  key.clear_name();
  key.clear_role();
  key.clear_compute_budget();
  key.clear_compute_multiple();
  key.clear_data_variant();
  key.clear_grid_point();
  key.clear_predicted_efficiency_leverage();
  key.clear_also_serves();
  // The engine reads D̂ from the accounting (accounting.unique_tokens and epochs, kept); the
  // reuse mode only labels how D̂ was chosen and data.unique_tokens is D̂ before D was rounded
  // to whole batches.
  key.mutable_data()->clear_reuse();
  key.mutable_data()->clear_unique_tokens();
  key.mutable_data()->clear_epochs();
  // Targets and the miss from them describe how the shape was asked for, not the shape.
  key.mutable_model()->clear_target_params();
  key.mutable_model()->clear_param_tolerance();
  key.mutable_model()->mutable_moe()->clear_target_activation_rate();
  key.mutable_accounting()->clear_params_error();
  std::string bytes;
  google::protobuf::io::StringOutputStream stream(&bytes);
  google::protobuf::io::CodedOutputStream coded(&stream);
  coded.SetSerializationDeterministic(true);
  key.SerializeToCodedStream(&coded);
  coded.Trim();
  return bytes;
}

namespace {

GroupRef RefOf(const RunSpec& run) {
  GroupRef ref;
  ref.set_compute_budget(run.compute_budget());
  ref.set_data_variant(run.data_variant());
  ref.set_role(run.role());
  ref.set_compute_multiple(run.compute_multiple());
  ref.mutable_grid_point()->insert(run.grid_point().begin(), run.grid_point().end());
  ref.set_name(run.name());
  return ref;
}

}  // namespace

void MergeIdenticalRuns(std::vector<RunSpec>& runs) {
  absl::flat_hash_map<std::string, size_t> first;  // identity → index in `kept`
  std::vector<RunSpec> kept;
  kept.reserve(runs.size());
  for (RunSpec& run : runs) {
    auto [it, inserted] = first.emplace(RunIdentity(run), kept.size());
    if (inserted) {
      kept.push_back(std::move(run));
    } else {
      *kept[it->second].add_also_serves() = RefOf(run);
    }
  }
  runs = std::move(kept);
}

std::vector<GroupRef> GroupsOf(const RunSpec& run) {
  std::vector<GroupRef> groups{RefOf(run)};
  groups.insert(groups.end(), run.also_serves().begin(), run.also_serves().end());
  return groups;
}

}  // namespace parity::core
