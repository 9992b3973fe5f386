// SchedulerServer: the assembled scheduler process — store, LISTEN thread, scheduler, reaper
// thread and the gRPC server with health checking and reflection. `parity-scheduler serve`, the
// end-to-end tests and the benchmarks all start it the same way.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "server/retry_policy.h"
#include "server/scheduler.h"

namespace grpc {
class Server;
}

namespace parity::server {

class PostgresRunStore;
class PgListener;
class SweepServiceImpl;
class WorkerServiceImpl;

struct ServerOptions {
  std::string listen_address = "0.0.0.0:50051";  // port 0 = pick a free one (tests)
  std::string database_url;
  int pool_size = 16;
  bool migrate_on_start = true;
  absl::Duration reap_interval = absl::Seconds(1);
  int max_message_bytes = 32 << 20;
  RetryPolicy retry_policy;
  SchedulerOptions scheduler;
};

class SchedulerServer {
 public:
  // Migrates (when asked), connects and starts serving. UNAVAILABLE when the database cannot be
  // reached or the address cannot be bound. `observer` may be null; it must outlive the server.
  static absl::StatusOr<std::unique_ptr<SchedulerServer>> Start(
      ServerOptions options, Planner planner, SchedulerObserver* observer = nullptr);
  // Shuts down (see Shutdown) if still running.
  ~SchedulerServer();

  // The bound port (useful when listen_address asked for port 0).
  int port() const { return port_; }
  Scheduler& scheduler() { return *scheduler_; }

  // Stops taking calls, ends long polls and watch streams, waits up to `grace` for calls in
  // flight, then stops the reaper and the listener. Idempotent.
  void Shutdown(absl::Duration grace = absl::Seconds(5));
  // Blocks until Shutdown() has finished.
  void Wait();

 private:
  SchedulerServer() = default;
  void ReapLoop();

  ServerOptions options_;
  RealClock clock_;
  WorkSignal work_signal_;
  std::atomic<bool> stopping_{false};
  std::unique_ptr<PostgresRunStore> store_;
  std::unique_ptr<PgListener> listener_;
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<SweepServiceImpl> sweep_service_;
  std::unique_ptr<WorkerServiceImpl> worker_service_;
  std::unique_ptr<grpc::Server> grpc_server_;
  int port_ = 0;
  absl::Notification stop_reaper_;
  absl::Notification shut_down_;
  std::thread reaper_;
  std::once_flag shutdown_once_;
};

}  // namespace parity::server
