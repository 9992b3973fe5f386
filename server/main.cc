// parity-scheduler: the scheduler process.
//   parity-scheduler [serve]   migrate the database, then serve SweepService and WorkerService
//   parity-scheduler migrate   apply pending migrations and exit
// Every flag has an environment variable (PARITY_*); a flag on the command line wins. The
// server's flags are ServerOptions::AddFlags' (server/server_options.h), checked by its
// Validate(); this file adds logging and the subcommands.
#include <sys/resource.h>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/planner.h"
#include "logging/log_format.h"
#include "server/bootstrap_token.h"
#include "server/scheduler_server.h"
#include "server/server_options.h"
#include "server/store/postgres/migrations.h"
#include "spdlog/spdlog.h"

namespace {

std::atomic<int> g_signal{0};
void OnSignal(int signal) { g_signal = signal; }

// The log's flags, beside the server's.
struct LogFlags {
  std::string format = "text";
  std::string level = "info";

  void AddFlags(CLI::App& app) {
    app.add_option("--log-format", format, "text (key=value) or json")
        ->envname("PARITY_LOG_FORMAT")
        ->check(CLI::IsMember({"text", "json"}));
    app.add_option("--log-level", level, "trace, debug, info, warn, error")
        ->envname("PARITY_LOG_LEVEL");
  }
};

int Migrate(const std::string& database_url) {
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

// Serves until SIGTERM or SIGINT, then shuts down within 10 s.
int Serve(const parity::server::ServerOptions& options) {
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

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"parity-scheduler: leases Parity training runs to workers (gRPC + PostgreSQL)"};
  parity::server::ServerOptions options;
  options.AddFlags(app);
  LogFlags log;
  log.AddFlags(app);
  app.fallthrough();  // global flags may also follow the subcommand
  CLI::App* serve = app.add_subcommand("serve", "serve the gRPC API (default)");
  CLI::App* migrate = app.add_subcommand("migrate", "apply pending migrations and exit");
  app.require_subcommand(0, 1);
  CLI11_PARSE(app, argc, argv);
  (void)serve;
  if (absl::Status logging =
          parity::logging::ConfigureLogging("parity-scheduler", log.format, log.level);
      !logging.ok()) {
    std::cerr << "parity-scheduler: " << logging.message() << "\n";
    return 2;
  }
  // Debian builds Abseil without NDEBUG, which leaves absl::Mutex's deadlock detector on: every
  // lock of every mutex (gRPC's included) then goes through one process-wide graph under a
  // global spinlock. That is a debugging aid; the test builds keep it.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  if (migrate->parsed()) return Migrate(options.database_url);

  options.default_bootstrap_token_file =
      parity::server::DefaultBootstrapTokenFile(std::getenv("XDG_STATE_HOME"), std::getenv("HOME"));
  if (absl::Status valid = options.Validate(); !valid.ok()) {
    spdlog::error("event=bad_config error=\"{}\"", std::string(valid.message()));
    return 2;
  }
  return Serve(options);
}
