// parity-scheduler: the scheduler process.
//   parity-scheduler [serve]   migrate the database, then serve SweepService and WorkerService
//   parity-scheduler migrate   apply pending migrations and exit
// Every flag has an environment variable (PARITY_*); a flag on the command line wins.
#include <sys/resource.h>

#include <csignal>
#include <cstdlib>
#include <iostream>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/planner.h"
#include "logging/log_format.h"
#include "server/bootstrap_token.h"
#include "server/scheduler_server.h"
#include "server/store/postgres/migrations.h"
#include "spdlog/spdlog.h"

namespace {

// Accepts "30s", "1m30s", "500ms" or plain seconds ("30").
absl::Duration ParseDurationFlag(const std::string& text, const char* name) {
  absl::Duration duration;
  double seconds = 0;
  if (absl::ParseDuration(text, &duration)) return duration;
  if (absl::SimpleAtod(text, &seconds)) return absl::Seconds(seconds);
  std::cerr << "parity-scheduler: --" << name << ": '" << text << "' is not a duration\n";
  std::exit(2);
}

std::atomic<int> g_signal{0};
void OnSignal(int signal) { g_signal = signal; }

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"parity-scheduler: leases Parity training runs to workers (gRPC + PostgreSQL)"};
  std::string listen = "127.0.0.1:50051";
  std::string tls_cert, tls_key, tls_client_ca, bootstrap_token_file;
  bool insecure_plaintext = false;
  int32_t max_priority = 100;
  uint32_t max_open_sweeps = 100, max_watch_streams = 16;
  uint64_t max_queued_runs = 50000;
  std::string metrics_listen = "127.0.0.1:9464";
  // Read by hand: CLI11's envname ignores an empty variable, and empty means "off" here.
  if (const char* env = std::getenv("PARITY_METRICS_LISTEN"); env != nullptr) metrics_listen = env;
  std::string http_listen = "127.0.0.1:8080";
  if (const char* env = std::getenv("PARITY_HTTP_LISTEN"); env != nullptr) http_listen = env;
  std::string http_request_deadline = "10s";
  parity::server::HttpLimits http_limits;
  std::string database_url = "postgresql:///parity";
  std::string lease_ttl = "60s";
  std::string heartbeat_interval = "15s";
  std::string reap_interval = "1s";
  std::string leader_ttl = "10s", replica_id;  // several replicas: one leads the upkeep
  std::string statement_timeout = "60s";
  std::string retention_interval = "1h", metrics_retention = "720h", events_retention = "2160h",
              workers_retention = "168h";
  uint32_t thinned_points = 500;
  std::string log_format = "text";
  std::string log_level = "info";
  int pool_size = 16;
  bool no_migrate = false;
  app.add_option("--listen", listen,
                 "gRPC address host:port (default 127.0.0.1:50051; without TLS only loopback)")
      ->envname("PARITY_LISTEN");
  app.add_option("--tls-cert", tls_cert, "PEM certificate chain: TLS on the gRPC and HTTP ports")
      ->envname("PARITY_TLS_CERT");
  app.add_option("--tls-key", tls_key, "PEM private key of --tls-cert")->envname("PARITY_TLS_KEY");
  app.add_option("--tls-client-ca", tls_client_ca,
                 "PEM CA of the workers' client certificates: workers need one (mutual TLS)")
      ->envname("PARITY_TLS_CLIENT_CA");
  app.add_flag("--insecure-plaintext", insecure_plaintext,
               "allow plaintext on a non-loopback address (only behind a TLS-terminating proxy: "
               "bearer tokens would otherwise cross the network in clear)")
      ->envname("PARITY_INSECURE_PLAINTEXT");
  app.add_option("--bootstrap-token-file", bootstrap_token_file,
                 "the first admin token: read from this file (refused if others could read "
                 "it), or created in it (0600) when it does not exist; without it a first start "
                 "writes one to $XDG_STATE_HOME/parity/admin.token (~/.local/state/...)")
      ->envname("PARITY_BOOTSTRAP_TOKEN_FILE");
  app.add_option("--max-priority", max_priority,
                 "the highest sweep priority a non-admin may submit")
      ->envname("PARITY_MAX_PRIORITY");
  app.add_option("--max-open-sweeps", max_open_sweeps, "ACTIVE sweeps one identity may own at once")
      ->envname("PARITY_MAX_OPEN_SWEEPS")
      ->check(CLI::Range(1u, 1000000u));
  app.add_option("--max-queued-runs", max_queued_runs,
                 "runs not yet ended one identity may have queued")
      ->envname("PARITY_MAX_QUEUED_RUNS")
      ->check(CLI::Range(uint64_t{1}, uint64_t{100000000}));
  app.add_option("--max-watch-streams", max_watch_streams,
                 "concurrent watch streams one identity may hold")
      ->envname("PARITY_MAX_WATCH_STREAMS")
      ->check(CLI::Range(1u, 10000u));
  app.add_option(
      "--metrics-listen", metrics_listen,
      "Prometheus /metrics address ip:port, port 0 = any; empty = off (env "
      "PARITY_METRICS_LISTEN, default 127.0.0.1:9464). No TLS on this port: an address that "
      "does not resolve to loopback needs --insecure-plaintext (with TLS, scrape the HTTPS "
      "--http-listen port's /metrics instead)");
  app.add_option("--http-listen", http_listen,
                 "Web dashboard and /api/v1 JSON address host:port, port 0 = any; empty = off "
                 "(env PARITY_HTTP_LISTEN, default 127.0.0.1:8080: loopback only, set an address "
                 "to expose it)");
  app.add_option("--http-request-deadline", http_request_deadline,
                 "a web request (TLS handshake, headers, body) must arrive whole within this of "
                 "its connection's accept or previous response, or the connection is cut")
      ->envname("PARITY_HTTP_REQUEST_DEADLINE");
  app.add_option("--http-max-connections", http_limits.max_connections,
                 "open connections the web port holds at once; more are closed at accept")
      ->envname("PARITY_HTTP_MAX_CONNECTIONS")
      ->check(CLI::Range(1, 100000));
  app.add_option("--http-max-connections-per-ip", http_limits.max_connections_per_ip,
                 "open connections one client address may hold on the web port")
      ->envname("PARITY_HTTP_MAX_CONNECTIONS_PER_IP")
      ->check(CLI::Range(1, 100000));
  app.add_option("--http-threads", http_limits.threads,
                 "threads that read web requests (epoll; not one per connection) and answer them")
      ->envname("PARITY_HTTP_THREADS")
      ->check(CLI::Range(1, 256));
  app.add_option("--database-url", database_url, "libpq connection string or URL")
      ->envname("PARITY_DATABASE_URL");
  app.add_option("--lease-ttl", lease_ttl, "lease lifetime without a heartbeat")
      ->envname("PARITY_LEASE_TTL");
  app.add_option("--heartbeat-interval", heartbeat_interval, "heartbeat period told to workers")
      ->envname("PARITY_HEARTBEAT_INTERVAL");
  app.add_option("--reap-interval", reap_interval, "how often expired leases are requeued")
      ->envname("PARITY_REAP_INTERVAL");
  app.add_option("--leader-ttl", leader_ttl,
                 "the upkeep leader's lease (renewed every third of it); another replica takes "
                 "over within about this long after the leader dies")
      ->envname("PARITY_LEADER_TTL");
  app.add_option("--replica-id", replica_id,
                 "this replica's name in the leader election (default hostname:pid)")
      ->envname("PARITY_REPLICA_ID");
  app.add_option("--retention-interval", retention_interval,
                 "how often the telemetry retention runs (first at start-up)")
      ->envname("PARITY_RETENTION_INTERVAL");
  app.add_option("--metrics-retention", metrics_retention,
                 "every metric point of an ended sweep is kept this long, then its runs' curves "
                 "are thinned to --metrics-thinned-points (evaluations and the last point stay)")
      ->envname("PARITY_METRICS_RETENTION");
  app.add_option("--metrics-thinned-points", thinned_points,
                 "training points per run a thinned curve keeps")
      ->envname("PARITY_METRICS_THINNED_POINTS")
      ->check(CLI::Range(10u, 1000000u));
  app.add_option("--events-retention", events_retention,
                 "an ended sweep's run events are kept this long, then only each run's last")
      ->envname("PARITY_EVENTS_RETENTION");
  app.add_option("--workers-retention", workers_retention,
                 "a worker not seen this long (and holding no lease) is forgotten")
      ->envname("PARITY_WORKERS_RETENTION");
  app.add_option("--statement-timeout", statement_timeout,
                 "every database statement of the API is cancelled after this")
      ->envname("PARITY_STATEMENT_TIMEOUT");
  app.add_option("--db-pool-size", pool_size, "database connections")
      ->envname("PARITY_DB_POOL_SIZE");
  app.add_option("--log-format", log_format, "text (key=value) or json")
      ->envname("PARITY_LOG_FORMAT")
      ->check(CLI::IsMember({"text", "json"}));
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error")
      ->envname("PARITY_LOG_LEVEL");
  app.add_flag("--no-migrate", no_migrate, "do not apply migrations at start-up")
      ->envname("PARITY_NO_MIGRATE");
  app.fallthrough();  // global flags may also follow the subcommand
  CLI::App* serve = app.add_subcommand("serve", "serve the gRPC API (default)");
  CLI::App* migrate = app.add_subcommand("migrate", "apply pending migrations and exit");
  app.require_subcommand(0, 1);
  CLI11_PARSE(app, argc, argv);
  if (absl::Status logging =
          parity::logging::ConfigureLogging("parity-scheduler", log_format, log_level);
      !logging.ok()) {
    std::cerr << "parity-scheduler: " << logging.message() << "\n";
    return 2;
  }
  // Debian builds Abseil without NDEBUG, which leaves absl::Mutex's deadlock detector on: every
  // lock of every mutex (gRPC's included) then goes through one process-wide graph under a
  // global spinlock. That is a debugging aid; the test builds keep it.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);

  if (migrate->parsed()) {
    absl::StatusOr<parity::server::MigrationReport> report =
        parity::server::ApplyMigrations(database_url, parity::server::EmbeddedMigrations());
    if (!report.ok()) {
      spdlog::error("event=migrate_failed error=\"{}\"", report.status().ToString());
      return 1;
    }
    spdlog::info("event=migrated applied={} schema_version={}", report->applied,
                 report->current_version);
    return 0;
  }
  (void)serve;

  parity::server::ServerOptions options;
  options.listen_address = listen;
  options.tls = {tls_cert, tls_key, tls_client_ca};
  options.insecure_plaintext = insecure_plaintext;
  options.bootstrap_token_file = bootstrap_token_file;
  options.default_bootstrap_token_file =
      parity::server::DefaultBootstrapTokenFile(std::getenv("XDG_STATE_HOME"), std::getenv("HOME"));
  options.access.max_watch_streams_per_identity = static_cast<int>(max_watch_streams);
  options.scheduler.max_priority = max_priority;
  options.scheduler.max_open_sweeps_per_owner = max_open_sweeps;
  options.scheduler.max_queued_runs_per_owner = max_queued_runs;
  options.metrics_listen = metrics_listen;
  options.http_listen = http_listen;
  http_limits.request_deadline = ParseDurationFlag(http_request_deadline, "http-request-deadline");
  options.http_limits = http_limits;
  options.database_url = database_url;
  options.pool_size = pool_size;
  options.migrate_on_start = !no_migrate;
  options.reap_interval = ParseDurationFlag(reap_interval, "reap-interval");
  options.retention_interval = ParseDurationFlag(retention_interval, "retention-interval");
  options.leader_ttl = ParseDurationFlag(leader_ttl, "leader-ttl");
  options.replica_id = replica_id;
  options.statement_timeout = ParseDurationFlag(statement_timeout, "statement-timeout");
  options.retention.metrics_full = ParseDurationFlag(metrics_retention, "metrics-retention");
  options.retention.thinned_points = thinned_points;
  options.retention.events = ParseDurationFlag(events_retention, "events-retention");
  options.retention.workers = ParseDurationFlag(workers_retention, "workers-retention");
  for (const auto& [name, value] :
       {std::pair{"http-request-deadline", options.http_limits.request_deadline},
        {"retention-interval", options.retention_interval},
        {"leader-ttl", options.leader_ttl},
        {"statement-timeout", options.statement_timeout},
        {"metrics-retention", options.retention.metrics_full},
        {"events-retention", options.retention.events},
        {"workers-retention", options.retention.workers}}) {
    if (value <= absl::ZeroDuration()) {
      std::cerr << "parity-scheduler: --" << name << ": must be positive\n";
      return 2;
    }
  }
  options.scheduler.lease_ttl = ParseDurationFlag(lease_ttl, "lease-ttl");
  options.scheduler.heartbeat_interval =
      ParseDurationFlag(heartbeat_interval, "heartbeat-interval");
  if (options.scheduler.heartbeat_interval >= options.scheduler.lease_ttl) {
    spdlog::error(
        "event=bad_config error=\"heartbeat interval must be shorter than the lease TTL\"");
    return 2;
  }

  // Each web connection holds two descriptors (server/api/microhttpd_server.h): take the hard
  // limit, not the 1024 soft default, so the connection caps are what bounds them.
  if (rlimit files{}; ::getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &files);
  }
  std::signal(SIGTERM, OnSignal);
  std::signal(SIGINT, OnSignal);
  absl::StatusOr<std::unique_ptr<parity::server::SchedulerServer>> server =
      parity::server::SchedulerServer::Start(options, &parity::core::PlanSweep);
  if (!server.ok()) {
    spdlog::error("event=start_failed error=\"{}\"", server.status().ToString());
    return 1;
  }
  while (g_signal == 0) absl::SleepFor(absl::Milliseconds(100));
  spdlog::info("event=signal signal={}", g_signal.load());
  (*server)->Shutdown(absl::Seconds(10));
  return 0;
}
