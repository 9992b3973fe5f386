// scheduler_bench: the scheduler over real gRPC (loopback) and a throwaway PostgreSQL on this
// machine. Starts its own cluster and an in-process SchedulerServer, then measures:
//   1. submit: time to submit a 300-run sweep (planning stubbed: hand-built runs, store + RPC);
//   2. lease: leases/s and lease latency p50/p99 with N concurrent simulated workers, each in a
//      loop LeaseRun → CompleteRun(success) (so live runs stay ≈ N, as in production), driven
//      by the callback API so that the load generator's own threads cost little;
//   3. ingest: metric points/s in batches of 256 from W concurrent runs, sampling the process
//      RSS every million points (server and clients share the process; the clients hold no
//      growing state, so the slope is the server's).
// Usage: scheduler_bench [--workers 32] [--leases 20000] [--points 2000000] [--ingest-runs 8]
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <pqxx/pqxx>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "core/summary_check.h"
#include "parity/v1/sweep_service.grpc.pb.h"
#include "parity/v1/worker_service.grpc.pb.h"
#include "server/scheduler_server.h"
#include "server/store/postgres/migrations.h"
#include "spdlog/spdlog.h"
#include "tests/support/postgres_cluster.h"
#include "tests/support/test_tokens.h"

namespace {

using namespace parity;  // NOLINT: a benchmark main

// Stub planner: the label "runs" says how many hand-built runs (accounting filled).
absl::StatusOr<std::vector<v1::RunSpec>> BenchPlanner(const v1::SweepSpec& spec) {
  int runs = std::stoi(spec.labels().at("runs"));
  std::vector<v1::RunSpec> planned(runs);
  for (int i = 0; i < runs; ++i) {
    v1::RunSpec& run = planned[i];
    run.set_name(absl::StrCat("moe-", i));
    run.set_role(i == 0 ? v1::RUN_ROLE_DENSE_BASELINE : v1::RUN_ROLE_MOE);
    run.mutable_model()->set_architecture(v1::ARCHITECTURE_MOE);
    run.mutable_model()->set_d_model(512);
    run.mutable_model()->set_num_layers(8);
    run.mutable_model()->mutable_moe()->set_num_experts(64);
    run.mutable_model()->mutable_moe()->set_top_k(2);
    run.mutable_model()->mutable_moe()->set_expert_hidden(128);
    run.mutable_accounting()->set_params(25'000'000);
    run.mutable_accounting()->set_active_params(5'000'000);
    run.mutable_accounting()->set_activation_rate(0.2);
    run.mutable_accounting()->set_flops_per_token(3.2e7);
    run.mutable_accounting()->set_tokens(1'000'000'000);
    run.mutable_accounting()->set_unique_tokens(1'000'000'000);
    run.mutable_accounting()->set_epochs(1);
    run.set_compute_budget("C1");
    run.set_compute_multiple(1);
    run.set_data_variant("unique");
    run.mutable_resources()->set_cpu_threads(1);
  }
  return planned;
}

v1::SweepSpec Spec(const std::string& name, int runs) {
  v1::SweepSpec spec;
  spec.set_name(name);
  (*spec.mutable_labels())["runs"] = absl::StrCat(runs);
  return spec;
}

double RssMiB() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  }
  return 0;
}

// Machine-wide CPU time from /proc/stat (all processes: the scheduler, PostgreSQL and the load
// generator share the machine), in milliseconds: busy (user+nice+system+irq+softirq) and steal.
struct CpuTimes {
  double busy_ms = 0;
  double steal_ms = 0;
};
CpuTimes MachineCpu() {
  std::ifstream stat("/proc/stat");
  std::string cpu;
  double user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  stat >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal;
  const double ms_per_tick = 1000.0 / static_cast<double>(sysconf(_SC_CLK_TCK));
  return {(user + nice + system + irq + softirq) * ms_per_tick, steal * ms_per_tick};
}

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return values[std::min(values.size() - 1, static_cast<size_t>(p * values.size()))];
}

v1::Device Cpu() {
  v1::Device device;
  device.set_kind(v1::DEVICE_KIND_CPU);
  device.set_threads(4);
  return device;
}

std::string Register(v1::WorkerService::Stub& stub) {
  grpc::ClientContext context;
  v1::RegisterWorkerRequest request;
  request.set_hostname("bench");
  *request.add_devices() = Cpu();
  v1::RegisterWorkerResponse response;
  if (!stub.RegisterWorker(&context, request, &response).ok()) std::abort();
  return response.worker_id();
}

// Counts leases down and remembers the first failure; workers stop when it reaches zero.
class LeaseLoad {
 public:
  explicit LeaseLoad(int leases) : remaining_(leases) {}
  bool TakeOne() {
    absl::MutexLock lock(&mu_);
    if (remaining_ <= 0 || !failure_.empty()) return false;
    --remaining_;
    ++active_;
    return true;
  }
  void Done(const std::string& failure = "") {
    absl::MutexLock lock(&mu_);
    --active_;
    if (!failure.empty() && failure_.empty()) failure_ = failure;
  }
  void WaitUntilDone() {
    absl::MutexLock lock(&mu_);
    auto done = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
      return active_ == 0 && (remaining_ <= 0 || !failure_.empty());
    };
    mu_.Await(absl::Condition(&done));
  }
  bool failed() {
    absl::MutexLock lock(&mu_);
    return !failure_.empty();
  }
  std::string failure() {
    absl::MutexLock lock(&mu_);
    return failure_;
  }

 private:
  absl::Mutex mu_;
  int remaining_ ABSL_GUARDED_BY(mu_);
  int active_ ABSL_GUARDED_BY(mu_) = 0;
  std::string failure_ ABSL_GUARDED_BY(mu_);
};

// One worker looping LeaseRun (wait 0) → CompleteRun(success) through the callback API.
class SimulatedWorker {
 public:
  SimulatedWorker(std::unique_ptr<v1::WorkerService::Stub> stub, std::string worker_id)
      : stub_(std::move(stub)), worker_id_(std::move(worker_id)) {}

  void Start(LeaseLoad& load) {
    load_ = &load;
    NextLease();
  }
  const std::vector<double>& lease_ms() const { return lease_ms_; }

 private:
  void NextLease() {
    if (!load_->TakeOne()) return;
    context_ = std::make_unique<grpc::ClientContext>();
    lease_request_.Clear();
    lease_request_.set_worker_id(worker_id_);
    *lease_request_.add_free_devices() = Cpu();
    leased_.Clear();
    start_ = absl::Now();
    stub_->async()->LeaseRun(context_.get(), &lease_request_, &leased_,
                             [this](grpc::Status status) { OnLeased(std::move(status)); });
  }

  void OnLeased(grpc::Status status) {
    lease_ms_.push_back(absl::ToDoubleMilliseconds(absl::Now() - start_));
    if (!status.ok() || !leased_.has_lease()) {
      load_->Done(absl::StrCat("LeaseRun: code ", status.error_code(), " ", status.error_message(),
                               leased_.has_lease() ? "" : " (no run)"));
      return;
    }
    context_ = std::make_unique<grpc::ClientContext>();
    complete_.Clear();
    complete_.set_run_id(leased_.run().run_id());
    complete_.set_lease_epoch(leased_.lease().lease_epoch());
    complete_.set_lease_secret(leased_.lease_secret());
    // What an honest engine reports: the scheduler refuses a summary off the plan.
    *complete_.mutable_success() = core::PlannedSummary(leased_.run().spec(), 1.0, 1.0);
    done_.Clear();
    stub_->async()->CompleteRun(context_.get(), &complete_, &done_,
                                [this](grpc::Status status) { OnCompleted(std::move(status)); });
  }

  void OnCompleted(grpc::Status status) {
    if (!status.ok()) {
      load_->Done(absl::StrCat("CompleteRun: ", status.error_message()));
      return;
    }
    load_->Done();
    NextLease();
  }

  std::unique_ptr<v1::WorkerService::Stub> stub_;
  const std::string worker_id_;
  LeaseLoad* load_ = nullptr;
  std::unique_ptr<grpc::ClientContext> context_;
  v1::LeaseRunRequest lease_request_;
  v1::LeaseRunResponse leased_;
  v1::CompleteRunRequest complete_;
  v1::CompleteRunResponse done_;
  absl::Time start_;
  std::vector<double> lease_ms_;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"scheduler benchmarks over gRPC + PostgreSQL"};
  int workers = 32, leases = 20000, ingest_runs = 8, submits = 10, channel_count = 4;
  int64_t points = 2'000'000;
  app.add_option("--workers", workers, "concurrent simulated workers for the lease benchmark");
  app.add_option("--leases", leases, "leases to measure");
  app.add_option("--channels", channel_count,
                 "client channels (connections) the simulated workers share");
  app.add_option("--points", points, "metric points to ingest");
  app.add_option("--ingest-runs", ingest_runs, "concurrent runs reporting metrics");
  app.add_option("--submits", submits, "300-run sweeps to submit");
  bool pg_stats = false;
  app.add_flag("--pg-stats", pg_stats,
               "print where PostgreSQL spent the lease phase (pg_stat_statements, nested "
               "statements too; needs PARITY_PG_EXTRA_OPTIONS='-c "
               "shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track=all')");
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::warn);
  // As parity-scheduler's main does (server/main.cc says why).
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);

  absl::StatusOr<std::unique_ptr<parity::testing::PostgresCluster>> cluster =
      parity::testing::PostgresCluster::Start();
  if (!cluster.ok()) {
    std::fprintf(stderr, "%s\n", cluster.status().ToString().c_str());
    return 1;
  }
  if (!(*cluster)->CreateDatabase("bench").ok()) return 1;
  server::ServerOptions options;
  options.listen_address = "127.0.0.1:0";
  options.bootstrap_token = parity::testing::kTestAdminToken;
  options.database_url = (*cluster)->ConnectionString("bench");
  options.pool_size = workers + 4;
  options.scheduler.lease_ttl = absl::Minutes(10);
  absl::StatusOr<std::unique_ptr<server::SchedulerServer>> server =
      server::SchedulerServer::Start(options, &BenchPlanner);
  if (!server.ok()) {
    std::fprintf(stderr, "%s\n", server.status().ToString().c_str());
    return 1;
  }
  const std::string target = absl::StrCat("127.0.0.1:", (*server)->port());
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (int i = 0; i < channel_count; ++i) {
    grpc::ChannelArguments args;
    args.SetInt("bench_channel", i);  // distinct channels → distinct connections
    channels.push_back(
        parity::testing::TokenChannel((*server)->port(), parity::testing::kTestAdminToken, args));
  }
  auto sweeps = v1::SweepService::NewStub(channels[0]);

  // --- 1. submit a 300-run sweep ---
  std::vector<double> submit_ms;
  for (int i = 0; i < submits; ++i) {
    grpc::ClientContext context;
    v1::SubmitSweepRequest request;
    *request.mutable_spec() = Spec(absl::StrCat("submit-", i), 300);
    v1::SubmitSweepResponse response;
    const absl::Time start = absl::Now();
    const grpc::Status status = sweeps->SubmitSweep(&context, request, &response);
    submit_ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - start));
    if (!status.ok() || response.run_ids_size() != 300) {
      std::fprintf(stderr, "submit failed: %s\n", status.error_message().c_str());
      return 1;
    }
  }
  std::printf("submit_300_runs_ms p50=%.1f min=%.1f max=%.1f (n=%d)\n", Percentile(submit_ms, 0.5),
              *std::min_element(submit_ms.begin(), submit_ms.end()),
              *std::max_element(submit_ms.begin(), submit_ms.end()), submits);

  // --- 2. leases: N workers looping LeaseRun → CompleteRun ---
  for (int submitted = 0; submitted < leases + workers * 4; submitted += 1000) {
    grpc::ClientContext context;
    v1::SubmitSweepRequest request;
    *request.mutable_spec() = Spec(absl::StrCat("lease-", submitted), 1000);
    v1::SubmitSweepResponse response;
    if (!sweeps->SubmitSweep(&context, request, &response).ok()) return 1;
  }
  // Each simulated worker is a chain of callbacks on gRPC's completion threads (LeaseRun, then
  // CompleteRun, then the next LeaseRun), not an OS thread of its own: 32 blocked client
  // threads would spend the two cores on context switches that belong to no scheduler.
  std::vector<std::unique_ptr<SimulatedWorker>> simulated;
  for (int w = 0; w < workers; ++w) {
    auto stub = v1::WorkerService::NewStub(channels[w % channels.size()]);
    const std::string worker_id = Register(*stub);
    simulated.push_back(std::make_unique<SimulatedWorker>(std::move(stub), worker_id));
  }
  if (pg_stats) {
    pqxx::connection c((*cluster)->ConnectionString("bench"));
    pqxx::nontransaction tx(c);
    tx.exec("CREATE EXTENSION IF NOT EXISTS pg_stat_statements");
    tx.exec("SELECT pg_stat_statements_reset()");
  }
  LeaseLoad load(leases);
  // For profilers attached from outside: the lease phase starts now.
  std::fprintf(stderr, "lease phase: starting (%d workers)\n", workers);
  const absl::Time lease_start = absl::Now();
  const CpuTimes cpu_start = MachineCpu();
  for (auto& worker : simulated) worker->Start(load);
  load.WaitUntilDone();
  if (load.failed()) {
    std::fprintf(stderr, "lease benchmark failed: %s\n", load.failure().c_str());
    return 1;
  }
  std::vector<double> lease_ms;
  for (auto& worker : simulated) {
    lease_ms.insert(lease_ms.end(), worker->lease_ms().begin(), worker->lease_ms().end());
  }
  const double lease_seconds = absl::ToDoubleSeconds(absl::Now() - lease_start);
  const CpuTimes cpu_end = MachineCpu();
  std::printf(
      "lease workers=%d leases=%zu cycles_per_s=%.0f (lease+complete) lease_p50_ms=%.2f "
      "lease_p99_ms=%.2f machine_cpu_us_per_cycle=%.0f steal_pct=%.1f\n",
      workers, lease_ms.size(), lease_ms.size() / lease_seconds, Percentile(lease_ms, 0.5),
      Percentile(lease_ms, 0.99), 1000.0 * (cpu_end.busy_ms - cpu_start.busy_ms) / lease_ms.size(),
      100.0 * (cpu_end.steal_ms - cpu_start.steal_ms) /
          (lease_seconds * 1000.0 * sysconf(_SC_NPROCESSORS_ONLN)));

  if (pg_stats) {
    pqxx::connection c((*cluster)->ConnectionString("bench"));
    pqxx::nontransaction tx(c);
    for (const auto& row :
         tx.exec("SELECT calls, total_exec_time, mean_exec_time, rows, "
                 "left(regexp_replace(query, '\\s+', ' ', 'g'), 100) FROM pg_stat_statements "
                 "ORDER BY total_exec_time DESC LIMIT 15")) {
      std::printf("pg calls=%-7s total_ms=%-9.0f mean_ms=%-7.3f rows=%-7s %s\n", row[0].c_str(),
                  row[1].as<double>(), row[2].as<double>(), row[3].c_str(), row[4].c_str());
    }
  }

  // --- 3. metrics ingestion in batches of 256 ---
  {
    grpc::ClientContext context;
    v1::SubmitSweepRequest request;
    *request.mutable_spec() = Spec("ingest", ingest_runs);
    v1::SubmitSweepResponse response;
    if (!sweeps->SubmitSweep(&context, request, &response).ok()) return 1;
  }
  const int64_t per_run = points / ingest_runs;
  std::vector<std::thread> threads;
  std::atomic<int64_t> ingested{0};
  std::vector<std::pair<int64_t, double>> rss_samples = {{0, RssMiB()}};
  std::atomic<bool> ingest_done{false};
  std::thread sampler([&] {
    int64_t next = 1'000'000;
    while (!ingest_done) {
      if (ingested >= next) {
        rss_samples.emplace_back(ingested.load(), RssMiB());
        next += 1'000'000;
      }
      absl::SleepFor(absl::Milliseconds(20));
    }
  });
  const absl::Time ingest_start = absl::Now();
  for (int r = 0; r < ingest_runs; ++r) {
    threads.emplace_back([&, r] {
      auto stub = v1::WorkerService::NewStub(channels[r % channels.size()]);
      const std::string worker_id = Register(*stub);
      grpc::ClientContext context;
      v1::LeaseRunRequest lease_request;
      lease_request.set_worker_id(worker_id);
      *lease_request.add_free_devices() = Cpu();
      lease_request.mutable_wait_time()->set_seconds(5);
      v1::LeaseRunResponse leased;
      if (!stub->LeaseRun(&context, lease_request, &leased).ok() || !leased.has_lease()) {
        std::fprintf(stderr, "ingest lease failed\n");
        return;
      }
      for (int64_t step = 0; step < per_run; step += 256) {
        v1::ReportMetricsRequest request;
        request.set_run_id(leased.run().run_id());
        request.set_lease_epoch(leased.lease().lease_epoch());
        request.set_lease_secret(leased.lease_secret());
        for (int64_t s = step; s < std::min(step + 256, per_run); ++s) {
          v1::MetricPoint* p = request.add_points();
          p->set_step(s);
          p->set_attempt(1);
          p->set_tokens(s * 4096);
          p->set_unique_tokens(s * 4096);
          p->set_epoch(0.5);
          p->set_train_bpc(1.5);
          p->set_learning_rate(1e-3);
          p->set_grad_norm(0.8);
          p->set_tokens_per_second(1e5);
          p->set_flops_per_second(1e12);
          p->set_flops(s * 1e9);
          if (s % 100 == 0) p->set_val_bpc(1.6);
        }
        grpc::ClientContext metrics_context;
        v1::ReportMetricsResponse response;
        const grpc::Status status = stub->ReportMetrics(&metrics_context, request, &response);
        if (!status.ok()) {
          std::fprintf(stderr, "metrics failed: %s\n", status.error_message().c_str());
          return;
        }
        ingested += response.accepted();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const double ingest_seconds = absl::ToDoubleSeconds(absl::Now() - ingest_start);
  ingest_done = true;
  sampler.join();
  rss_samples.emplace_back(ingested.load(), RssMiB());
  std::printf("ingest points=%ld runs=%d batch=256 points_per_s=%.0f seconds=%.1f\n",
              static_cast<long>(ingested.load()), ingest_runs, ingested / ingest_seconds,
              ingest_seconds);
  for (const auto& [count, rss] : rss_samples) {
    std::printf("rss points=%ld rss_mib=%.1f\n", static_cast<long>(count), rss);
  }
  if (rss_samples.size() >= 3) {
    const auto& a = rss_samples[1];
    const auto& b = rss_samples.back();
    if (b.first > a.first) {
      std::printf("rss_slope_mib_per_million_points=%.2f (from %ld to %ld points)\n",
                  (b.second - a.second) / ((b.first - a.first) / 1e6), static_cast<long>(a.first),
                  static_cast<long>(b.first));
    }
  }
  (*server)->Shutdown(absl::Seconds(2));
  return 0;
}
