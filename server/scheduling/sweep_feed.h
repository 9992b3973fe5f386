// SweepFeeds: one poller per watched sweep per replica, fanning out to every WatchSweep stream
// of that sweep (sweeps_watch.cc). Streams each polling the store on their own cost PostgreSQL
// about 0.018 cores per stream on a 10,000-run sweep, and 200 of them drained the connection
// pool (bench/RESULTS.md, "Where the capacity goes"); a feed reads once per poll whatever the
// number of streams:
//   - the sweep's new events (ReadModels::ListSweepEvents by commit horizon);
//   - the new metric points of its live runs (ListMetrics), only while some subscriber asked for
//     metrics (the first such subscriber has the feed list the sweep's runs once for their
//     states and latest steps);
//   - the sweep (SweepCatalog::GetSweep, with its counts) once per poll that found events.
// A feed polls when woken (Wake: a NOTIFY from any replica's event insert, or the memory store's
// listener), at most once per min_poll_gap, and every poll_interval regardless (a lost or
// late-visible NOTIFY costs latency, never an event: the horizon decides what is read).
//
// Messages go into a bounded in-memory buffer; each subscriber reads it with its own cursor. A
// subscriber more than buffer_messages behind is cut (UNAVAILABLE, "reconnect": the CLI and the
// Python client reconnect from a fresh snapshot) rather than holding memory without bound. A feed
// outlives its last subscriber by `linger` (a reconnecting stream finds it warm), after which its
// thread ends; at most kMaxIdleFeeds idle feeds are kept at once.
//
// Streams that open together also share the pages of their opening snapshots
// (SweepSubscription::SnapshotPage), read at most snapshot_reads at once per replica.
//
// What a subscriber may count on: every event committed after Subscribe() returned, in commit
// order, no gap (so a snapshot read after Subscribe() loses nothing; a change racing it may be
// streamed twice); with metrics, every point stored after its run's latest step as read after
// Subscribe(), by run in step order. A store error the feed cannot retry (NOT_FOUND: the sweep
// was deleted) ends every subscriber with it; transient ones (UNAVAILABLE, DEADLINE_EXCEEDED,
// ABORTED, RESOURCE_EXHAUSTED) are retried each interval for up to give_up_after.
//
// Thread-safe. Each feed has its own thread; subscribers read on their own (the gRPC stream's)
// threads. Lock order: SweepFeeds' lock, then a feed's, then the clock's; Wake() takes the first
// two and nothing else, so the memory store may call it under its own lock. No lock is held
// across a store call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "parity/v1/sweep_service.pb.h"
#include "server/scheduling/clock.h"
#include "server/store/read_models.h"
#include "server/store/sweep_catalog.h"

namespace parity::server {

struct SweepFeedOptions {
  absl::Duration poll_interval = absl::Milliseconds(200);  // the fallback when nothing wakes it
  absl::Duration min_poll_gap = absl::Milliseconds(50);    // wake-ups closer than this coalesce
  size_t buffer_messages = 50000;  // how far behind a subscriber may fall before it is cut
  absl::Duration linger = absl::Seconds(10);
  absl::Duration give_up_after = absl::Seconds(10);  // of transient store errors in a row
  // Pages of opening snapshots read at once on this replica (SweepFeeds::ReadPage): 200
  // streams opening together on a 10,000-run sweep would otherwise take the whole connection
  // pool from the workers' calls for their 2,000 pages.
  int snapshot_reads = 4;
};

class SweepFeed;  // sweep_feed.cc

// One stream's place in its sweep's feed. Leaves the feed when destroyed. Used by one thread.
class SweepSubscription {
 public:
  ~SweepSubscription();
  SweepSubscription(const SweepSubscription&) = delete;
  SweepSubscription& operator=(const SweepSubscription&) = delete;

  struct Batch {
    // Shared with the other subscribers: read-only.
    std::vector<std::shared_ptr<const v1::WatchSweepResponse>> messages;
    uint64_t polls = 0;  // polls the feed had completed; every message is from one of them
  };
  // Waits until `deadline` (on the feed's clock) for messages after this subscriber's cursor or
  // a poll after `seen_polls`, and takes at most `max` of them (possibly none). UNAVAILABLE when
  // this subscriber fell more than buffer_messages behind or the server is stopping; the feed's
  // error when it failed.
  absl::StatusOr<Batch> Next(uint64_t seen_polls, absl::Time deadline, size_t max = 1024);
  // A page of the sweep's runs for this subscriber's opening snapshot. Streams that open
  // together share pages: a page read after this subscriber joined is as good as its own read
  // (the feed streams it every change from a horizon taken before either), so the feed keeps
  // the latest read of each page while some subscriber is still reading its snapshot.
  absl::StatusOr<std::shared_ptr<const Page<RunStateRow>>> SnapshotPage(const PageRequest& page);
  // Asks the feed to poll now (subject to min_poll_gap); ends this subscriber's snapshot.
  void RequestPoll();

 private:
  friend class SweepFeeds;
  SweepSubscription(class SweepFeeds& feeds, std::shared_ptr<SweepFeed> feed, int64_t id,
                    std::string sweep_id, uint64_t joined_at_polls);

  SweepFeeds& feeds_;
  // Shared: the registry may drop a failed or idle feed while this subscriber still reads it.
  const std::shared_ptr<SweepFeed> feed_;
  const int64_t id_;
  const std::string sweep_id_;
  uint64_t joined_at_polls_ = 0;  // the feed's completed polls when it joined
  bool snapshotting_ = true;
};

class SweepFeeds {
 public:
  // How many feeds without subscribers are kept (lingering) at most; the oldest goes first.
  static constexpr size_t kMaxIdleFeeds = 16;

  // `catalog`, `reads` and `clock` must outlive this object.
  SweepFeeds(SweepCatalog& catalog, ReadModels& reads, const Clock& clock,
             SweepFeedOptions options);
  // Stops every feed. No subscription may outlive it.
  ~SweepFeeds();
  SweepFeeds(const SweepFeeds&) = delete;
  SweepFeeds& operator=(const SweepFeeds&) = delete;

  // Joins the feed of `sweep_id` (starting one if there is none) and returns once the feed has
  // its horizon, and with `metrics` its runs' metric cursors, so that a snapshot read next loses
  // nothing. `cancelled` (may be null) is asked while waiting: CANCELLED when it says so.
  absl::StatusOr<std::unique_ptr<SweepSubscription>> Subscribe(
      const std::string& sweep_id, bool metrics, const std::function<bool()>& cancelled);

  // Something happened to `sweep_id` (empty: to any sweep): its feed polls soon. Quick; takes no
  // lock but this object's and a feed's.
  void Wake(const std::string& sweep_id);

  // Feeds whose thread still runs, with or without subscribers (tests).
  size_t running_feeds() const;

 private:
  friend class SweepSubscription;
  // A subscription left: drops ended feeds and idle ones past kMaxIdleFeeds.
  void Tidy();
  // A page of `sweep_id`'s runs for SweepSubscription::SnapshotPage: kept in `feed` for the other
  // streams reading their snapshot; at most options.snapshot_reads read at once on this replica.
  absl::StatusOr<std::shared_ptr<const Page<RunStateRow>>> ReadPage(SweepFeed& feed,
                                                                    const std::string& sweep_id,
                                                                    const std::string& key,
                                                                    uint64_t joined_at_polls,
                                                                    const PageRequest& page);

  SweepCatalog& catalog_;
  ReadModels& reads_;
  const Clock& clock_;
  const SweepFeedOptions options_;
  mutable absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<SweepFeed>> feeds_ ABSL_GUARDED_BY(mu_);
  absl::Mutex snapshot_mu_;
  int snapshot_reads_ ABSL_GUARDED_BY(snapshot_mu_) = 0;  // ReadPage calls in flight
};

}  // namespace parity::server
