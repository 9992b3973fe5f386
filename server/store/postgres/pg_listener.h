// PgListener: a thread holding one dedicated connection that LISTENs on "parity_runs_pending"
// (sent by a trigger whenever a run becomes PENDING) and turns each notification into
// a call of `on_notify` (the server wires it to WorkSignal::Notify(), waking idle LeaseRun long
// polls on this replica). It reconnects with
// backoff when the connection drops; while it is down, long polls fall back to polling.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <thread>

namespace parity::server {

class PgListener {
 public:
  // Starts the thread; `on_notify` is called on it, once per notification on `channel` (and
  // once after every (re)connection). parity_leadership wakes the electors (elector.h).
  PgListener(std::string database_url, std::function<void()> on_notify,
             std::string channel = "parity_runs_pending");
  // Stops and joins the thread (within about 200 ms).
  ~PgListener();
  PgListener(const PgListener&) = delete;
  PgListener& operator=(const PgListener&) = delete;

  // True once LISTEN is active (tests wait for it before counting on wake-ups).
  bool listening() const { return listening_.load(); }

 private:
  void Loop();

  const std::string database_url_;
  const std::function<void()> on_notify_;
  const std::string channel_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> listening_{false};
  std::thread thread_;  // last member: starts after the others are ready
};

}  // namespace parity::server
