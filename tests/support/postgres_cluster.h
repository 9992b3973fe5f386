// A throwaway PostgreSQL cluster for tests and benchmarks: a fresh data directory (initdb once
// per machine and user, as `postgres` when running as root since initdb refuses root, then
// copied for each cluster) in a temporary directory, started with fsync off on a unix socket
// plus a free loopback port, stopped and deleted on destruction. About a second to start.
// Databases are cheap: create one per test from a migrated template.
//
//   auto cluster = parity::testing::PostgresCluster::Start();   // StatusOr<unique_ptr<...>>
//   (*cluster)->CreateDatabase("t1", "parity_template");
//   std::string url = (*cluster)->ConnectionString("t1");       // for pqxx / the scheduler
//
// Binaries come from $PARITY_PG_BIN, else /usr/lib/postgresql/15/bin; $PARITY_PG_EXTRA_OPTIONS
// is appended to the server's options (diagnostics, e.g. preloading pg_stat_statements for
// scheduler_bench --pg-stats). Not thread-safe: create
// databases from one thread (tests do, in SetUp).
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace parity::testing {

class PostgresCluster {
 public:
  static absl::StatusOr<std::unique_ptr<PostgresCluster>> Start();
  ~PostgresCluster();
  PostgresCluster(const PostgresCluster&) = delete;
  PostgresCluster& operator=(const PostgresCluster&) = delete;

  // libpq keyword/value connection string for database `name` over the unix socket.
  std::string ConnectionString(const std::string& name) const;
  // The same over TCP on 127.0.0.1 (for tools that want a host:port).
  std::string TcpConnectionString(const std::string& name) const;
  int port() const { return port_; }

  // CREATE DATABASE name TEMPLATE template_name.
  absl::Status CreateDatabase(const std::string& name,
                              const std::string& template_name = "template0");
  // Runs `sql` in database `name` (admin convenience for tests).
  absl::Status Execute(const std::string& name, const std::string& sql);

 private:
  PostgresCluster() = default;
  absl::Status Init();
  absl::Status InitDataDirectory();

  std::string bin_dir_;
  std::string root_;  // temporary directory holding everything below
  std::string data_dir_;
  std::string socket_dir_;
  std::string log_file_;
  int port_ = 0;
  bool as_postgres_user_ = false;
  bool started_ = false;
};

}  // namespace parity::testing
