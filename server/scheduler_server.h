// SchedulerServer: the assembled scheduler process — store, LISTEN threads, the scheduling units
// (SweepsService, LeasesService with its LeaseSecrets, Upkeep on the reaper thread), the gRPC
// server with health checking and reflection, and Prometheus metrics (SchedulerMetrics, optionally
// served on their own port), and the web dashboard with its JSON API (HttpServer, when http_listen
// is set). `parity-scheduler serve`, the end-to-end tests and the benchmarks all start it the same
// way.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "server/api/access_control.h"
#include "server/leadership/elector.h"
#include "server/scheduling/lease_secrets.h"
#include "server/scheduling/leases_service.h"
#include "server/scheduling/sweep_events_observer.h"
#include "server/scheduling/sweeps_service.h"
#include "server/scheduling/upkeep.h"
#include "server/server_options.h"

namespace grpc {
class Server;
}
namespace prometheus {
class Exposer;
}

namespace parity::server {

class PostgresRunStore;
class PgListener;
class PgNotifier;
class HttpServer;
class SchedulerMetrics;
class PostgresLeaderLeases;
class LeadershipMetrics;
class SweepServiceImpl;
class TokenServiceImpl;
class WorkerServiceImpl;

class SchedulerServer {
 public:
  // Validates the options (ServerOptions::Validate: INVALID_ARGUMENT naming the flag), migrates
  // (when asked), connects, makes sure an admin token exists and starts serving. UNAVAILABLE
  // when the database cannot be reached or an address cannot be bound; INVALID_ARGUMENT for an
  // unreadable TLS file. `observer`
  // may be null, and then the server keeps its own SchedulerMetrics (metrics()); one passed in must
  // outlive the server and excludes metrics_listen (INVALID_ARGUMENT).
  static absl::StatusOr<std::unique_ptr<SchedulerServer>> Start(
      ServerOptions options, Planner planner, SchedulerObserver* observer = nullptr);
  // Shuts down (see Shutdown) if still running.
  ~SchedulerServer();

  // The bound port (useful when listen_address asked for port 0).
  int port() const { return port_; }
  SweepsService& sweeps() { return *sweeps_; }
  LeasesService& leases() { return *leases_; }
  // The built-in metrics; null when Start() was given an observer. Render() gives /metrics.
  SchedulerMetrics* metrics() { return metrics_.get(); }
  AccessControl& access() { return *access_; }
  // This replica's candidacy for the upkeep leadership.
  Elector& elector() { return *elector_; }
  // The port of the metrics endpoint; 0 when metrics_listen was empty.
  int metrics_port() const { return metrics_port_; }
  // The bound port of the web dashboard; 0 when http_listen was empty.
  int http_port() const { return http_port_; }

  // Stops taking calls, ends long polls and watch streams, waits up to `grace` for calls in
  // flight, then stops the reaper and the listener. Idempotent.
  void Shutdown(absl::Duration grace = absl::Seconds(5));
  // Blocks until Shutdown() has finished.
  void Wait();

 private:
  SchedulerServer() = default;
  // Start's steps, in order. The built-in metrics (and their port) unless `observer` is given;
  // `observer` is set to them.
  absl::Status StartMetrics(SchedulerObserver*& observer);
  // The scheduling units over the store, and the gRPC services over them.
  void MakeServices(Planner planner, SchedulerObserver* observer);
  absl::Status StartGrpc();
  // The web port, when http_listen is set.
  absl::Status StartHttp();
  void ReapLoop();
  // One reaper pass under `fence` (recording an outage where there was one: `pass`), logged.
  void ReapAndLog(const LeaderFence& fence, Upkeep::ReapPass pass = Upkeep::ReapPass::kRegular);
  // One telemetry retention pass under `fence`, logged.
  void RetainAndLog(const LeaderFence& fence);
  // Starts the elector (one attempt now) and its resignation listener (scheduler_server.cc).
  void StartElection();

  ServerOptions options_;
  RealClock real_clock_;
  const Clock* clock_ = &real_clock_;
  WorkSignal work_signal_;
  std::atomic<bool> stopping_{false};
  std::unique_ptr<PostgresRunStore> store_;
  // Declared after the store it reads and before everything that reports to it (services, gRPC
  // interceptors, exposer), so it is destroyed after them.
  std::unique_ptr<SchedulerMetrics> metrics_;
  std::unique_ptr<prometheus::Exposer> exposer_;  // reset in Shutdown(): frees the port
  int metrics_port_ = 0;
  std::unique_ptr<PgListener> listener_;
  // Publishes the sweeps this replica's leases and completions changed (before the units that
  // report to it, so destroyed after them).
  std::unique_ptr<PgNotifier> sweep_events_notifier_;
  std::unique_ptr<SweepEventsObserver> sweep_events_observer_;
  // The scheduling units, each over the store interfaces it needs (server/README.md).
  std::unique_ptr<LeaseSecrets> lease_secrets_;
  std::unique_ptr<SweepsService> sweeps_;
  // Wakes sweeps_' watch feeds on any replica's run events (after sweeps_: destroyed first).
  std::unique_ptr<PgListener> sweep_events_listener_;
  std::unique_ptr<LeasesService> leases_;
  std::unique_ptr<Upkeep> upkeep_;
  std::unique_ptr<PostgresLeaderLeases> leader_leases_;
  std::unique_ptr<LeadershipMetrics> leadership_metrics_;
  std::unique_ptr<Elector> elector_;
  std::unique_ptr<PgListener> leadership_listener_;  // resignations wake the elector
  // The term the reaper last ran under: its first pass in a new term is a start-up pass (the
  // outage grace), since the old leader's passes stopped when it died.
  int64_t reaped_in_term_ = 0;
  std::unique_ptr<AccessControl> access_;
  std::unique_ptr<SweepServiceImpl> sweep_service_;
  std::unique_ptr<WorkerServiceImpl> worker_service_;
  std::unique_ptr<TokenServiceImpl> token_service_;
  std::unique_ptr<grpc::Server> grpc_server_;
  int port_ = 0;
  // Declared after the services and store its handlers call, so it is destroyed before them.
  std::unique_ptr<HttpServer> http_server_;
  int http_port_ = 0;
  absl::Mutex reaper_mu_;
  bool stop_reaper_ ABSL_GUARDED_BY(reaper_mu_) = false;
  absl::Notification shut_down_;
  std::thread reaper_;
  std::once_flag shutdown_once_;
};

}  // namespace parity::server
