// load_gen: the scheduler under a lab's load, through its public APIs only (gRPC and the
// dashboard's JSON API) — simulated workers, watchers and dashboard clients in one process on
// gRPC's callback API (no thread per client). README.md says what each simulates and at which
// cadence; run.sh starts PostgreSQL and the scheduler(s) and calls this.
//
//   load_gen --addresses 127.0.0.1:P[,127.0.0.1:Q] --http-ports H[,I] --token-file F
//            [--submit-runs 10000 | --sweep-id ID] [--workers 1000] [--watchers 200]
//            [--dashboards 50] [--duration 120] [--scheduler-pids A,B] [--postgres-pid C]
//            [--kill-pid B --kill-at 60]
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "bench/load/load_report.h"
#include "bench/load/sim_dashboard.h"
#include "bench/load/sim_watcher.h"
#include "bench/load/sim_worker.h"
#include "clients/cpp/scheduler_channel.h"
#include "core/spec_loader.h"

namespace {

using namespace parity;        // NOLINT: a benchmark main
using namespace parity::load;  // NOLINT

struct Flags {
  std::string addresses = "127.0.0.1:50051";
  std::string http_ports;
  std::string token_file;
  std::string sweep_id;
  int submit_runs = 10000;
  int workers = 1000, watchers = 200, dashboards = 50;
  int channels = 0;  // per address; 0 = one per worker (each real worker has its own connection)
  double duration_s = 120, ramp_s = 10, steady_from_s = 40;
  double metrics_interval_s = 3, run_time_s = 30, lease_wait_s = 20, poll_interval_s = 3;
  int points_per_report = 5, dashboard_threads = 8, analysis_every = 10;
  bool dashboard_full = false, verify = true;
  std::string dashboard_endpoints = "sweep,runs,results,curves,analysis";
  std::string scheduler_pids;
  int postgres_pid = 0, kill_pid = 0;
  double kill_at_s = 60;
};

std::vector<std::string> SplitList(const std::string& text) {
  return absl::StrSplit(text, ',', absl::SkipEmpty());
}

// A tiny planned study of `runs` runs: one MoE point and its dense baseline, runs/2 seeds.
std::string StudyYaml(int runs) {
  std::string seeds;
  for (int s = 0; s < runs / 2; ++s) absl::StrAppend(&seeds, s == 0 ? "" : ", ", s);
  return absl::StrCat(R"(name: load-)", absl::ToUnixSeconds(absl::Now()), R"(
description: load generator sweep (bench/load)
allow_undertrained: true
moe: {d_model: 64, num_layers: 2, num_heads: 4,
      moe: {layout: all-moe, total_ffn_ratio: 16, granularity: 4, router: {balance: aux_loss}}}
dense: {d_model: 128, num_layers: 2, num_heads: 8, ffn_hidden: 384}
training: {rule: explicit, learning_rate: 3e-3, batch_tokens: 64, sequence_length: 64,
           schedule: cosine, log_every_steps: 10, eval_every_steps: 50, eval_tokens: 8192,
           threads: 1}
data: {corpus: kjv, validation_fraction: 0.01}
grid:
  moe: [{target_activation_rate: 0.25}]
  compute: [{name: C1, compute_flops: 2e10}]
  data: [{name: unique, reuse: unique}]
  seeds: [)",
                      seeds, R"(]
baselines: [{name: dense-1C, compute_multiple: 1}]
resources: {cpu_threads: 1}
max_attempts: 3
)");
}

absl::StatusOr<std::string> Submit(v1::SweepService::Stub& stub, int runs) {
  absl::StatusOr<v1::SweepSpec> spec =
      core::ParseSweepSpec(StudyYaml(runs), core::SpecFormat::kYaml);
  if (!spec.ok()) return spec.status();
  v1::SubmitSweepRequest request;
  *request.mutable_spec() = *spec;
  request.set_owner("load");
  v1::SubmitSweepResponse response;
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Minutes(10)));
  const absl::Time start = absl::Now();
  const grpc::Status status = stub.SubmitSweep(&context, request, &response);
  if (!status.ok()) {
    return absl::InternalError(absl::StrCat("SubmitSweep: ", status.error_message()));
  }
  std::printf("submit runs=%d ms=%.0f sweep_id=%s\n", response.run_ids_size(),
              absl::ToDoubleMilliseconds(absl::Now() - start), response.sweep().sweep_id().c_str());
  return response.sweep().sweep_id();
}

absl::Status OpenStubs(const Flags& flags, const std::string& token, LoadEnv& env) {
  const int channels = flags.channels > 0 ? flags.channels : std::max(1, flags.workers);
  for (const std::string& address : SplitList(flags.addresses)) {
    auto& workers = env.worker_stubs.emplace_back();
    auto& sweeps = env.sweep_stubs.emplace_back();
    for (int c = 0; c < channels; ++c) {
      clients::SchedulerChannelOptions options;
      options.address = address;
      options.token = token;
      // Distinct arguments → a connection of its own, as each real worker has.
      options.args.SetInt("parity_load_channel", c);
      options.args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
      absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = MakeSchedulerChannel(options);
      if (!channel.ok()) return channel.status();
      workers.push_back(v1::WorkerService::NewStub(*channel));
      sweeps.push_back(v1::SweepService::NewStub(*channel));
    }
  }
  return absl::OkStatus();
}

std::vector<pid_t> Pids(const std::string& text) {
  std::vector<pid_t> pids;
  for (const std::string& part : SplitList(text)) {
    int pid = 0;
    if (absl::SimpleAtoi(part, &pid)) pids.push_back(pid);
  }
  return pids;
}

void AddFlags(CLI::App& app, Flags& f) {
  app.add_option("--addresses", f.addresses, "scheduler gRPC addresses, comma-separated");
  app.add_option("--http-ports", f.http_ports, "dashboard HTTP ports on 127.0.0.1, one a replica");
  app.add_option("--token-file", f.token_file, "file holding the admin bearer token")->required();
  app.add_option("--sweep-id", f.sweep_id, "load an existing sweep instead of submitting one");
  app.add_option("--submit-runs", f.submit_runs, "runs of the sweep submitted first");
  app.add_option("--workers", f.workers, "simulated workers");
  app.add_option("--watchers", f.watchers, "WatchSweep streams");
  app.add_option("--dashboards", f.dashboards, "dashboard clients polling the JSON API");
  app.add_option("--channels", f.channels, "connections per address (0 = one per worker)");
  app.add_option("--duration", f.duration_s, "seconds of load");
  app.add_option("--ramp", f.ramp_s, "seconds over which clients start");
  app.add_option("--steady-from", f.steady_from_s,
                 "also report latencies of answers from this second on (0 = no split)");
  app.add_option("--metrics-interval", f.metrics_interval_s, "seconds between ReportMetrics");
  app.add_option("--points-per-report", f.points_per_report, "metric points per ReportMetrics");
  app.add_option("--run-time", f.run_time_s, "mean simulated run time, s (uniform 0.5–1.5×)");
  app.add_option("--lease-wait", f.lease_wait_s, "LeaseRun long-poll wait, s");
  app.add_option("--poll-interval", f.poll_interval_s, "dashboard refresh period, s");
  app.add_option("--dashboard-threads", f.dashboard_threads, "threads the dashboards share");
  app.add_option("--analysis-every", f.analysis_every,
                 "a dashboard asks for the analysis every "
                 "Nth poll (0 = never)");
  app.add_flag("--dashboard-full", f.dashboard_full,
               "dashboards fetch every page of runs and results (the unpaged page)");
  app.add_option("--dashboard-endpoints", f.dashboard_endpoints,
                 "what a dashboard poll asks for: sweep,runs,results,curves,analysis");
  app.add_flag("!--no-verify", f.verify, "skip the end check of completed runs against the store");
  app.add_option("--scheduler-pids", f.scheduler_pids,
                 "scheduler pids to measure, comma-separated");
  app.add_option("--postgres-pid", f.postgres_pid, "the postmaster's pid (backends are summed)");
  app.add_option("--kill-pid", f.kill_pid, "kill -9 this scheduler replica at --kill-at");
  app.add_option("--kill-at", f.kill_at_s, "seconds into the load");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"load_gen: simulated workers, watchers and dashboards against parity-scheduler"};
  Flags f;
  AddFlags(app, f);
  CLI11_PARSE(app, argc, argv);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // lines in order with stderr's progress
  if (rlimit files{}; ::getrlimit(RLIMIT_NOFILE, &files) == 0) {
    files.rlim_cur = files.rlim_max;  // a connection per worker
    ::setrlimit(RLIMIT_NOFILE, &files);
  }
  absl::StatusOr<std::string> token = clients::ReadSecretFile(f.token_file);
  if (!token.ok()) {
    std::fprintf(stderr, "load_gen: --token-file: %s\n", token.status().ToString().c_str());
    return 2;
  }
  Recorder recorder(absl::Now());  // RunLoad moves the origin to the load's start
  RunLedger ledger;
  TimerQueue timers;
  LoadEnv env;
  env.timers = &timers;
  env.recorder = &recorder;
  env.ledger = &ledger;
  if (absl::Status s = OpenStubs(f, *token, env); !s.ok()) {
    std::fprintf(stderr, "load_gen: %s\n", s.ToString().c_str());
    return 2;
  }
  if (f.sweep_id.empty()) {
    absl::StatusOr<std::string> id = Submit(*env.sweep_stubs[0][0], f.submit_runs);
    if (!id.ok()) {
      std::fprintf(stderr, "load_gen: %s\n", id.status().ToString().c_str());
      return 1;
    }
    f.sweep_id = *id;
  }
  LoadPlan plan{.workers = f.workers,
                .watchers = f.watchers,
                .dashboards = f.dashboards,
                .duration = absl::Seconds(f.duration_s),
                .ramp = absl::Seconds(f.ramp_s),
                .steady_from = absl::Seconds(f.steady_from_s),
                .scheduler_pids = Pids(f.scheduler_pids),
                .postgres_pid = f.postgres_pid,
                .kill_pid = f.kill_pid,
                .kill_at = absl::Seconds(f.kill_at_s)};
  WorkerCadence cadence;
  cadence.lease_wait = absl::Seconds(f.lease_wait_s);
  cadence.metrics_interval = absl::Seconds(f.metrics_interval_s);
  cadence.points_per_report = f.points_per_report;
  cadence.run_time = absl::Seconds(f.run_time_s);
  DashboardOptions dashboard;
  dashboard.token = *token;
  dashboard.sweep_id = f.sweep_id;
  dashboard.interval = absl::Seconds(f.poll_interval_s);
  dashboard.analysis_every = f.analysis_every;
  dashboard.full_pages = f.dashboard_full;
  dashboard.threads = f.dashboard_threads;
  const std::vector<std::string> endpoints = SplitList(f.dashboard_endpoints);
  dashboard.endpoints = {endpoints.begin(), endpoints.end()};
  for (const std::string& port : SplitList(f.http_ports)) {
    int p = 0;
    if (absl::SimpleAtoi(port, &p)) dashboard.http_ports.push_back(p);
  }
  if (dashboard.http_ports.empty()) plan.dashboards = 0;
  std::printf(
      "load: workers=%d watchers=%d dashboards=%d duration_s=%.0f addresses=%s "
      "heartbeat=scheduler's metrics_every_s=%.1f points=%d run_time_s=%.0f\n",
      f.workers, f.watchers, plan.dashboards, f.duration_s, f.addresses.c_str(),
      f.metrics_interval_s, f.points_per_report, f.run_time_s);
  const LoadOutcome outcome = RunLoad(plan, cadence, dashboard, f.sweep_id, env);
  PrintReport(plan, outcome, recorder, timers);
  const int rc = !f.verify || VerifyCompleted(env, f.sweep_id, ledger, outcome) ? 0 : 1;
  // Without tearing down: gRPC's callback threads may still hold a late answer for a client.
  std::fflush(stdout);
  _exit(rc);
}
