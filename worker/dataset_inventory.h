// The datasets a worker holds and whether each is the copy a sweep pinned (issue #24: every
// worker trains on the same data). At start the worker scans its --corpus-dir, verifies what it
// finds (datasets/verify/verify.h, through its verification cache) and reports each dataset that
// verified in RegisterWorkerRequest.datasets; before a run trains, the run's dataset is resolved
// (dataset_resolver.h) and verified against the digest the sweep pinned (data.dataset_digest).
// Any thread; the cache is thread-safe.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "datasets/verify/verify.h"
#include "parity/v1/worker.pb.h"
#include "worker/dataset_resolver.h"

namespace parity::worker {

// A worker reports at most this many datasets (the scheduler refuses more).
inline constexpr int kMaxReportedDatasets = 1000;

struct DatasetCheck {
  datasets::VerifyCache* cache = nullptr;  // required; outlives the calls
  datasets::VerifyOptions verify;
};

// `name` resolved and verified against `expected_digest` (empty = any). The resolver's errors
// as they are; then NOT_FOUND (gone since) or DATA_LOSS (the copy differs:
// datasets::ViewerDetail says how) from the verification. The result's digest is set.
absl::StatusOr<ResolvedDataset> ResolveAndVerifyDataset(const std::string& data_dir,
                                                        absl::string_view name,
                                                        absl::string_view expected_digest,
                                                        const DatasetLimits& limits,
                                                        const DatasetCheck& check);

// Every dataset in `data_dir` (prepared directories, NAME.txt and other plain-named files),
// verified (each resolved as a spec naming it would be); one that fails is logged as an error and
// left out. Saves the cache afterwards. Sorted by name.
std::vector<v1::DatasetHolding> ScanDatasets(const std::string& data_dir,
                                             const DatasetLimits& limits,
                                             const DatasetCheck& check);

// What every viewer of the run reads when its dataset is not the pinned copy: the dataset, the
// worker, what differs (no path, no size) and the remedy.
std::string DatasetMismatchForViewers(absl::string_view name, absl::string_view worker_id,
                                      const absl::Status& status);

}  // namespace parity::worker
