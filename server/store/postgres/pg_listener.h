// PgListener: a thread holding one dedicated connection that LISTENs on one channel and turns
// each notification into a call of `on_notify`: "parity_runs_pending" (sent by a trigger whenever
// a run becomes PENDING; the server wires it to WorkSignal::Notify(), waking idle LeaseRun long
// polls on this replica), "parity_leadership" (the electors), "parity_sweep_events" (a replica's
// PgNotifier: a sweep's runs changed, the payload its sweep id; the server wires it to
// SweepsService::WakeWatchers).
// It reconnects with backoff when the connection drops; while it is down, long polls and watch
// feeds fall back to polling.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <thread>

namespace parity::server {

// Sent by each replica's PgNotifier (pg_notifier.h), payload the sweep id of a lease or
// completion, batched outside the transactions that made them.
inline constexpr char kSweepEventsChannel[] = "parity_sweep_events";

class PgListener {
 public:
  // Starts the thread; `on_notify` is called on it, once per notification on `channel` (and
  // once after every (re)connection). parity_leadership wakes the electors (elector.h).
  PgListener(std::string database_url, std::function<void()> on_notify,
             std::string channel = "parity_runs_pending");
  // The same with each notification's payload; "" after every (re)connection (anything may have
  // happened while nobody listened).
  PgListener(std::string database_url, std::function<void(const std::string& payload)> on_notify,
             std::string channel);
  // Stops and joins the thread (within about 200 ms).
  ~PgListener();
  PgListener(const PgListener&) = delete;
  PgListener& operator=(const PgListener&) = delete;

  // True once LISTEN is active (tests wait for it before counting on wake-ups).
  bool listening() const { return listening_.load(); }

 private:
  void Loop();

  const std::string database_url_;
  const std::function<void(const std::string&)> on_notify_;
  const std::string channel_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> listening_{false};
  std::thread thread_;  // last member: starts after the others are ready
};

}  // namespace parity::server
