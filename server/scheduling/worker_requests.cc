#include "server/scheduling/worker_requests.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "core/checkpoint_uri.h"
#include "core/dataset_name.h"
#include "core/eval_sets.h"
#include "server/store/gang_placement.h"

namespace parity::server {
namespace {

bool IsSha256Hex(absl::string_view s) {
  if (s.size() != 64) return false;
  for (const char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace

ResourceOffer OfferOf(const google::protobuf::RepeatedPtrField<v1::Device>& devices) {
  return OfferOfDevices(devices);
}

void CheckWorkerLabels(Violations& violations,
                       const google::protobuf::Map<std::string, std::string>& labels) {
  if (labels.size() > static_cast<size_t>(kMaxWorkerLabels)) {
    violations.Add("labels",
                   absl::StrCat(labels.size(), " labels, over the limit of ", kMaxWorkerLabels));
  }
  for (const auto& [key, value] : labels) {
    if (key.empty() || key.size() > 63 || value.size() > kMaxWorkerLabelBytes) {
      violations.Add(absl::StrCat("labels[", key.substr(0, 64), "]"),
                     absl::StrCat("a key of 1 to 63 characters and a value of at most ",
                                  kMaxWorkerLabelBytes));
    }
  }
}

void CheckCheckpoint(Violations& violations, absl::string_view run_id,
                     const v1::Checkpoint& checkpoint) {
  if (absl::Status s = core::CheckCheckpointUri(run_id, checkpoint.uri()); !s.ok()) {
    violations.Add("checkpoint.uri", std::string(s.message()));
  }
}

void CheckSummaryEvalSets(Violations& violations, const v1::RunSummary& summary) {
  if (absl::Status s = core::CheckEvalBpc(summary.final_eval_bpc()); !s.ok()) {
    violations.Add("success.final_eval_bpc", std::string(s.message()));
  }
  const std::string& digest = summary.dataset_digest();
  if (!digest.empty() &&
      (digest.size() != 64 || digest.find_first_not_of("0123456789abcdef") != std::string::npos)) {
    violations.Add("success.dataset_digest",
                   "must be a manifest digest: 64 lowercase hex characters, or empty");
  }
}

void CheckDevices(Violations& violations, absl::string_view field,
                  const google::protobuf::RepeatedPtrField<v1::Device>& devices) {
  if (devices.empty()) violations.Add(std::string(field), "at least one device is required");
  for (int i = 0; i < devices.size(); ++i) {
    if (devices[i].kind() == v1::DEVICE_KIND_UNSPECIFIED) {
      violations.Add(absl::StrCat(field, "[", i, "].kind"), "must be CPU or CUDA");
    }
  }
}

void CheckDatasetHoldings(Violations& violations,
                          const google::protobuf::RepeatedPtrField<v1::DatasetHolding>& datasets) {
  constexpr int kMaxDatasets = 1000;
  constexpr int kMaxEvalSets = 64;
  if (datasets.size() > kMaxDatasets) {
    violations.Add("datasets",
                   absl::StrCat(datasets.size(), " datasets, over the limit of ", kMaxDatasets));
    return;
  }
  for (int i = 0; i < datasets.size(); ++i) {
    const v1::DatasetHolding& d = datasets[i];
    const std::string field = absl::StrCat("datasets[", i, "]");
    if (absl::Status name = core::CheckDatasetName(d.name()); !name.ok()) {
      violations.Add(absl::StrCat(field, ".name"), std::string(name.message()));
    }
    if (!IsSha256Hex(d.digest())) {
      violations.Add(absl::StrCat(field, ".digest"), "not 64 lowercase hex characters");
    }
    if (d.eval_sets_size() > kMaxEvalSets) {
      violations.Add(absl::StrCat(field, ".eval_sets"),
                     absl::StrCat("more than ", kMaxEvalSets, " evaluation sets"));
    }
    for (int j = 0; j < d.eval_sets_size(); ++j) {
      if (d.eval_sets(j).empty() || d.eval_sets(j).size() > core::kMaxDatasetNameBytes) {
        violations.Add(
            absl::StrCat(field, ".eval_sets[", j, "]"),
            absl::StrCat("empty or longer than ", core::kMaxDatasetNameBytes, " characters"));
      }
    }
  }
}

}  // namespace parity::server
