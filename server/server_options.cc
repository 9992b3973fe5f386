#include "server/server_options.h"

#include <cstdlib>
#include <utility>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "clients/cpp/loopback_address.h"
#include "core/status_macros.h"

namespace parity::server {
namespace {

// A duration flag bound to `target`: "30s", "1m30s", "500ms" or plain seconds ("30"). A bad
// value fails the parse with exit code 2, naming the flag.
CLI::Option* AddDurationFlag(CLI::App& app, const std::string& flag, absl::Duration& target,
                             const std::string& help) {
  auto parse = [&target, flag](const std::string& text) {
    absl::Duration duration;
    double seconds = 0;
    if (absl::ParseDuration(text, &duration)) {
      target = duration;
    } else if (absl::SimpleAtod(text, &seconds)) {
      target = absl::Seconds(seconds);
    } else {
      throw CLI::ValidationError(absl::StrCat(flag, ": '", text, "' is not a duration"), 2);
    }
  };
  return app.add_option_function<std::string>(flag, std::move(parse), help);
}

// Plaintext on `address` (the port of `flag`) must stay on this machine: every address the host
// resolves to is loopback (clients::IsLoopbackAddress), unless `insecure_plaintext` says a
// TLS-terminating proxy or a private network carries it. `remedy` says how else to expose it.
absl::Status CheckPlaintext(const char* flag, const std::string& address, bool insecure_plaintext,
                            absl::string_view remedy) {
  if (address.empty() || insecure_plaintext) return absl::OkStatus();
  const absl::StatusOr<bool> loopback = clients::IsLoopbackAddress(address);
  if (loopback.ok() && *loopback) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      flag, " ", address, ": ",
      loopback.ok() ? "not a loopback address" : std::string(loopback.status().message()),
      "; without TLS this port listens only on an address that resolves to loopback (bearer "
      "tokens would cross the network in clear): ",
      remedy, ", or --insecure-plaintext behind a TLS-terminating proxy"));
}

// The addresses, TLS and the first admin token.
void AddAccessFlags(CLI::App& app, ServerOptions& o) {
  app.add_option("--listen", o.listen_address,
                 "gRPC address host:port (default 127.0.0.1:50051; without TLS only loopback)")
      ->envname("PARITY_LISTEN");
  app.add_option("--tls-cert", o.tls.cert_file,
                 "PEM certificate chain: TLS on the gRPC and HTTP ports")
      ->envname("PARITY_TLS_CERT");
  app.add_option("--tls-key", o.tls.key_file, "PEM private key of --tls-cert")
      ->envname("PARITY_TLS_KEY");
  app.add_option("--tls-client-ca", o.tls.client_ca_file,
                 "PEM CA of the workers' client certificates: workers need one (mutual TLS)")
      ->envname("PARITY_TLS_CLIENT_CA");
  app.add_flag("--insecure-plaintext", o.insecure_plaintext,
               "allow plaintext on a non-loopback address (only behind a TLS-terminating proxy: "
               "bearer tokens would otherwise cross the network in clear)")
      ->envname("PARITY_INSECURE_PLAINTEXT");
  app.add_option("--bootstrap-token-file", o.bootstrap_token_file,
                 "the first admin token: read from this file (refused if others could read "
                 "it), or created in it (0600) when it does not exist; without it a first start "
                 "writes one to $XDG_STATE_HOME/parity/admin.token (~/.local/state/...)")
      ->envname("PARITY_BOOTSTRAP_TOKEN_FILE");
}

// What one identity may hold.
void AddLimitFlags(CLI::App& app, ServerOptions& o) {
  app.add_option("--max-priority", o.scheduler.max_priority,
                 "the highest sweep priority a non-admin may submit")
      ->envname("PARITY_MAX_PRIORITY");
  app.add_option("--max-open-sweeps", o.scheduler.max_open_sweeps_per_owner,
                 "ACTIVE sweeps one identity may own at once")
      ->envname("PARITY_MAX_OPEN_SWEEPS")
      ->check(CLI::Range(1u, 1000000u));
  app.add_option("--max-queued-runs", o.scheduler.max_queued_runs_per_owner,
                 "runs not yet ended one identity may have queued")
      ->envname("PARITY_MAX_QUEUED_RUNS")
      ->check(CLI::Range(uint64_t{1}, uint64_t{100000000}));
  app.add_option("--max-watch-streams", o.access.max_watch_streams_per_identity,
                 "concurrent watch streams one identity may hold")
      ->envname("PARITY_MAX_WATCH_STREAMS")
      ->type_name("UINT")
      ->check(CLI::Range(1u, 10000u));
}

// The metrics and web ports.
void AddHttpFlags(CLI::App& app, ServerOptions& o) {
  app.add_option(
      "--metrics-listen", o.metrics_listen,
      "Prometheus /metrics address ip:port, port 0 = any; empty = off (env "
      "PARITY_METRICS_LISTEN, default 127.0.0.1:9464). No TLS on this port: an address that "
      "does not resolve to loopback needs --insecure-plaintext (with TLS, scrape the HTTPS "
      "--http-listen port's /metrics instead)");
  app.add_option("--http-listen", o.http_listen,
                 "Web dashboard and /api/v1 JSON address host:port, port 0 = any; empty = off "
                 "(env PARITY_HTTP_LISTEN, default 127.0.0.1:8080: loopback only, set an address "
                 "to expose it)");
  AddDurationFlag(app, "--http-request-deadline", o.http_limits.request_deadline,
                  "a web request (TLS handshake, headers, body) must arrive whole within this of "
                  "its connection's accept or previous response, or the connection is cut")
      ->envname("PARITY_HTTP_REQUEST_DEADLINE");
  app.add_option("--http-max-connections", o.http_limits.max_connections,
                 "open connections the web port holds at once; more are closed at accept")
      ->envname("PARITY_HTTP_MAX_CONNECTIONS")
      ->check(CLI::Range(1, 100000));
  app.add_option("--http-max-connections-per-ip", o.http_limits.max_connections_per_ip,
                 "open connections one client address may hold on the web port")
      ->envname("PARITY_HTTP_MAX_CONNECTIONS_PER_IP")
      ->check(CLI::Range(1, 100000));
  AddDurationFlag(app, "--http-api-reply-ttl", o.http_api_reply_ttl,
                  "a /api/v1 reply is given to whoever asks for the same document within this "
                  "(dashboards of one sweep then cost about one query each a second); 0s = off")
      ->envname("PARITY_HTTP_API_REPLY_TTL");
  app.add_option("--http-threads", o.http_limits.threads,
                 "threads that read web requests (epoll; not one per connection) and answer them")
      ->envname("PARITY_HTTP_THREADS")
      ->check(CLI::Range(1, 256));
}

// The database, leases, the reaper and telemetry retention.
void AddStoreFlags(CLI::App& app, ServerOptions& o) {
  app.add_option("--database-url", o.database_url, "libpq connection string or URL")
      ->envname("PARITY_DATABASE_URL");
  AddDurationFlag(app, "--lease-ttl", o.scheduler.lease_ttl, "lease lifetime without a heartbeat")
      ->envname("PARITY_LEASE_TTL");
  AddDurationFlag(app, "--heartbeat-interval", o.scheduler.heartbeat_interval,
                  "heartbeat period told to workers")
      ->envname("PARITY_HEARTBEAT_INTERVAL");
  AddDurationFlag(app, "--reap-interval", o.reap_interval, "how often expired leases are requeued")
      ->envname("PARITY_REAP_INTERVAL");
  AddDurationFlag(app, "--gang-rendezvous-timeout", o.scheduler.gang_rendezvous_timeout,
                  "a gang whose ranks have not all checked in by then is requeued")
      ->envname("PARITY_GANG_RENDEZVOUS_TIMEOUT");
  AddDurationFlag(app, "--gang-reservation-after", o.scheduler.gang_reservation_after,
                  "a gang waiting this long keeps the workers it could use from small runs")
      ->envname("PARITY_GANG_RESERVATION_AFTER");
  AddDurationFlag(app, "--retention-interval", o.retention_interval,
                  "how often the telemetry retention runs (first at start-up)")
      ->envname("PARITY_RETENTION_INTERVAL");
  AddDurationFlag(app, "--metrics-retention", o.retention.metrics_full,
                  "every metric point of an ended sweep is kept this long, then its runs' curves "
                  "are thinned to --metrics-thinned-points (evaluations and the last point stay)")
      ->envname("PARITY_METRICS_RETENTION");
  app.add_option("--metrics-thinned-points", o.retention.thinned_points,
                 "training points per run a thinned curve keeps")
      ->envname("PARITY_METRICS_THINNED_POINTS")
      ->check(CLI::Range(10u, 1000000u));
  AddDurationFlag(app, "--events-retention", o.retention.events,
                  "an ended sweep's run events are kept this long, then only each run's last")
      ->envname("PARITY_EVENTS_RETENTION");
  AddDurationFlag(app, "--workers-retention", o.retention.workers,
                  "a worker not seen this long (and holding no lease) is forgotten")
      ->envname("PARITY_WORKERS_RETENTION");
  AddDurationFlag(app, "--statement-timeout", o.statement_timeout,
                  "every database statement of the API is cancelled after this")
      ->envname("PARITY_STATEMENT_TIMEOUT");
  AddDurationFlag(app, "--leader-ttl", o.leader_ttl,
                  "the upkeep leader's lease (renewed every third of it); another replica takes "
                  "over within about this long after the leader dies")
      ->envname("PARITY_LEADER_TTL");
  app.add_option("--replica-id", o.replica_id,
                 "this replica's name in the leader election (default hostname:pid)")
      ->envname("PARITY_REPLICA_ID");
  app.add_option("--db-pool-size", o.pool_size, "database connections")
      ->envname("PARITY_DB_POOL_SIZE");
  app.add_flag_callback(
         "--no-migrate", [&o] { o.migrate_on_start = false; },
         "do not apply migrations at start-up")
      ->envname("PARITY_NO_MIGRATE");
}

}  // namespace

void ServerOptions::AddFlags(CLI::App& app) {
  // The binary serves its metrics and dashboard on loopback by default. Read by hand: CLI11's
  // envname ignores an empty variable, and empty means "off" here.
  metrics_listen = "127.0.0.1:9464";
  if (const char* env = std::getenv("PARITY_METRICS_LISTEN"); env != nullptr) metrics_listen = env;
  http_listen = "127.0.0.1:8080";
  if (const char* env = std::getenv("PARITY_HTTP_LISTEN"); env != nullptr) http_listen = env;
  AddAccessFlags(app, *this);
  AddLimitFlags(app, *this);
  AddHttpFlags(app, *this);
  AddStoreFlags(app, *this);
}

absl::Status ServerOptions::Validate() const {
  for (const auto& [flag, value] :
       {std::pair{"--http-request-deadline", http_limits.request_deadline},
        {"--retention-interval", retention_interval},
        {"--leader-ttl", leader_ttl},
        {"--gang-rendezvous-timeout", scheduler.gang_rendezvous_timeout},
        {"--gang-reservation-after", scheduler.gang_reservation_after},
        {"--statement-timeout", statement_timeout},
        {"--metrics-retention", retention.metrics_full},
        {"--events-retention", retention.events},
        {"--workers-retention", retention.workers}}) {
    if (value <= absl::ZeroDuration()) {
      return absl::InvalidArgumentError(absl::StrCat(flag, ": must be positive"));
    }
  }
  if (http_api_reply_ttl < absl::ZeroDuration() || http_api_reply_ttl > absl::Minutes(1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--http-api-reply-ttl ", absl::FormatDuration(http_api_reply_ttl),
                     ": must be within 0s (off) and 1m (the dashboard refreshes every 3s)"));
  }
  if (scheduler.heartbeat_interval >= scheduler.lease_ttl) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--heartbeat-interval ", absl::FormatDuration(scheduler.heartbeat_interval),
        ": must be shorter than --lease-ttl ", absl::FormatDuration(scheduler.lease_ttl),
        " (a worker that heartbeats less often than its lease lasts loses every lease)"));
  }
  if (tls.enabled() != !tls.key_file.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
  }
  if (!tls.client_ca_file.empty() && !tls.enabled()) {
    return absl::InvalidArgumentError("--tls-client-ca needs --tls-cert and --tls-key");
  }
  if (!tls.enabled()) {
    PARITY_RETURN_IF_ERROR(CheckPlaintext("--listen", listen_address, insecure_plaintext,
                                          "give --tls-cert and --tls-key"));
    PARITY_RETURN_IF_ERROR(CheckPlaintext("--http-listen", http_listen, insecure_plaintext,
                                          "give --tls-cert and --tls-key"));
  }
  // The metrics port never has TLS (civetweb through prometheus-cpp): scrape the HTTPS
  // dashboard port's /metrics from elsewhere.
  return CheckPlaintext(
      "--metrics-listen", metrics_listen, insecure_plaintext,
      "scrape /metrics on the dashboard port (--http-listen, HTTPS with --tls-cert) and keep "
      "this one on loopback or off (--metrics-listen '')");
}

}  // namespace parity::server
