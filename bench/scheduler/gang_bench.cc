// gang_bench: the gang lease (issue #27) over real gRPC (loopback) and a throwaway PostgreSQL,
// no engine. Starts its own cluster and an in-process SchedulerServer, registers N simulated
// workers that long-poll LeaseRun with accepts_gangs (each offers 4 CPU threads and 8 GPUs), and
// measures, per gang shape:
//   - grant latency: from the gang becoming placeable (its SubmitSweep answered) to the last of
//     its ranks' workers holding its slot (the LeaseRun answer arriving at the client);
//   - rendezvous release latency: from rank 0's worker calling PostRendezvous to the last
//     CheckInRendezvous answered `released` (the other ranks poll every --rendezvous-poll-ms);
//   - throughput: gangs placed per second when a sweep of many gangs is submitted at once, each
//     gang's full cycle (placement, rendezvous, rank 0's CompleteRun) included;
// and, in the same run and on the same parked workers, the ordinary 1-rank run's latency from
// placeable to held. Gangs in the latency phase go one at a time onto an idle parked fleet.
// Usage: gang_bench [--workers 32] [--samples 15] [--throughput-gangs 40] [--shapes cpu2,cpu4,gpu8]
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <random>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "bench/scheduler/gang_sim.h"
#include "parity/v1/sweep_service.grpc.pb.h"
#include "parity/v1/worker_service.grpc.pb.h"
#include "server/scheduler_server.h"
#include "spdlog/spdlog.h"
#include "tests/support/postgres_cluster.h"
#include "tests/support/test_tokens.h"

namespace {

using namespace parity;              // NOLINT: a benchmark main
using namespace parity::gang_bench;  // NOLINT

// What a submitted run asks: `ranks` ranks (1 = an ordinary run) of a whole worker each — 4 CPU
// threads (cpu) or 8 GPUs (gpu) — so that a gang of R ranks spans R workers.
struct Shape {
  std::string name;
  int ranks = 1;
  bool gpu = false;
};

absl::StatusOr<Shape> ParseShape(const std::string& text) {
  Shape shape{text, 1, false};
  std::string count;
  if (text.rfind("cpu", 0) == 0) {
    count = text.substr(3);
  } else if (text.rfind("gpu", 0) == 0) {
    shape.gpu = true;
    count = text.substr(3);
  }
  if (count.empty() || !absl::SimpleAtoi(count, &shape.ranks) || shape.ranks < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--shapes: \"", text, "\" is not cpuN or gpuN with N ≥ 2 ranks (e.g. cpu2,cpu4,gpu8)"));
  }
  return shape;
}

// Stub planner: labels "runs", "ranks", "gpu" say how many hand-built runs of which shape.
absl::StatusOr<std::vector<v1::RunSpec>> BenchPlanner(const v1::SweepSpec& spec) {
  const int runs = std::stoi(spec.labels().at("runs"));
  const int ranks = std::stoi(spec.labels().at("ranks"));
  const bool gpu = spec.labels().at("gpu") == "1";
  std::vector<v1::RunSpec> planned(runs);
  for (int i = 0; i < runs; ++i) {
    v1::RunSpec& run = planned[i];
    run.set_name(absl::StrCat("gang-", i));
    run.set_role(v1::RUN_ROLE_DENSE_BASELINE);
    run.mutable_model()->set_architecture(v1::ARCHITECTURE_DENSE);
    run.mutable_model()->set_d_model(512);
    run.mutable_model()->set_num_layers(8);
    run.mutable_accounting()->set_params(25'000'000);
    run.mutable_accounting()->set_active_params(25'000'000);
    run.mutable_accounting()->set_activation_rate(1.0);
    run.mutable_accounting()->set_flops_per_token(1.5e8);
    run.mutable_accounting()->set_tokens(1'000'000'000);
    run.mutable_accounting()->set_unique_tokens(1'000'000'000);
    run.mutable_accounting()->set_epochs(1);
    run.set_compute_budget("C1");
    run.set_compute_multiple(1);
    run.set_data_variant("unique");
    v1::ResourceRequest* resources = run.mutable_resources();
    if (ranks == 1) {
      resources->set_cpu_threads(1);
    } else if (gpu) {
      resources->set_ranks(ranks);
      resources->set_gpus(ranks * kWorkerGpus);
    } else {
      resources->set_ranks(ranks);
      resources->set_cpu_threads(kWorkerThreads);
    }
  }
  return planned;
}

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return values[std::min(values.size() - 1, static_cast<size_t>(p * values.size()))];
}

std::string LoadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string one, five;
  in >> one >> five;
  return absl::StrCat(one, "/", five);
}

class Bench {
 public:
  Bench(std::shared_ptr<grpc::Channel> channel, Tracker& tracker, double idle_poll_ms)
      : sweeps_(v1::SweepService::NewStub(channel)),
        tracker_(tracker),
        idle_poll_ms_(idle_poll_ms) {}

  // Submits `runs` runs of `shape` as one sweep; their ids and when the answer came.
  absl::StatusOr<std::vector<std::string>> Submit(const Shape& shape, int runs,
                                                  absl::Time& placeable) {
    grpc::ClientContext context;
    v1::SubmitSweepRequest request;
    request.mutable_spec()->set_name(absl::StrCat(shape.name, "-", ++sweeps_submitted_));
    auto& labels = *request.mutable_spec()->mutable_labels();
    labels["runs"] = absl::StrCat(runs);
    labels["ranks"] = absl::StrCat(shape.ranks);
    labels["gpu"] = shape.gpu ? "1" : "0";
    v1::SubmitSweepResponse response;
    const grpc::Status status = sweeps_->SubmitSweep(&context, request, &response);
    placeable = absl::Now();
    if (!status.ok()) return absl::UnavailableError("SubmitSweep: " + status.error_message());
    return std::vector<std::string>(response.run_ids().begin(), response.run_ids().end());
  }

  // One run at a time onto the idle parked fleet: placeable → held, and the rendezvous.
  absl::Status Latency(const Shape& shape, int samples, std::mt19937& rng) {
    std::vector<double> grant_ms, release_ms;
    for (int i = 0; i < samples; ++i) {
      // A random gap, so that submissions fall at every phase of the idle polls' re-checks.
      absl::SleepFor(absl::Milliseconds(std::uniform_int_distribution<int>(0, 100)(rng)));
      absl::Time placeable;
      absl::StatusOr<std::vector<std::string>> ids = Submit(shape, 1, placeable);
      if (!ids.ok()) return ids.status();
      if (!tracker_.AwaitCompleted(*ids, absl::Seconds(30))) {
        return absl::DeadlineExceededError(
            absl::StrCat(shape.name, ": run ", ids->front(), " not completed within 30 s"));
      }
      const Trace t = tracker_.Get(ids->front());
      if (!t.failure.empty()) return absl::InternalError(t.failure);
      grant_ms.push_back(absl::ToDoubleMilliseconds(t.last_slot - placeable));
      if (shape.ranks > 1) {
        release_ms.push_back(absl::ToDoubleMilliseconds(t.last_release - t.post_start));
      }
    }
    // Samples that waited out an idle re-check (GangsActive's cached "no", then a park): ≥ 1 s.
    const long slow = std::count_if(grant_ms.begin(), grant_ms.end(),
                                    [&](double ms) { return ms >= idle_poll_ms_; });
    std::printf(
        "%s ranks=%d samples=%d placeable_to_held_ms p50=%.1f p90=%.1f p99=%.1f max=%.1f "
        "over_idle_poll=%ld",
        shape.ranks > 1 ? "gang" : "single", shape.ranks, samples, Percentile(grant_ms, 0.5),
        Percentile(grant_ms, 0.9), Percentile(grant_ms, 0.99),
        *std::max_element(grant_ms.begin(), grant_ms.end()), slow);
    if (shape.ranks > 1) {
      std::printf(" shape=%s rendezvous_release_ms p50=%.1f p99=%.1f max=%.1f", shape.name.c_str(),
                  Percentile(release_ms, 0.5), Percentile(release_ms, 0.99),
                  *std::max_element(release_ms.begin(), release_ms.end()));
    }
    std::printf(" load=%s\n", LoadAverage().c_str());
    std::fflush(stdout);
    return absl::OkStatus();
  }

  // `gangs` runs submitted at once: gangs placed per second over their full cycles.
  absl::Status Throughput(const Shape& shape, int gangs) {
    absl::Time placeable;
    absl::StatusOr<std::vector<std::string>> ids = Submit(shape, gangs, placeable);
    if (!ids.ok()) return ids.status();
    if (!tracker_.AwaitCompleted(*ids, absl::Seconds(60))) {
      return absl::DeadlineExceededError(
          absl::StrCat(shape.name, ": ", gangs, " gangs not all completed within 60 s"));
    }
    absl::Time last_placed = placeable, last_done = absl::Now();
    for (const std::string& id : *ids) {
      const Trace t = tracker_.Get(id);
      if (!t.failure.empty()) return absl::InternalError(t.failure);
      last_placed = std::max(last_placed, t.last_slot);
    }
    const double seconds = absl::ToDoubleSeconds(last_placed - placeable);
    std::printf(
        "throughput shape=%s ranks=%d gangs=%d seconds_to_last_placed=%.2f "
        "gangs_placed_per_s=%.1f seconds_to_all_completed=%.2f load=%s\n",
        shape.name.c_str(), shape.ranks, gangs, seconds, gangs / seconds,
        absl::ToDoubleSeconds(last_done - placeable), LoadAverage().c_str());
    std::fflush(stdout);
    return absl::OkStatus();
  }

 private:
  std::unique_ptr<v1::SweepService::Stub> sweeps_;
  Tracker& tracker_;
  const double idle_poll_ms_;
  int sweeps_submitted_ = 0;
};

struct Flags {
  int workers = 32, samples = 15, throughput_gangs = 40, channels = 8;
  int rendezvous_poll_ms = 10, idle_poll_ms = 1000;
  std::string shapes = "cpu2,cpu4,gpu8";
};

int Run(const Flags& f, const std::vector<Shape>& shapes) {
  absl::StatusOr<std::unique_ptr<parity::testing::PostgresCluster>> cluster =
      parity::testing::PostgresCluster::Start();
  if (!cluster.ok() || !(*cluster)->CreateDatabase("bench").ok()) {
    std::fprintf(stderr, "PostgreSQL: %s\n", cluster.status().ToString().c_str());
    return 1;
  }
  server::ServerOptions options;
  options.listen_address = "127.0.0.1:0";
  options.bootstrap_token = parity::testing::kTestAdminToken;
  options.database_url = (*cluster)->ConnectionString("bench");
  options.pool_size = 40;
  options.scheduler.lease_ttl = absl::Minutes(10);
  options.scheduler.idle_poll_interval = absl::Milliseconds(f.idle_poll_ms);
  absl::StatusOr<std::unique_ptr<server::SchedulerServer>> server =
      server::SchedulerServer::Start(options, &BenchPlanner);
  if (!server.ok()) {
    std::fprintf(stderr, "%s\n", server.status().ToString().c_str());
    return 1;
  }
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (int i = 0; i < f.channels; ++i) {
    grpc::ChannelArguments args;
    args.SetInt("bench_channel", i);  // distinct channels → distinct connections
    channels.push_back(
        parity::testing::TokenChannel((*server)->port(), parity::testing::kTestAdminToken, args));
  }
  Tracker tracker;
  std::vector<std::unique_ptr<SimulatedWorker>> workers;
  for (int w = 0; w < f.workers; ++w) {
    workers.push_back(std::make_unique<SimulatedWorker>(channels[w % channels.size()], tracker,
                                                        f.rendezvous_poll_ms));
    if (absl::Status s = workers.back()->Register(); !s.ok()) {
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      return 1;
    }
  }
  std::printf("gang_bench workers=%d idle_poll_ms=%d rendezvous_poll_ms=%d load=%s\n", f.workers,
              f.idle_poll_ms, f.rendezvous_poll_ms, LoadAverage().c_str());
  for (auto& worker : workers) worker->Start();
  absl::SleepFor(absl::Milliseconds(500));  // every worker parked
  Bench bench(channels[0], tracker, f.idle_poll_ms);
  std::mt19937 rng(27);
  absl::Status status = bench.Latency({"single", 1, false}, f.samples, rng);
  for (const Shape& shape : shapes) {
    if (status.ok()) status = bench.Latency(shape, f.samples, rng);
  }
  for (const Shape& shape : shapes) {
    if (status.ok() && f.throughput_gangs > 0 && shape.ranks <= f.workers) {
      status = bench.Throughput(shape, f.throughput_gangs);
    }
  }
  for (auto& worker : workers) worker->Stop();
  for (auto& worker : workers) worker->Join();
  (*server)->Shutdown(absl::Seconds(2));
  if (!status.ok()) {
    std::fprintf(stderr, "gang_bench failed: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"gang lease latency and throughput over gRPC + PostgreSQL"};
  Flags f;
  app.add_option("--workers", f.workers, "simulated workers parked in LeaseRun")
      ->check(CLI::Range(2, 1000));
  app.add_option("--samples", f.samples, "runs per shape in the latency phase, one at a time")
      ->check(CLI::Range(1, 10000));
  app.add_option("--throughput-gangs", f.throughput_gangs,
                 "gangs per shape submitted at once in the throughput phase (0: none)")
      ->check(CLI::Range(0, 10000));
  app.add_option("--shapes", f.shapes,
                 "gang shapes: cpuN (N ranks of 4 threads), gpuN (N ranks "
                 "of 8 GPUs), comma-separated");
  app.add_option("--channels", f.channels, "client channels (connections) the workers share")
      ->check(CLI::Range(1, 64));
  app.add_option("--rendezvous-poll-ms", f.rendezvous_poll_ms,
                 "how often a rank's worker re-asks CheckInRendezvous until released")
      ->check(CLI::Range(1, 5000));
  app.add_option("--idle-poll-ms", f.idle_poll_ms,
                 "the scheduler's idle_poll_interval (default 1000, as in production)")
      ->check(CLI::Range(10, 60000));
  CLI11_PARSE(app, argc, argv);
  std::vector<Shape> shapes;
  for (absl::string_view text : absl::StrSplit(f.shapes, ',', absl::SkipEmpty())) {
    absl::StatusOr<Shape> shape = ParseShape(std::string(text));
    if (!shape.ok()) {
      std::fprintf(stderr, "%s\n", std::string(shape.status().message()).c_str());
      return 2;
    }
    if (shape->ranks > f.workers) {
      std::fprintf(stderr, "--shapes: %s needs %d workers, --workers is %d\n", shape->name.c_str(),
                   shape->ranks, f.workers);
      return 2;
    }
    shapes.push_back(*shape);
  }
  spdlog::set_level(spdlog::level::warn);
  // As parity-scheduler's main does (server/main.cc says why).
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  return Run(f, shapes);
}
