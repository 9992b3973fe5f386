// A whole Parity stack inside one test: a throwaway PostgreSQL database (tests/support), the
// real parity-scheduler, and parity-worker processes, each in its own process group so a test can
// SIGKILL a worker with its engines, restart the scheduler or stop the database.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "parity/v1/sweep_service.grpc.pb.h"
#include "parity/v1/worker_service.grpc.pb.h"
#include "worker/child_process.h"

namespace parity::e2e {

struct StackOptions {
  std::string scheduler_bin;
  std::string worker_bin;
  std::string engine_bin;
  // Scheduler timings, short so that tests are fast.
  std::string lease_ttl = "3s";
  std::string heartbeat_interval = "500ms";
  std::string reap_interval = "500ms";
  // The workers' --threads (a gang's ranks on one worker need one each).
  std::string worker_threads = "1";
  // Extra environment for the workers (inherited by their engines, e.g. FAKE_STEP_MS).
  std::vector<std::pair<std::string, std::string>> worker_env = {};
  // TLS on the scheduler's ports, with a CA and certificate made in root/tls (openssl); the
  // stack's own channel and the workers verify against root/tls/ca.pem.
  bool tls = false;
  // Scheduler replicas on one database (issue #25): each on its own port, named replica-N,
  // electing one leader for upkeep with this lease; workers and the stack's channel get them all.
  int replicas = 1;
  std::string leader_ttl = "2s";
  // Extra environment for the scheduler (its flags' PARITY_* names, e.g.
  // PARITY_GANG_RENDEZVOUS_TIMEOUT).
  std::vector<std::pair<std::string, std::string>> scheduler_env = {};
};

// Not thread-safe: one test thread drives it.
class LocalStack {
 public:
  // `database_url`: a migrated database; `root`: an empty scratch directory.
  static absl::StatusOr<std::unique_ptr<LocalStack>> Start(StackOptions options,
                                                           std::string database_url,
                                                           std::string root);
  ~LocalStack();

  absl::Status StartScheduler() { return StartReplica(0); }
  // SIGTERM and wait (the scheduler drains in-flight calls), every replica.
  void StopScheduler();
  // Replica `index` (0 = the first, which StartScheduler starts; its log is scheduler.log, the
  // others' scheduler-N.log), and kill -9 of one.
  absl::Status StartReplica(int index);
  void KillReplica(int index);
  // The worker authenticates with the admin token (root/admin.token) unless `token_file` names
  // another.
  absl::Status StartWorker(int index, const std::string& token_file = "");
  // kill -9 of the worker's process group; its engines die with it (PR_SET_PDEATHSIG).
  void KillWorker(int index);
  // SIGTERM: the worker preempts its runs and exits.
  worker::ExitStatus StopWorker(int index);
  // pg_ctl stop -m fast / start of the cluster that serves database_url.
  absl::Status StopPostgres();
  absl::Status StartPostgres();

  parity::v1::SweepService::Stub& sweeps() { return *sweeps_; }
  // The worker API over the same channel and admin token (a test acting as a worker).
  parity::v1::WorkerService::Stub& worker_api() { return *worker_api_; }
  // Submits the sweep `yaml` (core::ParseSweepSpec) through `via` (default sweeps()): its id,
  // or "" after recording a test failure (ADD_FAILURE) that names why.
  std::string Submit(const std::string& yaml, parity::v1::SweepService::Stub* via = nullptr);
  // The sweep's runs (one page of 100), or none when the call fails.
  std::vector<parity::v1::Run> Runs(const std::string& sweep_id);
  const std::string& root() const { return root_; }
  // 127.0.0.1:PORT of the (first) scheduler's gRPC port, of replica `index`, and every
  // replica's as a comma-separated list (what the workers and sweeps() are given).
  std::string address() const { return replica_address(0); }
  std::string replica_address(int index) const;
  std::string addresses() const;
  // The admin token's file, and the CA of the scheduler's certificate (with tls).
  std::string admin_token_file() const { return root_ + "/admin.token"; }
  std::string tls_ca_file() const { return root_ + "/tls/ca.pem"; }
  // psql -tA over the stack's database: rows as text lines.
  absl::StatusOr<std::vector<std::string>> Query(const std::string& sql) const;
  // Last lines of a log under root (scheduler.log, worker-N.log) for failure messages.
  std::string LogTail(const std::string& name) const;

 private:
  LocalStack(StackOptions options, std::string database_url, std::string root)
      : options_(std::move(options)),
        database_url_(std::move(database_url)),
        root_(std::move(root)) {}

  StackOptions options_;
  std::string database_url_;
  std::string root_;
  std::vector<int> ports_;  // one per replica
  std::string pg_data_dir_, pg_socket_dir_, pg_port_;
  std::vector<std::unique_ptr<worker::ChildProcess>> schedulers_;  // one per replica
  std::vector<std::unique_ptr<worker::ChildProcess>> workers_;
  std::unique_ptr<parity::v1::SweepService::Stub> sweeps_;
  std::unique_ptr<parity::v1::WorkerService::Stub> worker_api_;
};

// A client context whose deadline is `seconds` from now.
std::unique_ptr<grpc::ClientContext> Deadline(int seconds = 30);

// A deterministic text corpus of about `bytes` bytes (words from a small vocabulary).
std::string SyntheticCorpus(size_t bytes);

// Polls `done` every 100 ms until it returns true or `timeout` passes; returns its last value.
template <typename F>
bool WaitUntil(F done, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (done()) return true;
    absl::SleepFor(absl::Milliseconds(100));
  }
  return done();
}

}  // namespace parity::e2e
