#include "tests/dashboard/study_seeder.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/accounting.h"
#include "core/planner.h"
#include "core/status_macros.h"

namespace parity::dashboard_testing {
namespace {

using parity::v1::MetricPoint;
using parity::v1::RunSpec;

// Every run is evaluated on two sets: "validation" (the primary, val_bpc) and "code", this much
// harder (bits per byte).
constexpr double kCodeOffset = 0.35;

// The dense law the synthetic runs follow: L(C) = 10·C^-0.1 + 1.2 bits per byte.
double DenseLaw(double compute) { return 10.0 * std::pow(compute, -0.1) + 1.2; }

// Dense models off their compute-optimal size lose: 0.1·ln²(L / L_opt(C)) bits per byte, with
// L_opt growing with compute (≈ 1.2 layers at 2e10 FLOPs, 2 at 4e10, 3.2 at 8e10). The planned
// 2-layer model is optimal only at 4e10, so the frontier beats the fixed-N law at the ends.
double SizePenalty(const RunSpec& spec) {
  const double optimal_layers = 2.0 * std::pow(spec.accounting().compute_flops() / 4e10, 0.7);
  const double t = std::log(spec.model().num_layers() / optimal_layers);
  return 0.1 * t * t;
}

// Efficiency leverage by activation rate: best near r_a = 0.27, losing on both sides.
double Leverage(double rate) {
  const double t = std::log(rate / 0.27);
  return std::max(0.3, 2.2 - 1.6 * t * t);
}

// A small fixed offset per run name, as seeds would give.
double Jitter(const std::string& name) {
  return static_cast<double>(std::hash<std::string>{}(name) % 1000) / 1000.0 * 0.006 - 0.003;
}

uint64_t Steps(const RunSpec& spec) { return std::max<uint64_t>(spec.training().steps(), 20); }
uint64_t LogEvery(const RunSpec& spec) {
  return std::max<uint32_t>(spec.training().log_every_steps(), 1);
}
uint64_t EvalEvery(const RunSpec& spec) {
  return std::max<uint32_t>(spec.training().eval_every_steps(), 1);
}

double ValBpc(const RunSpec& spec, double fraction) {
  const double final_bpc = SyntheticFinalBpc(spec);
  const double start = 7.5;  // ≈ log2(256) - a little: an untrained byte model
  return final_bpc + (start - final_bpc) * (std::exp(-6 * fraction) - std::exp(-6.0) * fraction);
}

double LearningRate(const RunSpec& spec, uint64_t step) {
  const double peak = spec.training().learning_rate() > 0 ? spec.training().learning_rate() : 3e-3;
  const uint64_t steps = Steps(spec);
  const uint64_t warmup = std::max<uint64_t>(spec.training().warmup_steps(), steps / 20 + 1);
  if (step < warmup) return peak * static_cast<double>(step + 1) / static_cast<double>(warmup);
  const double progress = static_cast<double>(step - warmup) /
                          static_cast<double>(std::max<uint64_t>(1, steps - warmup));
  return peak * (0.1 + 0.9 * 0.5 * (1 + std::cos(M_PI * std::min(1.0, progress))));
}

// Per-expert shares of one MoE layer: imbalanced early, balancing as training goes on; a run at
// the lowest activation rate starves one expert for a while (a dead expert).
void AddExpertLoad(const RunSpec& spec, double fraction, MetricPoint& point) {
  const uint32_t experts = spec.model().moe().num_experts();
  const uint32_t first_moe = spec.accounting().dense_layers();
  const uint32_t moe_layers = std::max<uint32_t>(spec.accounting().moe_layers(), 1);
  const double amplitude = 0.15 + 0.7 * std::exp(-4 * fraction);
  for (uint32_t l = 0; l < moe_layers; ++l) {
    std::vector<double> shares(experts);
    double total = 0;
    for (uint32_t i = 0; i < experts; ++i) {
      shares[i] = std::max(0.0, 1 + amplitude * std::sin(2.1 * i + 1.3 * l));
      if (i == 0 && l == 0 && spec.accounting().activation_rate() < 0.2 && fraction < 0.3) {
        shares[i] = 0;
      }
      total += shares[i];
    }
    parity::v1::ExpertLoadStats* load = point.add_expert_load();
    load->set_layer(first_moe + l);
    double sum_squares = 0;
    for (double& share : shares) {
      share /= total;
      load->add_shares(share);
      sum_squares += share * share;
    }
    const double mean = 1.0 / experts;
    load->set_min_share(*std::min_element(shares.begin(), shares.end()));
    load->set_max_share(*std::max_element(shares.begin(), shares.end()));
    load->set_coefficient_of_variation(
        std::sqrt(std::max(0.0, sum_squares / experts - mean * mean)) / mean);
    load->set_dead_experts(static_cast<uint32_t>(std::count(shares.begin(), shares.end(), 0.0)));
  }
}

}  // namespace

double SyntheticFinalBpc(const RunSpec& spec) {
  const double compute = spec.accounting().compute_flops();
  double bpc = spec.role() == parity::v1::RUN_ROLE_DENSE_BASELINE
                   ? DenseLaw(compute) + SizePenalty(spec)
                   : DenseLaw(compute * Leverage(spec.accounting().activation_rate()));
  // Repeating data costs a little: strict reuse at several epochs.
  bpc += 0.012 * std::max(0.0, spec.accounting().epochs() - 1);
  return bpc + Jitter(spec.name());
}

absl::StatusOr<std::vector<RunSpec>> PlanWithDenseSizes(const parity::v1::SweepSpec& spec) {
  PARITY_ASSIGN_OR_RETURN(std::vector<RunSpec> runs, core::PlanSweep(spec));
  std::vector<RunSpec> sizes;
  for (const RunSpec& run : runs) {
    if (run.role() != parity::v1::RUN_ROLE_DENSE_BASELINE ||
        run.data().reuse() != parity::v1::REUSE_MODE_UNIQUE) {
      continue;
    }
    for (const uint32_t layers : kExtraDenseLayers) {
      RunSpec sized = run;
      sized.mutable_model()->set_num_layers(layers);
      PARITY_ASSIGN_OR_RETURN(
          parity::v1::Accounting accounting,
          core::ComputeAccounting(sized.model(), sized.training().sequence_length()));
      const uint64_t batch = std::max<uint64_t>(sized.training().batch_tokens(), 1);
      const uint64_t steps = std::max<uint64_t>(
          1, static_cast<uint64_t>(std::llround(run.accounting().compute_flops() /
                                                accounting.flops_per_token() / double(batch))));
      sized.mutable_training()->set_steps(steps);
      sized.mutable_training()->set_warmup_steps(
          std::min<uint64_t>(sized.training().warmup_steps(), steps / 10 + 1));
      core::SetTokens(steps * batch, steps * batch, accounting);
      *sized.mutable_accounting() = accounting;
      sized.mutable_data()->set_unique_tokens(steps * batch);
      sized.mutable_data()->set_epochs(accounting.epochs());
      const auto found = run.grid_point().find("baseline");
      const std::string label = found == run.grid_point().end() ? "" : found->second;
      if (label.empty() || !absl::StartsWith(run.name(), label)) {
        return absl::InternalError(
            absl::StrCat("dense run ", run.name(), " has no baseline label"));
      }
      const std::string infix = absl::StrCat(label, "-L", layers);
      (*sized.mutable_grid_point())["baseline"] = infix;
      sized.set_name(absl::StrCat(infix, run.name().substr(label.size())));
      // The groups the planner shares the run with (also_serves) see this size under its own
      // name there too, not as another seed of the planned size.
      for (parity::v1::GroupRef& group : *sized.mutable_also_serves()) {
        const auto there = group.grid_point().find("baseline");
        if (there == group.grid_point().end() || !absl::StartsWith(group.name(), there->second)) {
          continue;
        }
        const std::string size_there = absl::StrCat(there->second, "-L", layers);
        group.set_name(absl::StrCat(size_there, group.name().substr(there->second.size())));
        (*group.mutable_grid_point())["baseline"] = size_there;
      }
      sizes.push_back(std::move(sized));
    }
  }
  for (RunSpec& run : sizes) runs.push_back(std::move(run));
  return runs;
}

std::vector<MetricPoint> SyntheticPoints(const RunSpec& spec, uint64_t after_step,
                                         uint64_t up_to_step) {
  std::vector<MetricPoint> points;
  const uint64_t steps = Steps(spec);
  const uint64_t batch = std::max<uint64_t>(spec.training().batch_tokens(), 1);
  const double unique = std::max<double>(1, static_cast<double>(spec.accounting().unique_tokens()));
  const double flops_per_token = spec.accounting().flops_per_token();
  up_to_step = std::min(up_to_step, steps);
  std::set<uint64_t> logged;
  for (uint64_t step = LogEvery(spec); step <= up_to_step; step += LogEvery(spec)) {
    logged.insert(step);
  }
  if (up_to_step == steps) logged.insert(steps);
  for (uint64_t step : logged) {
    if (step <= after_step) continue;
    const double fraction = static_cast<double>(step) / static_cast<double>(steps);
    MetricPoint p;
    p.set_attempt(1);
    p.set_step(step);
    p.set_tokens(step * batch);
    p.set_unique_tokens(static_cast<uint64_t>(std::min<double>(step * batch, unique)));
    p.set_epoch(static_cast<double>(step * batch) / unique);
    p.set_train_bpc(ValBpc(spec, fraction) - 0.03 * fraction + 0.025 * std::sin(0.9 * step));
    if (step % EvalEvery(spec) == 0 || step == steps) {
      p.set_val_bpc(ValBpc(spec, fraction));
      // Two evaluation sets: the primary and "code", a harder held-out text.
      (*p.mutable_eval_bpc())["validation"] = p.val_bpc();
      (*p.mutable_eval_bpc())["code"] = p.val_bpc() + kCodeOffset;
    }
    p.set_learning_rate(LearningRate(spec, step));
    p.set_grad_norm(0.45 + 1.6 * std::exp(-5 * fraction) + 0.06 * std::sin(0.7 * step));
    p.set_aux_loss(spec.role() == parity::v1::RUN_ROLE_MOE ? 1.0 + 0.08 * std::exp(-3 * fraction)
                                                           : 0);
    p.set_z_loss(spec.role() == parity::v1::RUN_ROLE_MOE ? 0.002 : 0);
    p.set_tokens_per_second(20000);
    p.set_flops_per_second(20000 * flops_per_token);
    p.set_flops(static_cast<double>(step * batch) * flops_per_token);
    const auto now = std::chrono::system_clock::now().time_since_epoch();
    p.mutable_time()->set_seconds(std::chrono::duration_cast<std::chrono::seconds>(now).count());
    if (spec.role() == parity::v1::RUN_ROLE_MOE) AddExpertLoad(spec, fraction, p);
    points.push_back(std::move(p));
  }
  return points;
}

StudySeeder::StudySeeder(const std::shared_ptr<grpc::Channel>& channel)
    : sweeps_(parity::v1::SweepService::NewStub(channel)),
      workers_(parity::v1::WorkerService::NewStub(channel)) {}

namespace {

std::unique_ptr<grpc::ClientContext> Context() {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  return context;
}

absl::Status Failed(const std::string& what, const grpc::Status& status) {
  return absl::InternalError(absl::StrCat(what, ": ", status.error_message()));
}

bool Listed(const std::string& name, const char* const* names, size_t count) {
  return std::find(names, names + count, name) != names + count;
}

}  // namespace

absl::Status StudySeeder::Report(SeededRun& run, uint64_t up_to_step) {
  parity::v1::ReportMetricsRequest request;
  request.set_run_id(run.run.run_id());
  request.set_lease_epoch(run.lease_epoch);
  request.set_lease_secret(run.lease_secret);
  for (MetricPoint& point : SyntheticPoints(run.run.spec(), run.reported_up_to_step, up_to_step)) {
    point.set_run_id(run.run.run_id());
    *request.add_points() = std::move(point);
  }
  if (request.points_size() == 0) return absl::OkStatus();
  parity::v1::ReportMetricsResponse response;
  const grpc::Status status = workers_->ReportMetrics(Context().get(), request, &response);
  if (!status.ok()) return Failed("ReportMetrics " + run.run.spec().name(), status);
  run.reported_up_to_step = request.points(request.points_size() - 1).step();
  parity::v1::HeartbeatRequest beat;
  beat.set_worker_id(run.run.lease().worker_id());
  beat.set_run_id(run.run.run_id());
  beat.set_lease_epoch(run.lease_epoch);
  beat.set_lease_secret(run.lease_secret);
  beat.set_step(run.reported_up_to_step);
  parity::v1::HeartbeatResponse beat_response;
  const grpc::Status beat_status = workers_->Heartbeat(Context().get(), beat, &beat_response);
  if (!beat_status.ok()) return Failed("Heartbeat " + run.run.spec().name(), beat_status);
  return absl::OkStatus();
}

absl::StatusOr<SeededStudy> StudySeeder::Seed(const parity::v1::SweepSpec& spec) {
  SeededStudy study;
  parity::v1::SubmitSweepRequest submit;
  *submit.mutable_spec() = spec;
  submit.set_owner("dashboard-test");
  parity::v1::SubmitSweepResponse submitted;
  grpc::Status status = sweeps_->SubmitSweep(Context().get(), submit, &submitted);
  if (!status.ok()) return Failed("SubmitSweep", status);
  study.sweep_id = submitted.sweep().sweep_id();

  parity::v1::Device cpu;
  cpu.set_kind(parity::v1::DEVICE_KIND_CPU);
  cpu.set_threads(64);
  cpu.set_name("dashboard-test cpu");
  parity::v1::RegisterWorkerRequest register_request;
  register_request.set_hostname("dashboard-test-worker");
  *register_request.add_devices() = cpu;
  parity::v1::RegisterWorkerResponse registered;
  status = workers_->RegisterWorker(Context().get(), register_request, &registered);
  if (!status.ok()) return Failed("RegisterWorker", status);
  study.worker_id = registered.worker_id();

  // Lease every run first (each call is a fresh offer of one idle CPU), then drive each.
  while (static_cast<int>(study.runs.size()) < submitted.run_ids_size()) {
    parity::v1::LeaseRunRequest lease;
    lease.set_worker_id(study.worker_id);
    *lease.add_free_devices() = cpu;
    lease.mutable_wait_time()->set_seconds(2);
    parity::v1::LeaseRunResponse leased;
    status = workers_->LeaseRun(Context().get(), lease, &leased);
    if (!status.ok()) return Failed("LeaseRun", status);
    if (!leased.has_lease()) {
      return absl::InternalError(absl::StrCat("LeaseRun found no work after ", study.runs.size(),
                                              " of ", submitted.run_ids_size(), " runs"));
    }
    SeededRun& run = study.runs[leased.run().spec().name()];
    run.run = leased.run();
    *run.run.mutable_lease() = leased.lease();
    run.lease_epoch = leased.lease().lease_epoch();
    run.lease_secret = leased.lease_secret();
  }

  for (auto& [name, run] : study.runs) {
    const RunSpec& run_spec = run.run.spec();
    const uint64_t steps = Steps(run_spec);
    const bool running = Listed(name, kRunningRuns, std::size(kRunningRuns));
    const bool pending = Listed(name, kPendingRuns, std::size(kPendingRuns));
    const uint64_t up_to =
        running || pending ? static_cast<uint64_t>(kRunningFraction * static_cast<double>(steps))
                           : steps;
    if (absl::Status reported = Report(run, up_to); !reported.ok()) return reported;
    if (running) continue;
    parity::v1::CompleteRunRequest complete;
    complete.set_run_id(run.run.run_id());
    complete.set_lease_epoch(run.lease_epoch);
    complete.set_lease_secret(run.lease_secret);
    if (pending) {
      complete.mutable_failure()->set_failure_class(parity::v1::FAILURE_CLASS_PREEMPTED);
      complete.mutable_failure()->mutable_status()->set_code(14);
      complete.mutable_failure()->mutable_status()->set_message("worker stopped (test)");
    } else {
      parity::v1::RunSummary* summary = complete.mutable_success();
      const std::vector<MetricPoint> last = SyntheticPoints(run_spec, steps - 1, steps);
      summary->set_final_val_bpc(SyntheticFinalBpc(run_spec));
      (*summary->mutable_final_eval_bpc())["validation"] = summary->final_val_bpc();
      (*summary->mutable_final_eval_bpc())["code"] = summary->final_val_bpc() + kCodeOffset;
      summary->set_final_train_bpc(last.empty() ? 0 : last.back().train_bpc());
      summary->set_tokens(steps * run_spec.training().batch_tokens());
      summary->set_steps(steps);
      summary->set_measured_flops_per_token(run_spec.accounting().flops_per_token());
      summary->mutable_wall_time()->set_seconds(static_cast<int64_t>(steps / 20 + 1));
      summary->set_peak_memory_bytes(48ull << 20);
      // The device's peak 5.5% over the planner's estimate: the run page shows both and the gap.
      summary->set_peak_device_memory_bytes(61'200'000'000);
      summary->set_estimated_device_memory_bytes(58'000'000'000);
      summary->set_tokens_per_second(20000);
    }
    parity::v1::CompleteRunResponse completed;
    status = workers_->CompleteRun(Context().get(), complete, &completed);
    if (!status.ok()) return Failed("CompleteRun " + name, status);
  }
  return study;
}

absl::Status StudySeeder::ReportMore(SeededStudy& study, const std::string& run_name,
                                     double fraction) {
  auto it = study.runs.find(run_name);
  if (it == study.runs.end()) return absl::NotFoundError(run_name);
  const uint64_t steps = Steps(it->second.run.spec());
  return Report(it->second, static_cast<uint64_t>(fraction * static_cast<double>(steps)));
}

absl::StatusOr<int> StudySeeder::FailQueuedRuns(const std::string& worker_id, absl::Duration wait) {
  parity::v1::Device cpu;
  cpu.set_kind(parity::v1::DEVICE_KIND_CPU);
  cpu.set_threads(64);
  cpu.set_name("dashboard-test cpu");
  int failed = 0;
  while (true) {
    parity::v1::LeaseRunRequest lease;
    lease.set_worker_id(worker_id);
    *lease.add_free_devices() = cpu;
    lease.mutable_wait_time()->set_nanos(
        static_cast<int32_t>(absl::ToInt64Nanoseconds(failed == 0 ? wait : absl::ZeroDuration())));
    parity::v1::LeaseRunResponse leased;
    grpc::Status status = workers_->LeaseRun(Context().get(), lease, &leased);
    if (!status.ok()) return Failed("LeaseRun", status);
    if (!leased.has_lease()) return failed;
    parity::v1::CompleteRunRequest complete;
    complete.set_run_id(leased.run().run_id());
    complete.set_lease_epoch(leased.lease().lease_epoch());
    complete.set_lease_secret(leased.lease_secret());
    complete.mutable_failure()->set_failure_class(parity::v1::FAILURE_CLASS_USER_ERROR);
    complete.mutable_failure()->mutable_status()->set_code(5);  // NOT_FOUND
    complete.mutable_failure()->mutable_status()->set_message(absl::StrCat(
        "dataset '", leased.run().spec().data().corpus(), "' not found on worker ", worker_id));
    parity::v1::CompleteRunResponse completed;
    status = workers_->CompleteRun(Context().get(), complete, &completed);
    if (!status.ok()) return Failed("CompleteRun", status);
    ++failed;
  }
}

}  // namespace parity::dashboard_testing
