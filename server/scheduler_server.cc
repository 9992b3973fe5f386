#include "server/scheduler_server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <prometheus/exposer.h>

#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "server/api/grpc_services.h"
#include "server/api/http_server.h"
#include "server/api/rpc_metrics_interceptor.h"
#include "server/scheduling/scheduler_metrics.h"
#include "server/store/postgres/migrations.h"
#include "server/store/postgres/pg_listener.h"
#include "server/store/postgres/postgres_run_store.h"
#include "spdlog/spdlog.h"

namespace parity::server {

absl::StatusOr<std::unique_ptr<SchedulerServer>> SchedulerServer::Start(
    ServerOptions options, Planner planner, SchedulerObserver* observer) {
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
  if (observer == nullptr) {
    // Live workers: a worker that has not called for a whole lease TTL has lost its leases too.
    server->metrics_ = std::make_unique<SchedulerMetrics>(
        *server->store_, *server->clock_,
        SchedulerMetricsOptions{.counts = {.live_worker_window = options.scheduler.lease_ttl}});
    observer = server->metrics_.get();
  }
  if (!options.metrics_listen.empty()) {
    if (server->metrics_ == nullptr) {
      return absl::InvalidArgumentError(
          "metrics_listen needs the built-in metrics, not an observer");
    }
    absl::StatusOr<std::unique_ptr<prometheus::Exposer>> exposer =
        server->metrics_->Expose(options.metrics_listen);
    if (!exposer.ok()) return exposer.status();
    server->exposer_ = std::move(*exposer);
    const std::vector<int> ports = server->exposer_->GetListeningPorts();
    server->metrics_port_ = ports.empty() ? 0 : ports.front();
  }
  server->listener_ = std::make_unique<PgListener>(
      options.database_url, [server = server.get()] { server->work_signal_.Notify(); });
  server->scheduler_ =
      std::make_unique<Scheduler>(*server->store_, server->work_signal_, *server->clock_,
                                  std::move(planner), options.scheduler, observer);
  // The start-up pass, outage grace included, before any call is served: it must extend only the
  // leases whose workers had no scheduler to heartbeat to, never one this instance grants. With
  // the database away it fails, and the reaper thread's first pass that succeeds gives the grace.
  server->ReapAndLog();
  server->sweep_service_ =
      std::make_unique<SweepServiceImpl>(*server->scheduler_, server->stopping_);
  server->worker_service_ =
      std::make_unique<WorkerServiceImpl>(*server->scheduler_, server->stopping_);

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.listen_address, grpc::InsecureServerCredentials(),
                           &server->port_);
  builder.SetMaxReceiveMessageSize(options.max_message_bytes);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MIN_POLLERS,
                              options.grpc_min_pollers);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS,
                              options.grpc_max_pollers);
  builder.RegisterService(server->sweep_service_.get());
  builder.RegisterService(server->worker_service_.get());
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
    HttpServerOptions http{.listen = options.http_listen, .metrics_text = nullptr};
    if (server->metrics_ != nullptr) {
      http.metrics_text = [metrics = server->metrics_.get()] { return metrics->Render(); };
    }
    absl::StatusOr<std::unique_ptr<HttpServer>> started =
        HttpServer::Start(std::move(http), *server->scheduler_, *server->store_);
    if (!started.ok()) return started.status();
    server->http_server_ = std::move(*started);
    server->http_port_ = server->http_server_->port();
  }
  server->reaper_ = std::thread([s = server.get()] { s->ReapLoop(); });
  spdlog::info("event=serving address={} port={} metrics_port={}", options.listen_address,
               server->port_, server->metrics_port_);
  return server;
}

SchedulerServer::~SchedulerServer() { Shutdown(); }

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
    ReapAndLog();
    if (clock_->Now() >= next_retention) {
      RetainAndLog();
      next_retention = clock_->Now() + options_.retention_interval;
    }
  }
}

void SchedulerServer::RetainAndLog() {
  absl::StatusOr<RetentionResult> retained = scheduler_->ApplyRetention(options_.retention);
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

void SchedulerServer::ReapAndLog() {
  absl::StatusOr<ReapResult> reaped = scheduler_->ReapExpiredLeases();
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
    stop_exposer.join();
    listener_.reset();
    shut_down_.Notify();
    spdlog::info("event=stopped");
  });
}

void SchedulerServer::Wait() { shut_down_.WaitForNotification(); }

}  // namespace parity::server
