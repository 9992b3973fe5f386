#include "server/scheduler_server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <prometheus/exposer.h>

#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "clients/cpp/loopback_address.h"
#include "core/status_macros.h"
#include "server/api/grpc_services.h"
#include "server/api/http_server.h"
#include "server/api/rpc_metrics_interceptor.h"
#include "server/bootstrap_token.h"
#include "server/leadership/leadership_metrics.h"
#include "server/scheduling/scheduler_metrics.h"
#include "server/scheduling/secrets.h"
#include "server/store/postgres/migrations.h"
#include "server/store/postgres/pg_listener.h"
#include "server/store/postgres/postgres_leader_leases.h"
#include "server/store/postgres/postgres_run_store.h"
#include "spdlog/spdlog.h"

namespace parity::server {
namespace {

absl::StatusOr<std::string> ReadPem(const std::string& path, const char* flag) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in || text.str().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": cannot read '", path, "'"));
  }
  return text.str();
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

// A token the scheduler made into `file` (which must not exist yet), or the one another
// replica made into it first.
absl::StatusOr<std::string> MakeBootstrapToken(const std::string& file) {
  const std::string token = RandomSecret("parity_");
  const char* flag = "--bootstrap-token-file";
  absl::Status created = CreateBootstrapTokenFile(file, token, flag);
  if (absl::IsAlreadyExists(created)) return ReadBootstrapTokenFile(file, flag);
  if (!created.ok()) return created;
  // The file's name only: the token itself never goes to the log.
  spdlog::info("event=bootstrap_token_created file={}", file);
  return token;
}

// The bootstrap admin token (ServerOptions::bootstrap_token*), or empty when none is needed.
absl::StatusOr<std::string> BootstrapToken(const ServerOptions& options, AccessControl& access) {
  if (!options.bootstrap_token.empty()) return options.bootstrap_token;
  const std::string& file = options.bootstrap_token_file;
  if (!file.empty()) {
    absl::StatusOr<std::string> read = ReadBootstrapTokenFile(file, "--bootstrap-token-file");
    if (!absl::IsNotFound(read.status())) return read;
    return MakeBootstrapToken(file);  // even with a live admin: how a lost admin token is replaced
  }
  PARITY_ASSIGN_OR_RETURN(const bool has_admin, access.HasLiveAdmin());
  if (has_admin) return std::string();
  if (options.default_bootstrap_token_file.empty()) {
    return absl::FailedPreconditionError(
        "no admin token exists yet and there is nowhere to write one: give "
        "--bootstrap-token-file FILE (PARITY_BOOTSTRAP_TOKEN_FILE), or set HOME or "
        "XDG_STATE_HOME");
  }
  const std::string& fallback = options.default_bootstrap_token_file;
  absl::StatusOr<std::string> read = ReadBootstrapTokenFile(fallback, "--bootstrap-token-file");
  if (!absl::IsNotFound(read.status())) return read;
  return MakeBootstrapToken(fallback);
}

}  // namespace

absl::StatusOr<std::unique_ptr<SchedulerServer>> SchedulerServer::Start(
    ServerOptions options, Planner planner, SchedulerObserver* observer) {
  if (options.tls.enabled() != !options.tls.key_file.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
  }
  if (!options.tls.client_ca_file.empty() && !options.tls.enabled()) {
    return absl::InvalidArgumentError("--tls-client-ca needs --tls-cert and --tls-key");
  }
  if (!options.tls.enabled()) {
    PARITY_RETURN_IF_ERROR(CheckPlaintext("--listen", options.listen_address,
                                          options.insecure_plaintext,
                                          "give --tls-cert and --tls-key"));
    PARITY_RETURN_IF_ERROR(CheckPlaintext("--http-listen", options.http_listen,
                                          options.insecure_plaintext,
                                          "give --tls-cert and --tls-key"));
  }
  // The metrics port never has TLS (civetweb through prometheus-cpp): scrape the HTTPS
  // dashboard port's /metrics from elsewhere.
  PARITY_RETURN_IF_ERROR(CheckPlaintext(
      "--metrics-listen", options.metrics_listen, options.insecure_plaintext,
      "scrape /metrics on the dashboard port (--http-listen, HTTPS with --tls-cert) and keep "
      "this one on loopback or off (--metrics-listen '')"));
  if (options.migrate_on_start) {
    absl::StatusOr<MigrationReport> report =
        ApplyMigrations(options.database_url, EmbeddedMigrations());
    if (!report.ok()) return report.status();
    spdlog::info("event=migrated applied={} schema_version={}", report->applied,
                 report->current_version);
  }
  std::unique_ptr<SchedulerServer> server(new SchedulerServer());
  server->options_ = options;
  if (options.clock != nullptr) server->clock_ = options.clock;
  server->store_ = std::make_unique<PostgresRunStore>(
      PostgresRunStoreOptions{options.database_url, options.pool_size, options.statement_timeout});
  server->access_ =
      std::make_unique<AccessControl>(*server->store_, *server->clock_, options.access);
  if (observer == nullptr) {
    // Live workers: a worker that has not called for a whole lease TTL has lost its leases too.
    server->metrics_ = std::make_unique<SchedulerMetrics>(
        *server->store_, *server->clock_,
        SchedulerMetricsOptions{.counts = {.live_worker_window = options.scheduler.lease_ttl}});
    observer = server->metrics_.get();
  }
  server->leadership_metrics_ = std::make_unique<LeadershipMetrics>([server = server.get()] {
    return server->elector_ != nullptr && server->elector_->is_leader();
  });
  if (!options.metrics_listen.empty()) {
    if (server->metrics_ == nullptr) {
      return absl::InvalidArgumentError(
          "metrics_listen needs the built-in metrics, not an observer");
    }
    absl::StatusOr<std::unique_ptr<prometheus::Exposer>> exposer =
        server->metrics_->Expose(options.metrics_listen);
    if (!exposer.ok()) return exposer.status();
    server->exposer_ = std::move(*exposer);
    for (const auto& collectable : server->leadership_metrics_->collectables()) {
      server->exposer_->RegisterCollectable(collectable);
    }
    // The metrics port is civetweb's (prometheus-cpp), which knows only basic auth: any user
    // name, a token of a reading role as the password.
    server->exposer_->RegisterAuth(
        [access = server->access_.get()](const std::string&, const std::string& password) {
          return access->Authorize(password, "GET /metrics").ok();
        },
        "parity");
    const std::vector<int> ports = server->exposer_->GetListeningPorts();
    server->metrics_port_ = ports.empty() ? 0 : ports.front();
  }
  server->listener_ = std::make_unique<PgListener>(
      options.database_url, [server = server.get()] { server->work_signal_.Notify(); });
  server->scheduler_ =
      std::make_unique<Scheduler>(*server->store_, server->work_signal_, *server->clock_,
                                  std::move(planner), options.scheduler, observer);
  {
    PARITY_ASSIGN_OR_RETURN(const std::string token, BootstrapToken(options, *server->access_));
    if (!token.empty()) PARITY_RETURN_IF_ERROR(server->access_->Bootstrap(token));
  }
  server->StartElection();
  // The start-up pass, outage grace included, before any call is served: it must extend only the
  // leases whose workers had no scheduler to heartbeat to, never one this instance grants. With
  // the database away it fails, and the reaper thread's first pass that succeeds gives the grace.
  // Only the leader reaps; a replica that leads later gives the grace at its first pass.
  if (std::optional<LeaderFence> fence = server->elector_->fence()) server->ReapAndLog(*fence);
  server->sweep_service_ =
      std::make_unique<SweepServiceImpl>(*server->scheduler_, *server->access_, server->stopping_);
  server->worker_service_ =
      std::make_unique<WorkerServiceImpl>(*server->scheduler_, *server->access_, server->stopping_,
                                          !options.tls.client_ca_file.empty());
  server->token_service_ = std::make_unique<TokenServiceImpl>(*server->access_);

  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
  if (options.tls.enabled()) {
    grpc::SslServerCredentialsOptions ssl(
        options.tls.client_ca_file.empty()
            ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
            // Requested and verified when sent; the WorkerService then insists on one. Clients
            // (the CLI) connect without.
            : GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY);
    PARITY_ASSIGN_OR_RETURN(const std::string cert, ReadPem(options.tls.cert_file, "--tls-cert"));
    PARITY_ASSIGN_OR_RETURN(const std::string key, ReadPem(options.tls.key_file, "--tls-key"));
    ssl.pem_key_cert_pairs.push_back({key, cert});
    if (!options.tls.client_ca_file.empty()) {
      PARITY_ASSIGN_OR_RETURN(ssl.pem_root_certs,
                              ReadPem(options.tls.client_ca_file, "--tls-client-ca"));
    }
    credentials = grpc::SslServerCredentials(ssl);
  }

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.listen_address, credentials, &server->port_);
  // Dead peers are found within a minute, and a client may not ping more often than every 10 s.
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 60'000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 20'000);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 10'000);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS, 30 * 60'000);
  builder.SetMaxReceiveMessageSize(options.max_message_bytes);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MIN_POLLERS,
                              options.grpc_min_pollers);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS,
                              options.grpc_max_pollers);
  builder.RegisterService(server->sweep_service_.get());
  builder.RegisterService(server->worker_service_.get());
  builder.RegisterService(server->token_service_.get());
  if (server->metrics_ != nullptr) {
    std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> creators;
    creators.push_back(std::make_unique<RpcMetricsInterceptorFactory>(*server->metrics_));
    builder.experimental().SetInterceptorCreators(std::move(creators));
  }
  server->grpc_server_ = builder.BuildAndStart();
  if (server->grpc_server_ == nullptr || server->port_ == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", options.listen_address));
  }
  if (!options.http_listen.empty()) {
    HttpServerOptions http{.listen = options.http_listen,
                           .metrics_text = nullptr,
                           .tls_cert_file = options.tls.cert_file,
                           .tls_key_file = options.tls.key_file,
                           .limits = options.http_limits,
                           .sessions = {}};
    if (server->metrics_ != nullptr) {
      http.metrics_text = [metrics = server->metrics_.get(),
                           leadership = server->leadership_metrics_.get()] {
        return metrics->Render() + leadership->Render();
      };
    }
    absl::StatusOr<std::unique_ptr<HttpServer>> started =
        HttpServer::Start(std::move(http), *server->scheduler_, *server->store_, *server->access_);
    if (!started.ok()) return started.status();
    server->http_server_ = std::move(*started);
    server->http_port_ = server->http_server_->port();
  }
  server->reaper_ = std::thread([s = server.get()] { s->ReapLoop(); });
  spdlog::info("event=serving address={} port={} metrics_port={} tls={} mtls_workers={}",
               options.listen_address, server->port_, server->metrics_port_, options.tls.enabled(),
               !options.tls.client_ca_file.empty());
  return server;
}

SchedulerServer::~SchedulerServer() { Shutdown(); }

void SchedulerServer::StartElection() {
  leader_leases_ = std::make_unique<PostgresLeaderLeases>(PostgresLeaderLeasesOptions{
      options_.database_url, std::max(options_.leader_ttl / 3, absl::Milliseconds(100))});
  ElectorOptions election{
      .name = "upkeep",
      .leader_id = options_.replica_id.empty() ? DefaultReplicaId() : options_.replica_id,
      .ttl = options_.leader_ttl,
      .margin = absl::ZeroDuration()};
  elector_ =
      std::make_unique<Elector>(*leader_leases_, std::move(election), leadership_metrics_.get());
  elector_->Start();
  leadership_listener_ = std::make_unique<PgListener>(
      options_.database_url, [elector = elector_.get()] { elector->Wake(); }, kLeadershipChannel);
}

void SchedulerServer::ReapLoop() {
  absl::Time next_retention = clock_->Now();
  while (true) {
    {
      absl::MutexLock lock(&reaper_mu_);
      const bool* stop = &stop_reaper_;
      if (clock_->AwaitWithDeadline(reaper_mu_, absl::Condition(stop),
                                    clock_->Now() + options_.reap_interval)) {
        return;
      }
    }
    // Upkeep is the leader's: the other replicas serve calls and wait for their turn.
    const std::optional<LeaderFence> fence = elector_->fence();
    if (!fence.has_value()) continue;
    ReapAndLog(*fence);
    if (clock_->Now() >= next_retention) {
      RetainAndLog(*fence);
      next_retention = clock_->Now() + options_.retention_interval;
    }
  }
}

void SchedulerServer::RetainAndLog(const LeaderFence& fence) {
  absl::StatusOr<RetentionResult> retained = scheduler_->ApplyRetention(options_.retention, fence);
  if (!retained.ok()) {  // the next pass tries again; nothing is half-done (one transaction)
    spdlog::warn("event=retention_failed error=\"{}\"", retained.status().ToString());
    return;
  }
  if (retained->sweeps_thinned + retained->sweeps_pruned + retained->workers_deleted > 0) {
    spdlog::info(
        "event=retention sweeps_thinned={} points_deleted={} sweeps_pruned={} events_deleted={} "
        "workers_deleted={}",
        retained->sweeps_thinned, retained->points_deleted, retained->sweeps_pruned,
        retained->events_deleted, retained->workers_deleted);
  }
}

void SchedulerServer::ReapAndLog(const LeaderFence& fence) {
  absl::StatusOr<ReapResult> reaped = scheduler_->ReapExpiredLeases(fence);
  if (!reaped.ok()) {
    spdlog::warn("event=reap_failed error=\"{}\"", reaped.status().ToString());
    return;
  }
  if (reaped->extended > 0) {
    spdlog::info("event=lease_grace extended={} ttl={}", reaped->extended,
                 absl::FormatDuration(options_.scheduler.lease_ttl));
  }
  if (reaped->requeued + reaped->failed + reaped->cancelled > 0) {
    spdlog::info("event=leases_reaped requeued={} failed={} cancelled={}", reaped->requeued,
                 reaped->failed, reaped->cancelled);
  }
}

void SchedulerServer::Shutdown(absl::Duration grace) {
  std::call_once(shutdown_once_, [&] {
    spdlog::info("event=shutting_down grace_ms={}", absl::ToInt64Milliseconds(grace));
    stopping_ = true;
    work_signal_.Notify();  // wake long polls so they answer empty now
    // Stopping civetweb waits out its listener's poll (up to 2 s): let it run while gRPC drains.
    // Freed here rather than at destruction so a restart in the same process can bind the port.
    std::thread stop_exposer([this] { exposer_.reset(); });
    // Dashboard requests end first: their handlers call the scheduler and the store.
    if (http_server_ != nullptr) http_server_->Stop();
    if (grpc_server_ != nullptr) grpc_server_->Shutdown(absl::ToChronoTime(absl::Now() + grace));
    {
      absl::MutexLock lock(&reaper_mu_);
      stop_reaper_ = true;
    }
    if (reaper_.joinable()) reaper_.join();
    // After the last upkeep pass: resigning wakes another replica to take over at once.
    leadership_listener_.reset();
    if (elector_ != nullptr) elector_->Stop();
    stop_exposer.join();
    listener_.reset();
    shut_down_.Notify();
    spdlog::info("event=stopped");
  });
}

void SchedulerServer::Wait() { shut_down_.WaitForNotification(); }

}  // namespace parity::server
