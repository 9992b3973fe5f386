#include "server/scheduling/analysis_cache.h"

#include <utility>

namespace parity::server {

absl::StatusOr<AnalysisCache::Answer> AnalysisCache::GetOrCompute(const std::string& key,
                                                                  int64_t version,
                                                                  const Compute& compute) {
  {
    absl::MutexLock lock(&mu_);
    // Another caller computes this version: wait for it (or for its failure). By key, not by
    // reference: the entry may go meanwhile.
    auto settled = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      auto it = entries_.find(key);
      return it == entries_.end() || !(it->second.computing && it->second.version == version);
    };
    mu_.Await(absl::Condition(&settled));
    auto [it, added] = entries_.try_emplace(key);
    Entry& entry = it->second;
    if (added) {
      recency_.push_front(key);
      entry.recency = recency_.begin();
    }
    Touch(entry);
    if (entry.version == version && entry.answer != nullptr) return entry.answer;
    // A newer version is known (a caller read the counts later than this one): this caller's
    // own is computed but not kept.
    if (entry.version <= version) {
      entry.version = version;
      entry.answer = nullptr;
      entry.computing = true;
    }
    Evict();
  }
  absl::StatusOr<v1::AnalyzeSweepResponse> computed = compute();
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(key);
  const bool mine = it != entries_.end() && it->second.computing && it->second.version == version;
  Answer answer;
  if (computed.ok())
    answer = std::make_shared<const v1::AnalyzeSweepResponse>(*std::move(computed));
  if (mine) {
    it->second.computing = false;
    it->second.answer = answer;  // null after a failure: the next caller computes again
  }
  if (!computed.ok()) return computed.status();
  return answer;
}

size_t AnalysisCache::size() const {
  absl::MutexLock lock(&mu_);
  size_t kept = 0;
  for (const auto& [key, entry] : entries_) kept += entry.answer != nullptr ? 1 : 0;
  return kept;
}

void AnalysisCache::Touch(Entry& entry) {
  recency_.splice(recency_.begin(), recency_, entry.recency);
}

void AnalysisCache::Evict() {
  // From the least recently used end; an entry being computed stays (its caller comes back).
  auto it = recency_.end();
  while (entries_.size() > capacity_ && it != recency_.begin()) {
    --it;
    auto entry = entries_.find(*it);
    if (entry->second.computing) continue;
    entries_.erase(entry);
    it = recency_.erase(it);
  }
}

}  // namespace parity::server
