#include "bench/load/sim_worker.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bench/load/grpc_call.h"
#include "core/summary_check.h"

namespace parity::load {

RunLedger::Lease RunLedger::Leased(const std::string& run_id, int worker, int64_t epoch) {
  absl::MutexLock lock(&mu_);
  auto [it, inserted] = holders_.emplace(run_id, Holder{worker, epoch});
  if (inserted) return Lease::kFree;
  const Holder before = it->second;
  it->second = Holder{worker, epoch};
  return before.epoch == epoch ? Lease::kDuplicate : Lease::kTakenOver;
}

void RunLedger::Released(const std::string& run_id, int worker) {
  absl::MutexLock lock(&mu_);
  auto it = holders_.find(run_id);
  if (it != holders_.end() && it->second.worker == worker) holders_.erase(it);
}

void RunLedger::CompletionSent(const std::string& run_id, absl::Time at) {
  absl::MutexLock lock(&mu_);
  completion_sent_.emplace(run_id, at);  // the first send: a retry does not move it
}

bool RunLedger::CompletionTime(const std::string& run_id, absl::Time& at) const {
  absl::MutexLock lock(&mu_);
  auto it = completion_sent_.find(run_id);
  if (it == completion_sent_.end()) return false;
  at = it->second;
  return true;
}

bool RunLedger::Completed(const std::string& run_id) {
  absl::MutexLock lock(&mu_);
  return completed_.insert(run_id).second;
}

void RunLedger::Unknown(const std::string& run_id) {
  absl::MutexLock lock(&mu_);
  unknown_.insert(run_id);
}

std::set<std::string> RunLedger::completed() const {
  absl::MutexLock lock(&mu_);
  return completed_;
}

std::set<std::string> RunLedger::unknown() const {
  absl::MutexLock lock(&mu_);
  return unknown_;
}

SimWorker::SimWorker(LoadEnv& env, WorkerCadence cadence, int index)
    : env_(env),
      cadence_(cadence),
      index_(index),
      address_(index % static_cast<int>(env.worker_stubs.size())),
      seed_(static_cast<uint64_t>(index) * 2654435761u + 1) {}

void SimWorker::Start() { Register(); }

void SimWorker::Stop() {
  absl::MutexLock lock(&mu_);
  if (long_poll_ != nullptr) long_poll_->TryCancel();
}

bool SimWorker::registered() const {
  absl::MutexLock lock(&mu_);
  return !worker_id_.empty();
}

v1::WorkerService::Stub& SimWorker::Stub() {
  auto& stubs = env_.worker_stubs[address_];
  return *stubs[index_ % stubs.size()];
}

bool SimWorker::Current(uint64_t generation) const {
  return generation == generation_ && !env_.stopping;
}

absl::Duration SimWorker::Failed(const std::string& call, const grpc::Status& status) {
  env_.recorder->Error(call, CodeName(status.error_code()), status.error_message());
  absl::MutexLock lock(&mu_);
  if (status.error_code() == grpc::StatusCode::UNAVAILABLE) {
    address_ = (address_ + 1) % static_cast<int>(env_.worker_stubs.size());
  }
  // Exponential backoff with jitter, as the real worker (core/backoff.h): a fleet that retried
  // every second would keep a struggling scheduler down.
  failures_ = std::min(failures_ + 1, 6);
  seed_ = seed_ * 6364136223846793005u + 1442695040888963407u;
  const double jitter = 0.5 + static_cast<double>(seed_ >> 11) / static_cast<double>(1ull << 53);
  return std::min(absl::Seconds(30), cadence_.retry_delay * (1 << (failures_ - 1))) * jitter;
}

void SimWorker::Succeeded() {
  absl::MutexLock lock(&mu_);
  failures_ = 0;
}

void SimWorker::Register() {
  if (env_.stopping) return;
  auto call =
      NewCall<v1::RegisterWorkerRequest, v1::RegisterWorkerResponse>(env_, absl::Seconds(30));
  call->request.set_hostname(absl::StrCat("load-", index_));
  call->request.set_version("load-generator");
  v1::Device* device = call->request.add_devices();
  device->set_kind(v1::DEVICE_KIND_CPU);
  device->set_threads(4);
  absl::MutexLock lock(&mu_);
  Stub().async()->RegisterWorker(
      &call->context, &call->request, &call->response, [this, call](grpc::Status status) {
        Finish(env_, *call, "register", status);
        if (!status.ok()) {
          env_.timers->After(Failed("register", status), [this] { Register(); });
          return;
        }
        {
          absl::MutexLock lock(&mu_);
          failures_ = 0;
          worker_id_ = call->response.worker_id();
          if (call->response.has_heartbeat_interval()) {
            heartbeat_interval_ = absl::Seconds(call->response.heartbeat_interval().seconds()) +
                                  absl::Nanoseconds(call->response.heartbeat_interval().nanos());
          }
        }
        Lease();
      });
}

void SimWorker::Lease() {
  if (env_.stopping) return;
  auto call = NewCall<v1::LeaseRunRequest, v1::LeaseRunResponse>(
      env_, cadence_.lease_wait + absl::Seconds(15));
  absl::MutexLock lock(&mu_);
  call->request.set_worker_id(worker_id_);
  v1::Device* device = call->request.add_free_devices();
  device->set_kind(v1::DEVICE_KIND_CPU);
  device->set_threads(4);
  call->request.mutable_wait_time()->set_seconds(absl::ToInt64Seconds(cadence_.lease_wait));
  if (lease_request_id_.empty()) {
    lease_request_id_ = absl::StrCat("sim", index_, "-", ++lease_attempts_);
  }
  call->request.set_request_id(lease_request_id_);
  call->request.set_retry(lease_retry_);
  long_poll_ = &call->context;
  const uint64_t generation = generation_;
  Stub().async()->LeaseRun(
      &call->context, &call->request, &call->response,
      [this, call, generation](grpc::Status status) {
        {
          absl::MutexLock lock(&mu_);
          long_poll_ = nullptr;
          // Answered: the next attempt is new. Failed: the lease may exist, ask for it again.
          if (status.ok()) lease_request_id_.clear();
          lease_retry_ = !status.ok();
        }
        const double ms = absl::ToDoubleMilliseconds(absl::Now() - call->start);
        if (status.ok() && call->response.has_lease()) {
          env_.recorder->Sample("lease", ms);
          Succeeded();
          OnLeased(call->response, generation);
        } else if (status.ok()) {
          env_.recorder->Count("lease_empty");  // the long poll ran out: none pending
          Succeeded();
          Lease();
        } else if (!env_.stopping) {
          env_.timers->After(Failed("lease", status), [this] { Lease(); });
        }
        Finish(env_, *call, "", status);
      });
}

void SimWorker::OnLeased(const v1::LeaseRunResponse& response, uint64_t generation) {
  switch (env_.ledger->Leased(response.run().run_id(), index_, response.lease().lease_epoch())) {
    case RunLedger::Lease::kFree:
      break;
    case RunLedger::Lease::kTakenOver:
      env_.recorder->Count("lease_taken_over");
      break;
    case RunLedger::Lease::kDuplicate:
      env_.recorder->Count("duplicate_lease");
      break;
  }
  absl::Duration run_time;
  {
    absl::MutexLock lock(&mu_);
    if (generation != generation_) return;  // cannot happen: one long poll at a time
    held_ = response;
    step_ = 0;
    generation = ++generation_;
    seed_ = seed_ * 6364136223846793005u + 1442695040888963407u;
    const double factor = 0.5 + static_cast<double>(seed_ >> 11) / static_cast<double>(1ull << 53);
    run_time = cadence_.run_time * factor;
  }
  env_.recorder->Count("leased");
  Heartbeat(generation);  // at once: marks the run RUNNING, as the real worker does
  env_.timers->After(cadence_.metrics_interval, [this, generation] { Report(generation); });
  env_.timers->After(run_time, [this, generation] { Complete(generation); });
}

void SimWorker::Heartbeat(uint64_t generation) {
  auto call = NewCall<v1::HeartbeatRequest, v1::HeartbeatResponse>(env_, absl::Seconds(30));
  absl::MutexLock lock(&mu_);
  if (!Current(generation)) {
    Finish(env_, *call, "", grpc::Status::CANCELLED);
    return;
  }
  call->request.set_worker_id(worker_id_);
  call->request.set_run_id(held_.run().run_id());
  call->request.set_lease_epoch(held_.lease().lease_epoch());
  call->request.set_lease_secret(held_.lease_secret());
  call->request.set_step(step_);
  ++calls_in_run_;
  Stub().async()->Heartbeat(
      &call->context, &call->request, &call->response,
      [this, call, generation](grpc::Status status) {
        Finish(env_, *call, "heartbeat", status);
        {
          absl::MutexLock lock(&mu_);
          --calls_in_run_;
        }
        if (status.error_code() == grpc::StatusCode::FAILED_PRECONDITION) {
          // The lease went elsewhere (expired and requeued): drop the run,
          // lease another.
          Failed("heartbeat", status);
          bool lost = false;
          {
            absl::MutexLock lock(&mu_);
            if (Current(generation)) {
              ++generation_;
              env_.ledger->Released(held_.run().run_id(), index_);
              lost = true;
            }
          }
          if (lost) Lease();
          return;
        }
        absl::Duration next;
        if (status.ok()) Succeeded();
        const absl::Duration backoff =
            status.ok() ? absl::ZeroDuration() : Failed("heartbeat", status);
        {
          absl::MutexLock lock(&mu_);
          next = status.ok() ? heartbeat_interval_ : std::min(heartbeat_interval_, backoff);
        }
        env_.timers->After(next, [this, generation] { Heartbeat(generation); });
      });
}

void SimWorker::Report(uint64_t generation) {
  auto call = NewCall<v1::ReportMetricsRequest, v1::ReportMetricsResponse>(env_, absl::Seconds(30));
  absl::MutexLock lock(&mu_);
  if (!Current(generation)) {
    Finish(env_, *call, "", grpc::Status::CANCELLED);
    return;
  }
  call->request.set_run_id(held_.run().run_id());
  call->request.set_lease_epoch(held_.lease().lease_epoch());
  call->request.set_lease_secret(held_.lease_secret());
  for (int i = 0; i < cadence_.points_per_report; ++i) {
    const uint64_t step = ++step_ * 10;  // an engine logging every 10 steps
    v1::MetricPoint* p = call->request.add_points();
    p->set_run_id(held_.run().run_id());
    p->set_attempt(held_.run().attempt());
    p->set_step(step);
    p->set_tokens(step * 4096);
    p->set_unique_tokens(step * 4096);
    p->set_epoch(0.1);
    p->set_train_bpc(2.0 - 0.0001 * static_cast<double>(step));
    p->set_learning_rate(1e-3);
    p->set_grad_norm(0.8);
    p->set_tokens_per_second(1e5);
    p->set_flops_per_second(1e12);
    if (i == cadence_.points_per_report - 1)
      p->set_val_bpc(2.1 - 0.0001 * static_cast<double>(step));
  }
  ++calls_in_run_;
  Stub().async()->ReportMetrics(&call->context, &call->request, &call->response,
                                [this, call, generation](grpc::Status status) {
                                  Finish(env_, *call, "report_metrics", status);
                                  {
                                    absl::MutexLock lock(&mu_);
                                    --calls_in_run_;
                                  }
                                  if (!status.ok()) Failed("report_metrics", status);
                                  env_.timers->After(cadence_.metrics_interval,
                                                     [this, generation] { Report(generation); });
                                });
}

void SimWorker::Complete(uint64_t generation) {
  auto request = std::make_shared<v1::CompleteRunRequest>();
  {
    absl::MutexLock lock(&mu_);
    if (!Current(generation)) return;
    if (calls_in_run_ > 0) {
      // The real worker's supervisor is one loop: it flushes metrics and heartbeats before it
      // completes, never beside the completion.
      env_.timers->After(absl::Milliseconds(50), [this, generation] { Complete(generation); });
      return;
    }
    ++generation_;  // the run's heartbeat and metrics timers stop here
    request->set_run_id(held_.run().run_id());
    request->set_lease_epoch(held_.lease().lease_epoch());
    request->set_lease_secret(held_.lease_secret());
    // What an honest engine reports: the scheduler refuses a summary off the plan.
    *request->mutable_success() = core::PlannedSummary(held_.run().spec(), 1.2, 1.1);
  }
  env_.ledger->CompletionSent(request->run_id(), absl::Now());
  CompleteAttempt(std::move(request), 0);
}

void SimWorker::CompleteAttempt(std::shared_ptr<v1::CompleteRunRequest> request, int attempt) {
  auto call = NewCall<v1::CompleteRunRequest, v1::CompleteRunResponse>(env_, absl::Seconds(30));
  call->request = *request;
  absl::MutexLock lock(&mu_);
  Stub().async()->CompleteRun(
      &call->context, &call->request, &call->response,
      [this, call, request, attempt](grpc::Status status) {
        Finish(env_, *call, "complete", status);
        const std::string& run_id = request->run_id();
        const grpc::StatusCode code = status.error_code();
        const bool answer_lost = code == grpc::StatusCode::UNAVAILABLE ||
                                 code == grpc::StatusCode::DEADLINE_EXCEEDED ||
                                 code == grpc::StatusCode::INTERNAL;
        if (status.ok() && call->response.run().state() != v1::RUN_STATE_SUCCEEDED) {
          // Answered OK without recording the success: the store's 'unchanged' outcome, when the
          // reaper requeued the run (its lease lapsed) before this call arrived. The real worker
          // logs "run is now PENDING" and moves on; the run trains again.
          Succeeded();
          env_.recorder->Count("complete_ok_but_run_" +
                               v1::RunState_Name(call->response.run().state()));
        } else if (status.ok()) {
          Succeeded();
          if (!env_.ledger->Completed(run_id)) env_.recorder->Count("duplicate_completion");
          if (attempt > 0) env_.recorder->Count("complete_after_retry");
        } else {
          const absl::Duration backoff = Failed("complete", status);
          if (answer_lost) env_.ledger->Unknown(run_id);
          if (answer_lost && attempt < 10 && !env_.stopping) {  // the real worker retries too
            env_.timers->After(backoff,
                               [this, request, attempt] { CompleteAttempt(request, attempt + 1); });
            return;
          }
        }
        env_.ledger->Released(run_id, index_);
        Lease();
      });
}

}  // namespace parity::load
