// PgNotifier: sends NOTIFYs on one channel from its own thread and connection, a batch at a
// time, outside the transactions that caused them.
//
// Why not a trigger: a transaction that NOTIFYs takes PostgreSQL's one notify-queue lock at
// commit and holds it until the commit is flushed, so every notifying transaction commits after
// the previous one — no group commit. The sweep-event trigger this replaced (a NOTIFY per lease,
// heartbeat and completion) cost the lease benchmark about a tenth of its cycles a second on two
// cores, and would cost more with more committers. Here the scheduler publishes the sweep ids
// its own calls changed (SchedulerServer's observer), and this thread sends them every
// `batch_interval` in one statement: one notifying commit per replica per interval. A
// notification only wakes (sweep_feed.h: the feeds read events by commit horizon and poll
// anyway), so one lost while the database is away costs latency, never an event.
#pragma once

#include <set>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace parity::server {

class PgNotifier {
 public:
  // Starts the thread; it connects when it first has something to send (and again after an
  // error, at the next batch).
  PgNotifier(std::string database_url, std::string channel,
             absl::Duration batch_interval = absl::Milliseconds(20));
  // Sends what is pending (best effort), stops and joins the thread.
  ~PgNotifier();
  PgNotifier(const PgNotifier&) = delete;
  PgNotifier& operator=(const PgNotifier&) = delete;

  // Queues `payload` for the next batch (equal payloads in one batch are sent once). Quick: no
  // database call on the caller's thread.
  void Publish(const std::string& payload) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Loop();

  const std::string database_url_;
  const std::string channel_;
  const absl::Duration batch_interval_;
  absl::Mutex mu_;
  std::set<std::string> pending_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last member: starts after the others are ready
};

}  // namespace parity::server
