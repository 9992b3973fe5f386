// Every worker trains on the same data (issue #24): the dataset digest a sweep is pinned to at
// submission, from what the live workers reported holding (RegisterWorkerRequest.datasets;
// LeasesService checks those reports, worker_requests.cc). SweepsService::PinDatasetDigest.
//   data.dataset_digest given  kept; a warning when no live worker holds that digest;
//   empty, one digest held     pinned into the sweep's spec and every run's;
//   empty, several digests     INVALID_ARGUMENT on data.dataset_digest listing them;
//   empty, none held           accepted unpinned, with a warning on data.corpus.
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/field_violation.h"
#include "core/status_macros.h"
#include "server/scheduling/sweeps_service.h"

namespace parity::server {
namespace {

// A worker is live when seen this recently (ListWorkers' default too).
constexpr absl::Duration kLiveWithin = absl::Minutes(5);
constexpr int kMaxWorkerPages = 20;  // × 1000 workers

}  // namespace

absl::StatusOr<std::map<std::string, int>> SweepsService::LiveDatasetDigests(
    const std::string& name) {
  std::map<std::string, int> workers_by_digest;
  WorkersQuery query;
  query.seen_within = kLiveWithin;
  query.page.page_size = 1000;
  for (int page = 0; page < kMaxWorkerPages; ++page) {
    PARITY_ASSIGN_OR_RETURN(Page<v1::Worker> workers, catalog_.ListWorkers(query));
    for (const v1::Worker& worker : workers.items) {
      for (const v1::DatasetHolding& held : worker.datasets()) {
        if (held.name() == name) ++workers_by_digest[held.digest()];
      }
    }
    if (workers.next_page_token.empty()) break;
    query.page.page_token = workers.next_page_token;
  }
  return workers_by_digest;
}

absl::StatusOr<std::string> SweepsService::PinDatasetDigest(
    const v1::SweepSpec& spec, std::vector<core::FieldViolation>& warnings) {
  const std::string& name = spec.data().corpus();
  const std::string& pinned = spec.data().dataset_digest();
  PARITY_ASSIGN_OR_RETURN(const auto held, LiveDatasetDigests(name));
  if (!pinned.empty()) {
    if (!held.contains(pinned)) {
      warnings.push_back(
          {"data.dataset_digest",
           absl::StrCat("no live worker holds dataset '", name, "' with digest ", pinned,
                        held.empty() ? ""
                                     : absl::StrCat(" (live workers hold ", held.size(),
                                                    " other digest(s))"),
                        "; its runs wait until a worker holding that copy registers (`parity "
                        "workers` lists what each holds)")});
    }
    return pinned;
  }
  if (held.empty()) {
    warnings.push_back(
        {"data.corpus",
         absl::StrCat("no live worker holds dataset '", name,
                      "'; the sweep is not pinned to a digest, and its runs fail on workers "
                      "without it; copy or prepare it into a worker's --corpus-dir (`parity "
                      "workers` lists what each holds)")});
    return std::string();
  }
  if (held.size() == 1) return held.begin()->first;
  std::vector<std::string> listed;
  for (const auto& [digest, workers] : held) {
    listed.push_back(absl::StrCat(digest, " (", workers, workers == 1 ? " worker)" : " workers)"));
  }
  const core::FieldViolation violation{
      "data.dataset_digest",
      absl::StrCat("live workers hold different copies of dataset '", name,
                   "': ", absl::StrJoin(listed, ", "),
                   "; pin one with data.dataset_digest (its runs go only to the workers "
                   "holding that copy), or re-copy the dataset so that all agree")};
  return core::InvalidArgumentWithViolations("the sweep's dataset is ambiguous", {&violation, 1});
}

}  // namespace parity::server
