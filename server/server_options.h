// ServerOptions: everything a SchedulerServer is told, as one value struct — the addresses, TLS,
// the database, the reaper's and retention's intervals, the limits of the scheduling units and
// of the web port. AddFlags declares parity-scheduler's flags on it, each once, bound to the
// field it sets (with its PARITY_* variable); Validate checks the whole, each error naming the
// flag to change. SchedulerServer::Start validates too, so a test or benchmark that fills the
// struct by hand is held to the same rules.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "server/api/access_control.h"
#include "server/api/microhttpd_server.h"
#include "server/scheduling/clock.h"
#include "server/scheduling/scheduler_options.h"
#include "server/store/telemetry_retention.h"

namespace CLI {
class App;
}

namespace parity::server {

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
  std::string database_url = "postgresql:///parity";
  int pool_size = 16;
  // Every store statement is cancelled after this (PostgresRunStoreOptions::statement_timeout).
  absl::Duration statement_timeout = absl::Seconds(60);
  bool migrate_on_start = true;
  absl::Duration reap_interval = absl::Seconds(1);
  // Several replicas may serve one database; the upkeep (reaper, outage grace, retention, sweep
  // finalisation) runs only on the elected leader, under its term (server/leadership/).
  absl::Duration leader_ttl = absl::Seconds(10);
  std::string replica_id;  // empty: hostname:pid
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
  // address that does not resolve to loopback needs insecure_plaintext. Empty here; the binary's
  // default is 127.0.0.1:9464 (AddFlags).
  std::string metrics_listen;
  // The web dashboard and its JSON API (server/http_server.h) on this "host:port" (port 0 = pick
  // a free one, see http_port()); empty = off. Empty here; the binary's default is
  // 127.0.0.1:8080 (AddFlags).
  // The dashboard port serves GET /metrics too when there are built-in metrics (metrics()).
  std::string http_listen;
  // The web port's deadlines and connection caps (server/api/microhttpd_server.h).
  HttpLimits http_limits;
  // A JSON API reply is given to whoever asks for the same document within this (0 = never).
  absl::Duration http_api_reply_ttl = absl::Seconds(1);

  // Declares parity-scheduler's flags on `app`, each bound to the field it sets, whose value is
  // its default; sets the binary's defaults where they differ from a library user's (the metrics
  // and web ports on loopback, or as PARITY_METRICS_LISTEN / PARITY_HTTP_LISTEN say: read here,
  // since an empty variable means "off"). `app` must not outlive this struct. A duration flag
  // takes "30s", "1m30s", "500ms" or plain seconds; anything else fails the parse naming it.
  void AddFlags(CLI::App& app);
  // INVALID_ARGUMENT naming the flag when the options cannot serve: durations that must be
  // positive, a heartbeat interval not shorter than the lease TTL, half a TLS pair, a client CA
  // without TLS, plaintext on an address that does not resolve to loopback only.
  absl::Status Validate() const;
};

}  // namespace parity::server
