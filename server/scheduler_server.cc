#include "server/scheduler_server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <prometheus/exposer.h>

#include <algorithm>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
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
#include "server/store/postgres/pg_notifier.h"
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

// The gRPC port's credentials: TLS from the PEM files (a client certificate requested and
// verified when client_ca_file is set), else plaintext.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> CredentialsOf(const TlsFiles& tls) {
  if (!tls.enabled()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions ssl(
      tls.client_ca_file.empty() ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                                 // Requested and verified when sent; the WorkerService then insists
                                 // on one. Clients (the CLI) connect without.
                                 : GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY);
  PARITY_ASSIGN_OR_RETURN(const std::string cert, ReadPem(tls.cert_file, "--tls-cert"));
  PARITY_ASSIGN_OR_RETURN(const std::string key, ReadPem(tls.key_file, "--tls-key"));
  ssl.pem_key_cert_pairs.push_back({key, cert});
  if (!tls.client_ca_file.empty()) {
    PARITY_ASSIGN_OR_RETURN(ssl.pem_root_certs, ReadPem(tls.client_ca_file, "--tls-client-ca"));
  }
  return grpc::SslServerCredentials(ssl);
}

}  // namespace

absl::StatusOr<std::unique_ptr<SchedulerServer>> SchedulerServer::Start(
    ServerOptions options, Planner planner, SchedulerObserver* observer) {
  PARITY_RETURN_IF_ERROR(options.Validate());
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
  server->leadership_metrics_ = std::make_unique<LeadershipMetrics>([server = server.get()] {
    return server->elector_ != nullptr && server->elector_->is_leader();
  });
  PARITY_RETURN_IF_ERROR(server->StartMetrics(observer));
  server->listener_ = std::make_unique<PgListener>(
      options.database_url, [server = server.get()] { server->work_signal_.Notify(); });
  // This replica's leases and completions wake every replica's watch feeds of their sweep, by a
  // batched NOTIFY outside the transactions (pg_notifier.h, sweep_events_observer.h).
  server->sweep_events_notifier_ =
      std::make_unique<PgNotifier>(options.database_url, kSweepEventsChannel);
  server->sweep_events_observer_ = std::make_unique<SweepEventsObserver>(
      observer, [notifier = server->sweep_events_notifier_.get()](const std::string& sweep_id) {
        notifier->Publish(sweep_id);
      });
  server->MakeServices(std::move(planner), server->sweep_events_observer_.get());
  // Any replica's notifications wake this replica's watch feeds of their sweep (sweep_feed.h).
  server->sweep_events_listener_ = std::make_unique<PgListener>(
      options.database_url,
      [sweeps = server->sweeps_.get()](const std::string& sweep_id) {
        sweeps->WakeWatchers(sweep_id);
      },
      kSweepEventsChannel);
  {
    PARITY_ASSIGN_OR_RETURN(const std::string token, BootstrapToken(options, *server->access_));
    if (!token.empty()) PARITY_RETURN_IF_ERROR(server->access_->Bootstrap(token));
  }
  server->StartElection();
  // The start-up pass, before any call is served: it records the outage that a start is (so the
  // grace's windows begin before any worker can renew a lease here). With the database away it
  // fails, and the reaper thread's first pass that succeeds records it. Only the leader reaps; a
  // replica that leads later records the outage at its first pass of the term (ReapLoop).
  if (std::optional<LeaderFence> fence = server->elector_->fence()) {
    server->ReapAndLog(*fence, Upkeep::ReapPass::kStartUp);
    server->reaped_in_term_ = fence->epoch;
  }
  PARITY_RETURN_IF_ERROR(server->StartGrpc());
  PARITY_RETURN_IF_ERROR(server->StartHttp());
  server->reaper_ = std::thread([s = server.get()] { s->ReapLoop(); });
  spdlog::info("event=serving address={} port={} metrics_port={} tls={} mtls_workers={}",
               options.listen_address, server->port_, server->metrics_port_, options.tls.enabled(),
               !options.tls.client_ca_file.empty());
  return server;
}

absl::Status SchedulerServer::StartMetrics(SchedulerObserver*& observer) {
  if (observer == nullptr) {
    // Live workers: a worker that has not called for a whole lease TTL has lost its leases too.
    metrics_ = std::make_unique<SchedulerMetrics>(
        *store_, *clock_,
        SchedulerMetricsOptions{.counts = {.live_worker_window = options_.scheduler.lease_ttl}});
    observer = metrics_.get();
  }
  if (options_.metrics_listen.empty()) return absl::OkStatus();
  if (metrics_ == nullptr) {
    return absl::InvalidArgumentError("metrics_listen needs the built-in metrics, not an observer");
  }
  PARITY_ASSIGN_OR_RETURN(exposer_, metrics_->Expose(options_.metrics_listen));
  for (const auto& collectable : leadership_metrics_->collectables()) {
    exposer_->RegisterCollectable(collectable);
  }
  // The metrics port is civetweb's (prometheus-cpp), which knows only basic auth: any user
  // name, a token of a reading role as the password.
  exposer_->RegisterAuth(
      [access = access_.get()](const std::string&, const std::string& password) {
        return access->Authorize(password, "GET /metrics").ok();
      },
      "parity");
  const std::vector<int> ports = exposer_->GetListeningPorts();
  metrics_port_ = ports.empty() ? 0 : ports.front();
  return absl::OkStatus();
}

void SchedulerServer::MakeServices(Planner planner, SchedulerObserver* observer) {
  // The one place the whole store is named: each unit gets the interfaces its job needs.
  PostgresRunStore& store = *store_;
  lease_secrets_ = std::make_unique<LeaseSecrets>(static_cast<AccessTokens&>(store));
  sweeps_ = std::make_unique<SweepsService>(store, store, work_signal_, *clock_, std::move(planner),
                                            options_.scheduler, observer);
  leases_ = std::make_unique<LeasesService>(
      store, [&store](const std::string& run_id) { return store.GetRun(run_id); }, *lease_secrets_,
      work_signal_, *clock_, options_.scheduler, observer, &store);
  SchedulerOptions upkeep = options_.scheduler;
  if (upkeep.outage_silence <= absl::ZeroDuration()) {
    // A third of the TTL, but never under three reaper intervals: a silence is an outage only
    // when passes stopped, not when the reaper is merely slow (or nothing would ever be reaped).
    upkeep.outage_silence = std::max(upkeep.lease_ttl / 3, 3 * options_.reap_interval);
  }
  upkeep_ = std::make_unique<Upkeep>(store, store, work_signal_, upkeep, observer);
  sweep_service_ = std::make_unique<SweepServiceImpl>(*sweeps_, *access_, stopping_);
  worker_service_ = std::make_unique<WorkerServiceImpl>(*leases_, *access_, stopping_,
                                                        !options_.tls.client_ca_file.empty());
  token_service_ = std::make_unique<TokenServiceImpl>(*access_);
}

absl::Status SchedulerServer::StartGrpc() {
  PARITY_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> credentials,
                          CredentialsOf(options_.tls));
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options_.listen_address, credentials, &port_);
  // Dead peers are found within a minute, and a client may not ping more often than every 10 s.
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 60'000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 20'000);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 10'000);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS, 30 * 60'000);
  builder.SetMaxReceiveMessageSize(options_.max_message_bytes);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MIN_POLLERS,
                              options_.grpc_min_pollers);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS,
                              options_.grpc_max_pollers);
  builder.RegisterService(sweep_service_.get());
  builder.RegisterService(worker_service_.get());
  builder.RegisterService(token_service_.get());
  if (metrics_ != nullptr) {
    std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> creators;
    creators.push_back(std::make_unique<RpcMetricsInterceptorFactory>(*metrics_));
    builder.experimental().SetInterceptorCreators(std::move(creators));
  }
  grpc_server_ = builder.BuildAndStart();
  if (grpc_server_ == nullptr || port_ == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", options_.listen_address));
  }
  return absl::OkStatus();
}

absl::Status SchedulerServer::StartHttp() {
  if (options_.http_listen.empty()) return absl::OkStatus();
  HttpServerOptions http{.listen = options_.http_listen,
                         .metrics_text = nullptr,
                         .tls_cert_file = options_.tls.cert_file,
                         .tls_key_file = options_.tls.key_file,
                         .limits = options_.http_limits,
                         .sessions = {},
                         .api_replies = {.ttl = options_.http_api_reply_ttl}};
  if (metrics_ != nullptr) {
    http.metrics_text = [metrics = metrics_.get(), leadership = leadership_metrics_.get()] {
      return metrics->Render() + leadership->Render();
    };
  }
  PARITY_ASSIGN_OR_RETURN(http_server_,
                          HttpServer::Start(std::move(http), *sweeps_, *store_, *access_));
  http_port_ = http_server_->port();
  return absl::OkStatus();
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
    // A new term's first pass records an outage: the old leader's passes stopped with it.
    ReapAndLog(*fence, fence->epoch != reaped_in_term_ ? Upkeep::ReapPass::kStartUp
                                                       : Upkeep::ReapPass::kRegular);
    reaped_in_term_ = fence->epoch;
    if (clock_->Now() >= next_retention) {
      RetainAndLog(*fence);
      next_retention = clock_->Now() + options_.retention_interval;
    }
  }
}

void SchedulerServer::RetainAndLog(const LeaderFence& fence) {
  absl::StatusOr<RetentionResult> retained = upkeep_->ApplyRetention(options_.retention, fence);
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

void SchedulerServer::ReapAndLog(const LeaderFence& fence, Upkeep::ReapPass pass) {
  absl::StatusOr<ReapResult> reaped = upkeep_->ReapExpiredLeases(pass, fence);
  if (!reaped.ok()) {
    spdlog::warn("event=reap_failed error=\"{}\"", reaped.status().ToString());
    return;
  }
  // Gangs whose rendezvous timed out or whose follower lapsed restart whole (each fenced by its
  // gang epoch), but not within an outage's grace: their workers could not reach us either.
  if (reaped->liveness.reap_from <= clock_->Now()) {
    if (absl::StatusOr<int> gangs = leases_->FailLapsedGangs(); !gangs.ok()) {
      spdlog::warn("event=gang_lapse_pass_failed error=\"{}\"", gangs.status().ToString());
    } else if (*gangs > 0) {
      spdlog::info("event=gangs_restarted count={}", *gangs);
    }
  }
  if (reaped->liveness.outage) {
    const absl::Time now = clock_->Now();
    spdlog::info("event=outage_grace reap_in={} uncharged_lapses_for={}",
                 absl::FormatDuration(reaped->liveness.reap_from - now),
                 absl::FormatDuration(reaped->liveness.charge_from - now));
  }
  if (reaped->requeued + reaped->failed + reaped->cancelled + reaped->outage_requeued > 0) {
    spdlog::info("event=leases_reaped requeued={} failed={} cancelled={} requeued_after_outage={}",
                 reaped->requeued, reaped->failed, reaped->cancelled, reaped->outage_requeued);
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
    sweep_events_listener_.reset();
    shut_down_.Notify();
    spdlog::info("event=stopped");
  });
}

void SchedulerServer::Wait() { shut_down_.WaitForNotification(); }

}  // namespace parity::server
