#include "bench/load/load_report.h"

#include <signal.h>
#include <unistd.h>

#include <cstdio>

#include "absl/time/clock.h"
#include "bench/load/grpc_call.h"

namespace parity::load {
namespace {

void SampleProcesses(const LoadPlan& plan, LoadOutcome& out) {
  for (pid_t pid : plan.scheduler_pids) {
    const ProcessUsage usage = UsageOf(pid);
    if (usage.alive) out.scheduler_last[pid] = usage;
  }
  if (plan.postgres_pid != 0) {
    const ProcessUsage usage = TreeUsageOf(plan.postgres_pid);
    if (usage.alive) out.postgres_end = usage;
  }
}

void Progress(const Recorder& recorder, double at_s) {
  std::fprintf(stderr, "t=%.0fs leased=%ld completed=%zu errors=%zu\n", at_s,
               static_cast<long>(recorder.CountOf("leased")), recorder.Samples("complete").size(),
               recorder.ErrorTimes().size());
}

}  // namespace

LoadOutcome RunLoad(const LoadPlan& plan, const WorkerCadence& cadence,
                    const DashboardOptions& dashboard, const std::string& sweep_id, LoadEnv& env) {
  LoadOutcome out;
  out.load_before = LoadAverage();
  for (int i = 0; i < plan.workers; ++i) {
    out.workers.push_back(std::make_unique<SimWorker>(env, cadence, i));
  }
  for (int i = 0; i < plan.watchers; ++i) {
    out.watchers.push_back(std::make_unique<SimWatcher>(env, sweep_id, i));
  }
  const absl::Time start = absl::Now();
  env.recorder->SetOrigin(start);
  for (pid_t pid : plan.scheduler_pids) out.scheduler_start[pid] = UsageOf(pid);
  if (plan.postgres_pid != 0) out.postgres_start = TreeUsageOf(plan.postgres_pid);
  const double busy_start = MachineBusySeconds();
  const double self_start = UsageOf(getpid()).cpu_s;
  // Clients start spread over the ramp, as a cluster's nodes come up, not in one instant.
  for (int i = 0; i < plan.workers; ++i) {
    SimWorker* worker = out.workers[i].get();
    env.timers->At(start + plan.ramp * i / plan.workers, [worker] { worker->Start(); });
  }
  for (int i = 0; i < plan.watchers; ++i) {
    SimWatcher* watcher = out.watchers[i].get();
    env.timers->At(start + plan.ramp * i / plan.watchers, [watcher] { watcher->Start(); });
  }
  DashboardPool dashboards(dashboard, *env.recorder, env.stopping);
  if (plan.dashboards > 0) dashboards.Start(plan.dashboards, plan.ramp);
  bool killed = false;
  int tick = 0;
  while (absl::Now() < start + plan.duration) {
    absl::SleepFor(absl::Seconds(1));
    if (!killed && plan.kill_pid != 0 && absl::Now() >= start + plan.kill_at) {
      SampleProcesses(plan, out);  // the replica's last figures
      ::kill(plan.kill_pid, SIGKILL);
      out.kill_time_s = absl::ToDoubleSeconds(absl::Now() - env.recorder->origin());
      std::fprintf(stderr, "killed replica pid %d at t=%.1fs\n", plan.kill_pid, out.kill_time_s);
      killed = true;
    }
    SampleProcesses(plan, out);
    if (++tick % 10 == 0) Progress(*env.recorder, absl::ToDoubleSeconds(absl::Now() - start));
  }
  out.elapsed_s = absl::ToDoubleSeconds(absl::Now() - start);
  out.machine_busy_s = MachineBusySeconds() - busy_start;
  out.generator_cpu_s = UsageOf(getpid()).cpu_s - self_start;
  out.load_after = LoadAverage();
  env.stopping = true;
  for (auto& worker : out.workers) worker->Stop();
  for (auto& watcher : out.watchers) watcher->Stop();
  dashboards.Join();
  const absl::Time drain_deadline = absl::Now() + absl::Seconds(60);
  while (env.in_flight > 0 && absl::Now() < drain_deadline) absl::SleepFor(absl::Milliseconds(50));
  out.drained_in_flight = env.in_flight;
  return out;
}

void PrintReport(const LoadPlan& plan, const LoadOutcome& out, const Recorder& recorder,
                 const TimerQueue& timers) {
  std::printf("window_s=%.1f loadavg_before=%s loadavg_after=%s\n", out.elapsed_s,
              out.load_before.c_str(), out.load_after.c_str());
  for (const char* call :
       {"lease", "heartbeat", "report_metrics", "complete", "register", "watch_delay", "dash_poll",
        "dash_sweep", "dash_runs", "dash_results", "dash_curves", "dash_analysis"}) {
    const std::vector<double> ms = recorder.Samples(call);
    if (ms.empty()) continue;
    std::printf("%-15s n=%-7zu per_s=%-7.1f p50_ms=%-8.2f p99_ms=%-8.2f max_ms=%.2f\n", call,
                ms.size(), ms.size() / out.elapsed_s, Percentile(ms, 0.5), Percentile(ms, 0.99),
                Percentile(ms, 1.0));
  }
  const double steady_s = absl::ToDoubleSeconds(plan.steady_from);
  if (steady_s > 0 && steady_s < out.elapsed_s) {
    std::printf("steady state: answers from t=%.0fs on\n", steady_s);
    for (const char* call :
         {"lease", "heartbeat", "report_metrics", "complete", "watch_delay", "dash_poll"}) {
      const std::vector<double> ms = recorder.Samples(call, steady_s);
      if (ms.empty()) continue;
      std::printf("steady %-15s n=%-7zu p50_ms=%-8.2f p99_ms=%-8.2f max_ms=%.2f\n", call, ms.size(),
                  Percentile(ms, 0.5), Percentile(ms, 0.99), Percentile(ms, 1.0));
    }
  }
  for (const auto& [what, n] : recorder.Counts()) {
    std::printf("count %-22s %ld\n", what.c_str(), static_cast<long>(n));
  }
  const auto errors = recorder.Errors();
  std::printf("errors total=%zu\n", recorder.ErrorTimes().size());
  for (const auto& [key, e] : errors) {
    std::printf("error %-32s n=%-6ld first_s=%.1f last_s=%.1f e.g. %s\n", key.c_str(),
                static_cast<long>(e.count), e.first_s, e.last_s, e.example.c_str());
  }
  if (out.kill_time_s >= 0) {
    // Errors by when they came, relative to the kill: the failover's window.
    double first = -1, last = -1;
    size_t after = 0;
    for (double t : recorder.ErrorTimes()) {
      if (t + 0.5 < out.kill_time_s) continue;  // the origin is ~start; allow clock slack
      ++after;
      if (first < 0 || t < first) first = t;
      last = std::max(last, t);
    }
    std::printf(
        "failover kill_at_s=%.1f errors_after_kill=%zu first_error_after_kill_s=%.2f "
        "last_error_after_kill_s=%.2f\n",
        out.kill_time_s, after, first < 0 ? 0 : first - out.kill_time_s,
        last < 0 ? 0 : last - out.kill_time_s);
  }
  double scheduler_cpu = 0, scheduler_rss = 0;
  for (pid_t pid : plan.scheduler_pids) {
    auto a = out.scheduler_start.find(pid);
    auto b = out.scheduler_last.find(pid);
    if (a == out.scheduler_start.end() || b == out.scheduler_last.end()) continue;
    const double cpu = b->second.cpu_s - a->second.cpu_s;
    scheduler_cpu += cpu;
    scheduler_rss += b->second.rss_mib;
    std::printf("scheduler pid=%d cpu_s=%.1f cores=%.2f rss_mib=%.1f peak_rss_mib=%.1f\n", pid, cpu,
                cpu / out.elapsed_s, b->second.rss_mib, b->second.peak_rss_mib);
  }
  const double per_k = plan.workers > 0 ? 1000.0 / plan.workers : 0;
  std::printf(
      "scheduler_total cpu_s=%.1f cpu_s_per_s_per_1000_workers=%.3f "
      "rss_mib_per_1000_workers=%.1f\n",
      scheduler_cpu, scheduler_cpu / out.elapsed_s * per_k, scheduler_rss * per_k);
  if (plan.postgres_pid != 0) {
    const double cpu = out.postgres_end.cpu_s - out.postgres_start.cpu_s;
    std::printf("postgres cpu_s=%.1f cores=%.2f cpu_s_per_s_per_1000_workers=%.3f rss_mib=%.0f\n",
                cpu, cpu / out.elapsed_s, cpu / out.elapsed_s * per_k, out.postgres_end.rss_mib);
  }
  std::printf(
      "machine busy_cores=%.2f of %ld; load_generator cpu_s=%.1f cores=%.2f "
      "timer_lateness_p99_ms=%.1f unanswered_at_end=%d\n",
      out.machine_busy_s / out.elapsed_s, sysconf(_SC_NPROCESSORS_ONLN), out.generator_cpu_s,
      out.generator_cpu_s / out.elapsed_s, timers.LatenessP99Ms(), out.drained_in_flight);
}

bool VerifyCompleted(LoadEnv& env, const std::string& sweep_id, const RunLedger& ledger,
                     const LoadOutcome& outcome) {
  (void)outcome;
  for (auto& stubs : env.sweep_stubs) {
    std::set<std::string> succeeded;
    std::string token;
    grpc::Status status;
    do {
      v1::ListRunsRequest request;
      request.set_sweep_id(sweep_id);
      request.add_states(v1::RUN_STATE_SUCCEEDED);
      request.set_page_size(1000);
      request.set_page_token(token);
      v1::ListRunsResponse response;
      grpc::ClientContext context;
      context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
      status = stubs[0]->ListRuns(&context, request, &response);
      if (!status.ok()) break;
      for (const v1::Run& run : response.runs()) succeeded.insert(run.run_id());
      token = response.next_page_token();
    } while (!token.empty());
    if (!status.ok()) continue;  // that replica is the dead one: ask the next
    const std::set<std::string> completed = ledger.completed();
    const std::set<std::string> unknown = ledger.unknown();
    size_t missing = 0, unexplained = 0, explained = 0;
    for (const std::string& id : completed) missing += succeeded.count(id) == 0;
    for (const std::string& id : succeeded) {
      if (completed.count(id) == 0) (unknown.count(id) ? explained : unexplained) += 1;
    }
    for (const std::string& id : completed) {
      if (succeeded.count(id) != 0) continue;
      // Lost: say what the store holds for it, so the report can name the state and attempt.
      v1::GetRunRequest request;
      request.set_run_id(id);
      v1::GetRunResponse response;
      grpc::ClientContext context;
      context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
      const grpc::Status got = stubs[0]->GetRun(&context, request, &response);
      const v1::Run& run = response.run();
      std::printf(
          "verify missing run=%s answer_lost_before=%d store: %s state=%s attempt=%u "
          "failure=%s %s\n",
          id.c_str(), static_cast<int>(unknown.count(id)),
          got.ok() ? "" : got.error_message().c_str(), v1::RunState_Name(run.state()).c_str(),
          run.attempt(), v1::FailureClass_Name(run.failure_class()).c_str(),
          run.has_lease() ? run.lease().ShortDebugString().c_str() : "");
    }
    std::printf(
        "verify completed_ok=%zu store_succeeded=%zu missing=%zu "
        "succeeded_answer_lost=%zu succeeded_unexplained=%zu\n",
        completed.size(), succeeded.size(), missing, explained, unexplained);
    return missing == 0 && unexplained == 0;
  }
  std::printf("verify failed: no replica answered ListRuns\n");
  return false;
}

}  // namespace parity::load
