// SweepFeeds: the replica's registry of watched sweeps' feeds, and the subscriptions it hands
// to watch streams (sweep_feed.h). The feed itself is sweep_feed_poller.{h,cc}.
#include "server/scheduling/sweep_feed.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "server/scheduling/sweep_feed_poller.h"

namespace parity::server {

SweepSubscription::SweepSubscription(SweepFeeds& feeds, std::shared_ptr<SweepFeed> feed, int64_t id,
                                     std::string sweep_id, uint64_t joined_at_polls)
    : feeds_(feeds),
      feed_(std::move(feed)),
      id_(id),
      sweep_id_(std::move(sweep_id)),
      joined_at_polls_(joined_at_polls) {}

SweepSubscription::~SweepSubscription() {
  if (snapshotting_) feed_->SnapshotDone();
  feed_->Leave(id_);
  feeds_.Tidy();
}

absl::StatusOr<std::shared_ptr<const Page<RunStateRow>>> SweepSubscription::SnapshotPage(
    const PageRequest& page) {
  const std::string key = absl::StrCat(page.page_size, "/", page.page_token);
  if (auto kept = feed_->CachedPage(key, joined_at_polls_)) return kept;
  return feeds_.ReadPage(*feed_, sweep_id_, key, joined_at_polls_, page);
}

absl::StatusOr<SweepSubscription::Batch> SweepSubscription::Next(uint64_t seen_polls,
                                                                 absl::Time deadline, size_t max) {
  return feed_->Next(id_, seen_polls, deadline, max);
}

void SweepSubscription::RequestPoll() {
  if (snapshotting_) feed_->SnapshotDone();
  snapshotting_ = false;
  feed_->Wake();
}

SweepFeeds::SweepFeeds(SweepCatalog& catalog, ReadModels& reads, const Clock& clock,
                       SweepFeedOptions options)
    : catalog_(catalog), reads_(reads), clock_(clock), options_(options) {}

SweepFeeds::~SweepFeeds() {
  std::map<std::string, std::shared_ptr<SweepFeed>> feeds;
  {
    absl::MutexLock lock(&mu_);
    feeds.swap(feeds_);
  }
  for (auto& [id, feed] : feeds) feed->Stop();
}

absl::StatusOr<std::unique_ptr<SweepSubscription>> SweepFeeds::Subscribe(
    const std::string& sweep_id, bool metrics, const std::function<bool()>& cancelled) {
  std::shared_ptr<SweepFeed> feed;
  std::shared_ptr<SweepFeed> ended;
  int64_t id = 0;
  uint64_t joined_at_polls = 0;
  {
    absl::MutexLock lock(&mu_);
    auto it = feeds_.find(sweep_id);
    if (it != feeds_.end()) {
      id = it->second->Join(metrics, joined_at_polls);
      if (id != 0) {
        feed = it->second;
      } else {
        ended = std::move(it->second);
        feeds_.erase(it);
      }
    }
    if (feed == nullptr) {
      feed = std::make_shared<SweepFeed>(sweep_id, catalog_, reads_, clock_, options_);
      id = feed->Join(metrics, joined_at_polls);
      feed->Start();
      feeds_[sweep_id] = feed;
    }
  }
  if (ended != nullptr) ended->Stop();  // joins its (finished) thread, outside the lock
  std::unique_ptr<SweepSubscription> subscription(
      new SweepSubscription(*this, feed, id, sweep_id, joined_at_polls));
  PARITY_RETURN_IF_ERROR(feed->AwaitReady(id, cancelled));
  return subscription;
}

void SweepFeeds::Wake(const std::string& sweep_id) {
  absl::MutexLock lock(&mu_);
  if (sweep_id.empty()) {
    for (auto& [id, feed] : feeds_) feed->Wake();
    return;
  }
  auto it = feeds_.find(sweep_id);
  if (it != feeds_.end()) it->second->Wake();
}

absl::StatusOr<std::shared_ptr<const Page<RunStateRow>>> SweepFeeds::ReadPage(
    SweepFeed& feed, const std::string& sweep_id, const std::string& key, uint64_t joined_at_polls,
    const PageRequest& page) {
  {
    absl::MutexLock lock(&snapshot_mu_);
    auto free = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(snapshot_mu_) {
      return snapshot_reads_ < std::max(options_.snapshot_reads, 1);
    };
    snapshot_mu_.Await(absl::Condition(&free));
    ++snapshot_reads_;
  }
  // Another stream may have read it while this one waited its turn.
  std::shared_ptr<const Page<RunStateRow>> kept = feed.CachedPage(key, joined_at_polls);
  absl::StatusOr<Page<RunStateRow>> runs;
  const uint64_t read_at_polls = feed.polls();
  if (kept == nullptr) runs = reads_.ListRunStates(sweep_id, page);
  {
    absl::MutexLock lock(&snapshot_mu_);
    --snapshot_reads_;
  }
  if (kept != nullptr) return kept;
  if (!runs.ok()) return runs.status();
  auto shared = std::make_shared<const Page<RunStateRow>>(*std::move(runs));
  feed.KeepPage(key, read_at_polls, shared);
  return shared;
}

size_t SweepFeeds::running_feeds() const {
  absl::MutexLock lock(&mu_);
  size_t running = 0;
  for (const auto& [id, feed] : feeds_) running += feed->Ended() ? 0 : 1;
  return running;
}

void SweepFeeds::Tidy() {
  std::vector<std::shared_ptr<SweepFeed>> dropped;
  {
    absl::MutexLock lock(&mu_);
    std::vector<std::pair<absl::Time, std::string>> idle;
    for (auto it = feeds_.begin(); it != feeds_.end();) {
      if (it->second->Ended()) {
        dropped.push_back(std::move(it->second));
        it = feeds_.erase(it);
        continue;
      }
      if (std::optional<absl::Time> since = it->second->IdleSince()) {
        idle.emplace_back(*since, it->first);
      }
      ++it;
    }
    // The oldest idle feeds go first (a FakeClock never ends a linger: this bounds the threads).
    std::sort(idle.begin(), idle.end());
    for (size_t i = 0; i + kMaxIdleFeeds < idle.size(); ++i) {
      auto it = feeds_.find(idle[i].second);
      dropped.push_back(std::move(it->second));
      feeds_.erase(it);
    }
  }
  for (auto& feed : dropped) feed->Stop();  // the last reference may be a subscriber's
}

}  // namespace parity::server
