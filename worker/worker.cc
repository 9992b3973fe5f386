#include "worker/worker.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/proto_time.h"
#include "spdlog/spdlog.h"
#include "worker/checkpoint_retention.h"

namespace parity::worker {
namespace {

std::string DescribeDevices(const std::vector<parity::v1::Device>& devices) {
  std::vector<std::string> parts;
  for (const parity::v1::Device& d : devices) {
    if (d.kind() == parity::v1::DEVICE_KIND_CPU) {
      parts.push_back(absl::StrCat("cpu(", d.threads(), " threads)"));
    } else {
      parts.push_back(
          absl::StrCat("cuda:", d.index(), "(", d.name(), ", ", d.memory_bytes() >> 20, " MiB)"));
    }
  }
  return absl::StrJoin(parts, " ");
}

}  // namespace

WorkerDaemon::WorkerDaemon(SchedulerClient& client, DeviceSlots& slots, WorkerOptions options)
    : client_(client), slots_(slots), options_(std::move(options)) {
  options_.run.worker_metrics = options_.metrics;
  if (options_.run.dataset_check.cache == nullptr) {
    options_.run.dataset_check.cache = &own_verify_cache_;
  }
  options_.run.on_finished = [this] {
    absl::MutexLock lock(&mu_);
    ++finished_runs_;
  };
  if (options_.worker_id.empty() && !options_.worker_id_file.empty()) {
    std::ifstream in(options_.worker_id_file);
    std::getline(in, options_.worker_id);
  }
}

void WorkerDaemon::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (shutdown_) return;
    shutdown_ = true;
  }
  spdlog::info("worker: shutting down");
  client_.CancelLongPolls();
}

bool WorkerDaemon::shutting_down() const {
  absl::MutexLock lock(&mu_);
  return shutdown_;
}

uint64_t WorkerDaemon::finished_runs() const {
  absl::MutexLock lock(&mu_);
  return finished_runs_;
}

void WorkerDaemon::WaitForFreeSlot(uint64_t seen, absl::Duration d) {
  absl::MutexLock lock(&mu_);
  auto woken = [this, seen]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return shutdown_ || finished_runs_ != seen;
  };
  mu_.AwaitWithTimeout(absl::Condition(&woken), d);
}

bool WorkerDaemon::SleepUnlessShutdown(absl::Duration d) {
  absl::MutexLock lock(&mu_);
  mu_.AwaitWithTimeout(absl::Condition(&shutdown_), d);
  return shutdown_;
}

absl::Status WorkerDaemon::Register() {
  parity::v1::RegisterWorkerRequest req;
  req.set_hostname(options_.hostname);
  for (const parity::v1::Device& d : slots_.devices()) *req.add_devices() = d;
  for (const auto& [k, v] : options_.labels) (*req.mutable_labels())[k] = v;
  req.set_worker_id(options_.worker_id);
  req.set_version(options_.version);
  for (const parity::v1::DatasetHolding& held : datasets_) *req.add_datasets() = held;
  core::Backoff backoff(options_.backoff);
  for (;;) {
    absl::StatusOr<parity::v1::RegisterWorkerResponse> resp = client_.RegisterWorker(req);
    if (resp.ok()) {
      options_.worker_id = resp->worker_id();
      options_.run.worker_id = resp->worker_id();
      if (resp->has_lease_ttl()) options_.run.lease_ttl = FromProtoDuration(resp->lease_ttl());
      if (resp->has_heartbeat_interval())
        options_.run.heartbeat_interval = FromProtoDuration(resp->heartbeat_interval());
      if (!options_.worker_id_file.empty())
        std::ofstream(options_.worker_id_file, std::ios::trunc) << options_.worker_id << "\n";
      spdlog::info("worker: registered as {} (lease ttl {}, heartbeat every {}); devices {}",
                   options_.worker_id, absl::FormatDuration(options_.run.lease_ttl),
                   absl::FormatDuration(options_.run.heartbeat_interval),
                   DescribeDevices(slots_.devices()));
      return absl::OkStatus();
    }
    if (resp.status().code() == absl::StatusCode::kNotFound && !req.worker_id().empty()) {
      req.clear_worker_id();  // the scheduler forgot us: become a new worker
      continue;
    }
    if (!core::IsRetryable(resp.status()) && resp.status().code() != absl::StatusCode::kCancelled) {
      return resp.status();
    }
    const absl::Duration delay = backoff.NextDelay();
    spdlog::warn("worker: register failed ({}), retrying in {}", resp.status().ToString(),
                 absl::FormatDuration(delay));
    if (SleepUnlessShutdown(delay)) return absl::CancelledError("shut down before registering");
  }
}

namespace {

// A gang's slot on this worker books only its ranks: `cpu_threads` each (a CPU gang), or the
// GPUs the scheduler named for them (`gpus` counts the whole gang's; lease.device_indices are
// rank 0's, which may live on another worker).
void LocalShare(const parity::v1::GangLease& gang, parity::v1::ResourceRequest& resources,
                std::vector<uint32_t>& indices) {
  const uint32_t local = static_cast<uint32_t>(gang.ranks_size());
  const uint32_t per_rank_gpus = resources.gpus() / std::max(1u, gang.world_size());
  resources.set_gpus(per_rank_gpus * local);
  resources.set_cpu_threads(resources.cpu_threads() * local);
  indices.clear();
  if (per_rank_gpus == 0) return;
  for (const parity::v1::GangRank& r : gang.ranks()) {
    indices.insert(indices.end(), r.device_indices().begin(), r.device_indices().end());
  }
}

}  // namespace

void WorkerDaemon::StartRun(parity::v1::LeaseRunResponse lease) {
  const std::string run_id =
      lease.lease().run_id().empty() ? lease.run().run_id() : lease.lease().run_id();
  std::vector<uint32_t> indices(lease.lease().device_indices().begin(),
                                lease.lease().device_indices().end());
  parity::v1::ResourceRequest resources = lease.run().spec().resources();
  if (lease.has_gang() && lease.gang().world_size() > 1)
    LocalShare(lease.gang(), resources, indices);
  absl::StatusOr<DeviceGrant> grant = slots_.Acquire(run_id, resources, indices);
  if (!grant.ok()) {
    // The scheduler gave us a run that does not fit: hand it back as an infrastructure failure.
    spdlog::error("worker: leased run {} does not fit: {}", run_id, grant.status().ToString());
    parity::v1::CompleteRunRequest req;
    req.set_run_id(run_id);
    req.set_lease_epoch(lease.lease().lease_epoch());
    req.set_lease_secret(lease.lease_secret());
    req.mutable_failure()->set_failure_class(parity::v1::FAILURE_CLASS_INFRASTRUCTURE);
    req.mutable_failure()->mutable_status()->set_code(
        static_cast<int>(absl::StatusCode::kFailedPrecondition));
    req.mutable_failure()->mutable_status()->set_message(std::string(grant.status().message()));
    (void)client_.CompleteRun(req);
    return;
  }
  auto sup = std::make_unique<RunSupervisor>(client_, options_.run, std::move(lease), *grant);
  sup->Start();
  runs_[run_id] = std::move(sup);
  PublishDevices();
}

void WorkerDaemon::RetainCheckpoints() {
  namespace fs = std::filesystem;
  constexpr int kRunsPerCall = 1000;  // the scheduler's limit per request
  const std::string& root = options_.run.checkpoint_root;
  std::error_code ec;
  if (root.empty() || !fs::is_directory(root, ec)) return;
  std::vector<std::string> held;
  for (const fs::directory_entry& entry : fs::directory_iterator(root, ec)) {
    const std::string name = entry.path().filename().string();
    // Run directories are named by run id (a UUID); anything else is not ours to judge.
    if (entry.is_directory(ec) && name.size() == 36 && name[8] == '-' && !runs_.contains(name)) {
      held.push_back(name);
    }
  }
  int deleted = 0;
  for (size_t from = 0; from < held.size(); from += kRunsPerCall) {
    parity::v1::CheckpointRetentionRequest req;
    req.set_worker_id(options_.worker_id);
    for (size_t i = from; i < std::min(held.size(), from + kRunsPerCall); ++i) {
      req.add_run_ids(held[i]);
    }
    absl::StatusOr<parity::v1::CheckpointRetentionResponse> resp = client_.CheckpointRetention(req);
    if (!resp.ok()) {  // nothing is deleted on a guess: the next pass asks again
      spdlog::warn("worker: checkpoint retention skipped: {}", resp.status().ToString());
      return;
    }
    for (const parity::v1::RunRetention& run : resp->runs()) {
      deleted += ApplyCheckpointRetention((fs::path(root) / run.run_id()).string(), run);
    }
  }
  if (deleted > 0) {
    spdlog::info("worker: checkpoint retention deleted {} paths of {} runs not running here",
                 deleted, held.size());
  }
}

parity::v1::LeaseRunRequest WorkerDaemon::NextLeaseRequest(std::vector<parity::v1::Device> free) {
  parity::v1::LeaseRunRequest req;
  req.set_worker_id(options_.worker_id);
  std::string offer;
  for (parity::v1::Device& d : free) {
    offer += d.SerializeAsString();
    *req.add_free_devices() = std::move(d);
  }
  *req.mutable_wait_time() = ToProtoDuration(options_.lease_wait);
  // This worker starts a gang's ranks and meets at the rendezvous (RunSupervisor + GangRanks).
  req.set_accepts_gangs(true);
  if (!lost_request_id_.empty() && offer == lost_offer_) {
    // The last attempt's answer may have been lost after the scheduler leased a run to it: the
    // same id again, flagged, gets that lease back instead of a second run.
    req.set_request_id(lost_request_id_);
    req.set_retry(true);
  } else {
    req.set_request_id(absl::StrCat("w-", absl::Hex(request_ids_(), absl::kZeroPad16),
                                    absl::Hex(request_ids_(), absl::kZeroPad16)));
  }
  lost_offer_ = std::move(offer);
  return req;
}

void WorkerDaemon::PublishDevices() {
  if (options_.metrics != nullptr) options_.metrics->SetDevices(slots_.Usage());
}

void WorkerDaemon::ReapFinished() {
  for (auto it = runs_.begin(); it != runs_.end();) {
    if (it->second->done()) {
      it->second->Join();
      spdlog::info("worker: run {} ended: {}", it->first, RunOutcomeName(it->second->outcome()));
      slots_.Release(it->first);
      it = runs_.erase(it);
      PublishDevices();
    } else {
      ++it;
    }
  }
}

absl::Status WorkerDaemon::Run() {
  // Verified before the scheduler hears of this worker, so that it never reports a copy that
  // differs from its manifest (a failing one is logged and left out).
  datasets_ = ScanDatasets(options_.run.corpus_dir, options_.run.dataset_limits,
                           options_.run.dataset_check);
  spdlog::info("worker: {} datasets verified in {}", datasets_.size(),
               options_.run.corpus_dir.empty() ? "(no --corpus-dir)" : options_.run.corpus_dir);
  if (absl::Status s = Register(); !s.ok()) {
    if (s.code() == absl::StatusCode::kCancelled) return absl::OkStatus();
    return s;
  }
  PublishDevices();
  core::Backoff backoff(options_.backoff);
  absl::Time next_retention = absl::InfinitePast();
  while (!shutting_down()) {
    if (absl::Now() >= next_retention) {
      RetainCheckpoints();
      next_retention = absl::Now() + options_.checkpoint_retention_interval;
    }
    // Read before reaping, so a run finishing in between still wakes the wait below.
    const uint64_t finished_before = finished_runs();
    ReapFinished();
    std::vector<parity::v1::Device> free = slots_.FreeDevices();
    if (free.empty()) {
      WaitForFreeSlot(finished_before, absl::Seconds(1));
      continue;
    }
    const parity::v1::LeaseRunRequest req = NextLeaseRequest(std::move(free));
    absl::StatusOr<parity::v1::LeaseRunResponse> resp = client_.LeaseRun(req);
    lost_request_id_.clear();
    if (!resp.ok() && AnswerMayHaveBeenLost(resp.status())) lost_request_id_ = req.request_id();
    // A long poll ended by our own shutdown is no error worth counting.
    if (options_.metrics != nullptr && (resp.ok() || !shutting_down())) {
      options_.metrics->LeaseAttempt(!resp.ok()          ? LeaseAttemptResult::kError
                                     : resp->has_lease() ? LeaseAttemptResult::kLeased
                                                         : LeaseAttemptResult::kEmpty);
    }
    if (!resp.ok()) {
      if (shutting_down()) break;
      if (resp.status().code() == absl::StatusCode::kNotFound) {
        spdlog::warn("worker: scheduler does not know worker {}; registering again",
                     options_.worker_id);
        if (absl::Status s = Register(); !s.ok() && s.code() != absl::StatusCode::kCancelled)
          return s;
        continue;
      }
      const absl::Duration delay = backoff.NextDelay();
      spdlog::warn("worker: lease failed ({}), retrying in {}", resp.status().ToString(),
                   absl::FormatDuration(delay));
      SleepUnlessShutdown(delay);
      continue;
    }
    backoff.Reset();
    if (resp->has_lease()) StartRun(*std::move(resp));
  }
  // Shutdown: every engine gets SIGTERM (it checkpoints), every run is reported PREEMPTED.
  for (auto& [id, sup] : runs_) sup->Preempt();
  for (auto& [id, sup] : runs_) {
    sup->Join();
    spdlog::info("worker: run {} ended: {}", id, RunOutcomeName(sup->outcome()));
    slots_.Release(id);
  }
  runs_.clear();
  PublishDevices();
  spdlog::info("worker: stopped");
  return absl::OkStatus();
}

}  // namespace parity::worker
