// AnalysisCache: a sweep's analysis, computed once per version of its finished runs.
//
// AnalyzeSweep reads every SUCCEEDED run of a sweep and bootstraps intervals over them: seconds
// at 10,000 runs. Every open dashboard of the sweep asks for it on a timer, and the answer only
// changes when another run succeeds (a SUCCEEDED run's result never changes; runs leave only
// with their sweep). So the answer is kept per (sweep, evaluation set) with the sweep's count of
// SUCCEEDED runs as its version; callers that ask for the same key and version while it is
// being computed wait for that one computation instead of starting their own. Errors are not
// kept. At most `capacity` answers are kept, the least recently used going first.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "parity/v1/sweep_service.pb.h"

namespace parity::server {

class AnalysisCache {
 public:
  using Answer = std::shared_ptr<const v1::AnalyzeSweepResponse>;
  using Compute = std::function<absl::StatusOr<v1::AnalyzeSweepResponse>()>;

  explicit AnalysisCache(size_t capacity) : capacity_(capacity) {}

  // The kept answer for `key` at `version`, else `compute()`'s (kept when it is OK and the key
  // was not moved on to a newer version meanwhile).
  absl::StatusOr<Answer> GetOrCompute(const std::string& key, int64_t version,
                                      const Compute& compute) ABSL_LOCKS_EXCLUDED(mu_);

  // Answers kept now (for tests and metrics).
  size_t size() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Entry {
    int64_t version = -1;
    Answer answer;                             // null while computing or after a failed computation
    bool computing = false;                    // someone computes `version` now
    std::list<std::string>::iterator recency;  // position in recency_
  };

  void Touch(Entry& entry) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Evict() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const size_t capacity_;
  mutable absl::Mutex mu_;
  std::map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
  std::list<std::string> recency_ ABSL_GUARDED_BY(mu_);  // most recently used first
};

}  // namespace parity::server
