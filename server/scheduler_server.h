// SchedulerServer: the assembled scheduler process — store, LISTEN thread, scheduler, reaper
// thread, the gRPC server with health checking and reflection, and Prometheus metrics
// (SchedulerMetrics, optionally served on their own port), and the web dashboard with its JSON
// API (HttpServer, when http_listen is set). `parity-scheduler serve`, the end-to-end tests and
// the benchmarks all start it the same way.
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
#include "server/api/microhttpd_server.h"
#include "server/leadership/elector.h"
#include "server/scheduling/scheduler.h"

namespace grpc {
class Server;
}
namespace prometheus {
class Exposer;
}

namespace parity::server {

class PostgresRunStore;
class PgListener;
class HttpServer;
class SchedulerMetrics;
class PostgresLeaderLeases;
class LeadershipMetrics;
class SweepServiceImpl;
class TokenServiceImpl;
class WorkerServiceImpl;

// PEM files of the scheduler's TLS, on the gRPC and the HTTP port.
struct TlsFiles {
  std::string cert_file;  // certificate chain; with key_file, TLS is on
  std::string key_file;
  // CA bundle that signed the workers' client certificates: when set, the WorkerService needs
  // a verified client certificate as well as a worker token (mutual TLS).
  std::string client_ca_file;
  bool enabled() const { return !cert_file.empty(); }
};

struct ServerOptions {
  std::string listen_address = "127.0.0.1:50051";  // port 0 = pick a free one (tests)
  // TLS on the gRPC and HTTP ports. Without it the scheduler listens only on loopback unless
  // insecure_plaintext says otherwise: bearer tokens would cross the network in clear.
  TlsFiles tls;
  bool insecure_plaintext = false;
  // The admin token that makes a fresh installation usable: `bootstrap_token` itself, or read
  // from `bootstrap_token_file`, which is created (0600, a new random token) when it does not
  // exist (server/bootstrap_token.h: a file others could read is refused). With neither and no
  // live admin token in the database, a new one goes into `default_bootstrap_token_file` (read
  // from it when it exists; an error when it is empty). The token is never logged or printed.
  // See AccessControl::Bootstrap.
  std::string bootstrap_token;
  std::string bootstrap_token_file;
  std::string default_bootstrap_token_file;
  AccessControlOptions access;
  std::string database_url;
  int pool_size = 16;
  // Every store statement is cancelled after this (PostgresRunStoreOptions::statement_timeout).
  absl::Duration statement_timeout = absl::Seconds(60);
  bool migrate_on_start = true;
  absl::Duration reap_interval = absl::Seconds(1);
  // How often the telemetry retention runs (on the reaper thread, first at start), and its policy.
  absl::Duration retention_interval = absl::Hours(1);
  RetentionPolicy retention;
  // The time the scheduler, its long polls, watches and reaper go by; null: the wall clock.
  // One passed in must outlive the server.
  const Clock* clock = nullptr;
  int max_message_bytes = 32 << 20;
  // Threads the gRPC sync server keeps waiting for calls. gRPC's default (1 to 2) makes a busy
  // server start and end a thread for nearly every call once 32 workers call at once; keeping
  // a few dozen measured +10-20% lease cycles/s (bench/scheduler/RESULTS.md).
  int grpc_min_pollers = 8;
  int grpc_max_pollers = 40;
  SchedulerOptions scheduler;
  // Prometheus GET /metrics on this "ip:port" (port 0 = pick a free one, see metrics_port());
  // empty = no separate endpoint (metrics()->Render() still works). This port has no TLS: an
  // address that does not resolve to loopback needs insecure_plaintext.
  std::string metrics_listen;
  // The web dashboard and its JSON API (server/http_server.h) on this "host:port" (port 0 = pick
  // a free one, see http_port()); empty = off.
  // The dashboard port serves GET /metrics too when there are built-in metrics (metrics()).
  std::string http_listen;
  // The web port's deadlines and connection caps (server/api/microhttpd_server.h).
  HttpLimits http_limits;
  // Several replicas may serve one database; the upkeep (reaper, outage grace, retention, sweep
  // finalisation) runs only on the elected leader, under its term (server/leadership/).
  absl::Duration leader_ttl = absl::Seconds(10);
  std::string replica_id;  // empty: hostname:pid
};

class SchedulerServer {
 public:
  // Migrates (when asked), connects, makes sure an admin token exists and starts serving.
  // UNAVAILABLE when the database cannot be reached or an address cannot be bound;
  // INVALID_ARGUMENT for plaintext on an address that does not resolve to loopback only
  // (clients::IsLoopbackAddress), or an unreadable TLS file. `observer`
  // may be null, and then the server keeps its own SchedulerMetrics (metrics()); one passed in must
  // outlive the server and excludes metrics_listen (INVALID_ARGUMENT).
  static absl::StatusOr<std::unique_ptr<SchedulerServer>> Start(
      ServerOptions options, Planner planner, SchedulerObserver* observer = nullptr);
  // Shuts down (see Shutdown) if still running.
  ~SchedulerServer();

  // The bound port (useful when listen_address asked for port 0).
  int port() const { return port_; }
  Scheduler& scheduler() { return *scheduler_; }
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
  void ReapLoop();
  // One reaper pass (outage grace first where it is due) under `fence`, logged.
  void ReapAndLog(const LeaderFence& fence);
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
  // Declared after the store it reads and before everything that reports to it (scheduler, gRPC
  // interceptors, exposer), so it is destroyed after them.
  std::unique_ptr<SchedulerMetrics> metrics_;
  std::unique_ptr<prometheus::Exposer> exposer_;  // reset in Shutdown(): frees the port
  int metrics_port_ = 0;
  std::unique_ptr<PgListener> listener_;
  std::unique_ptr<PostgresLeaderLeases> leader_leases_;
  std::unique_ptr<LeadershipMetrics> leadership_metrics_;
  std::unique_ptr<Elector> elector_;
  std::unique_ptr<PgListener> leadership_listener_;  // resignations wake the elector
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<AccessControl> access_;
  std::unique_ptr<SweepServiceImpl> sweep_service_;
  std::unique_ptr<WorkerServiceImpl> worker_service_;
  std::unique_ptr<TokenServiceImpl> token_service_;
  std::unique_ptr<grpc::Server> grpc_server_;
  int port_ = 0;
  // Declared after the scheduler and store its handlers call, so it is destroyed before them.
  std::unique_ptr<HttpServer> http_server_;
  int http_port_ = 0;
  absl::Mutex reaper_mu_;
  bool stop_reaper_ ABSL_GUARDED_BY(reaper_mu_) = false;
  absl::Notification shut_down_;
  std::thread reaper_;
  std::once_flag shutdown_once_;
};

}  // namespace parity::server
