// What a worker may send about itself and its runs, checked before LeasesService touches the
// store (the spec's own limits are core's): devices, labels and dataset holdings at
// registration, offered devices at each lease, checkpoints inside the run's prefix, a success's
// per-set BPC and dataset digest. Each check adds its problems to a Violations
// (request_validation.h) so a request's every problem comes back at once.
#pragma once

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"
#include "google/protobuf/map.h"
#include "google/protobuf/repeated_ptr_field.h"
#include "parity/v1/run.pb.h"
#include "parity/v1/worker.pb.h"
#include "server/scheduling/request_validation.h"
#include "server/store/run_queue.h"

namespace parity::server {

inline constexpr size_t kMaxWorkerVersionBytes = 64;
inline constexpr int kMaxWorkerDevices = 256;
inline constexpr int kMaxWorkerLabels = 32;
inline constexpr size_t kMaxWorkerLabelBytes = 256;
inline constexpr size_t kMaxFailureMessageBytes = 16384;
inline constexpr int kMaxFailureDetails = 8;

// The free devices a worker offers, reduced to what a run's ResourceRequest is matched against.
ResourceOffer OfferOf(const google::protobuf::RepeatedPtrField<v1::Device>& devices);

// At least one device, each CPU or CUDA; `field` names the list.
void CheckDevices(Violations& violations, absl::string_view field,
                  const google::protobuf::RepeatedPtrField<v1::Device>& devices);
void CheckWorkerLabels(Violations& violations,
                       const google::protobuf::Map<std::string, std::string>& labels);
// RegisterWorkerRequest.datasets: at most 1000, plain names, 64-hex digests.
void CheckDatasetHoldings(Violations& violations,
                          const google::protobuf::RepeatedPtrField<v1::DatasetHolding>& datasets);
// A reported checkpoint lies inside the run's prefix of the store (core/checkpoint_uri.h): the
// next worker resumes the engine from it.
void CheckCheckpoint(Violations& violations, absl::string_view run_id,
                     const v1::Checkpoint& checkpoint);
// A success's per-set final BPC is held to the rule of core/eval_sets.h (it becomes JSON keys and
// CSV columns), its dataset digest to the manifest's form (64 lowercase hex): a worker is a
// boundary, and the store writes both as they come.
void CheckSummaryEvalSets(Violations& violations, const v1::RunSummary& summary);

}  // namespace parity::server
