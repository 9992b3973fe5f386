// gang_bench's simulated workers (gang_bench.cc): each a thread that long-polls LeaseRun with
// accepts_gangs and does with a grant what a real worker's control plane does — rank 0 posts the
// rendezvous, the other ranks check in until released, rank 0 completes the run — without an
// engine; and the Tracker, where they record when each run's slots, rendezvous and completion
// happened, for the benchmark to read.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "core/summary_check.h"
#include "parity/v1/worker_service.grpc.pb.h"

namespace parity::gang_bench {

constexpr int kWorkerThreads = 4;
constexpr int kWorkerGpus = 8;

// What every simulated worker offers: 4 CPU threads and 8 H200s.
inline std::vector<v1::Device> Offer() {
  std::vector<v1::Device> devices(1);
  devices[0].set_kind(v1::DEVICE_KIND_CPU);
  devices[0].set_threads(kWorkerThreads);
  for (int g = 0; g < kWorkerGpus; ++g) {
    v1::Device gpu;
    gpu.set_kind(v1::DEVICE_KIND_CUDA);
    gpu.set_index(g);
    gpu.set_name("NVIDIA H200");
    gpu.set_memory_bytes(143'771ULL << 20);
    devices.push_back(gpu);
  }
  return devices;
}

// What the simulated workers saw of each run, by run id; the coordinator waits on it.
struct Trace {
  int world = 0;          // 0 until a slot arrives; 1 for an ordinary run
  int slots_held = 0;     // ranks whose worker holds its slot
  absl::Time last_slot;   // when the last of them arrived
  absl::Time post_start;  // rank 0's PostRendezvous call
  int released = 0;       // ranks > 0 answered released
  absl::Time last_release;
  bool completed = false;  // rank 0's (or the ordinary run's) CompleteRun answered
  std::string failure;
};

class Tracker {
 public:
  void SlotsHeld(const std::string& run, int world, int ranks) {
    absl::MutexLock lock(&mu_);
    Trace& t = traces_[run];
    t.world = world;
    t.slots_held += ranks;
    t.last_slot = absl::Now();
  }
  void Posting(const std::string& run) {
    absl::MutexLock lock(&mu_);
    traces_[run].post_start = absl::Now();
  }
  void Released(const std::string& run) {
    absl::MutexLock lock(&mu_);
    Trace& t = traces_[run];
    ++t.released;
    t.last_release = absl::Now();
  }
  void Completed(const std::string& run, const std::string& failure = "") {
    absl::MutexLock lock(&mu_);
    traces_[run].completed = true;
    traces_[run].failure = failure;
  }
  // Rank 0's worker: until every other rank has been answered released (or `stop`).
  void AwaitAllReleased(const std::string& run, const std::atomic<bool>& stop) {
    absl::MutexLock lock(&mu_);
    auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      const Trace& t = traces_[run];
      return stop.load() || (t.world > 0 && t.released >= t.world - 1);
    };
    mu_.AwaitWithTimeout(absl::Condition(&ready), absl::Seconds(60));
  }
  // The coordinator: until every run in `runs` completed; false after `timeout`.
  bool AwaitCompleted(const std::vector<std::string>& runs, absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    auto done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      for (const std::string& run : runs) {
        if (!traces_[run].completed) return false;
      }
      return true;
    };
    return mu_.AwaitWithTimeout(absl::Condition(&done), timeout);
  }
  Trace Get(const std::string& run) {
    absl::MutexLock lock(&mu_);
    return traces_[run];
  }

 private:
  absl::Mutex mu_;
  std::map<std::string, Trace> traces_ ABSL_GUARDED_BY(mu_);
};

// One simulated worker: a thread looping LeaseRun (long poll, accepts_gangs) and acting on what
// it gets as a real worker's control plane would, without starting an engine.
class SimulatedWorker {
 public:
  SimulatedWorker(std::shared_ptr<grpc::Channel> channel, Tracker& tracker, int poll_ms)
      : stub_(v1::WorkerService::NewStub(channel)), tracker_(tracker), poll_ms_(poll_ms) {}

  absl::Status Register() {
    grpc::ClientContext context;
    v1::RegisterWorkerRequest request;
    request.set_hostname("gang-bench");
    for (const v1::Device& d : Offer()) *request.add_devices() = d;
    v1::RegisterWorkerResponse response;
    const grpc::Status status = stub_->RegisterWorker(&context, request, &response);
    if (!status.ok()) return absl::UnavailableError("RegisterWorker: " + status.error_message());
    worker_id_ = response.worker_id();
    return absl::OkStatus();
  }
  void Start() {
    thread_ = std::thread([this] { Loop(); });
  }
  void Stop() {
    stop_ = true;
    absl::MutexLock lock(&mu_);
    if (context_ != nullptr) context_->TryCancel();
  }
  void Join() { thread_.join(); }

 private:
  void Loop() {
    while (!stop_) {
      v1::LeaseRunRequest request;
      request.set_worker_id(worker_id_);
      for (const v1::Device& d : Offer()) *request.add_free_devices() = d;
      request.mutable_wait_time()->set_seconds(30);
      request.set_accepts_gangs(true);
      v1::LeaseRunResponse leased;
      grpc::Status status;
      {
        auto context = std::make_unique<grpc::ClientContext>();
        {
          absl::MutexLock lock(&mu_);
          if (stop_) return;
          context_ = context.get();
        }
        status = stub_->LeaseRun(context.get(), request, &leased);
        absl::MutexLock lock(&mu_);
        context_ = nullptr;
      }
      if (stop_) return;
      if (!status.ok()) {
        std::fprintf(stderr, "LeaseRun: %s\n", status.error_message().c_str());
        absl::SleepFor(absl::Milliseconds(100));
        continue;
      }
      if (!leased.has_lease()) continue;
      if (leased.has_gang()) {
        Gang(leased);
      } else {
        tracker_.SlotsHeld(leased.run().run_id(), 1, 1);
        Complete(leased);
      }
    }
  }

  void Gang(const v1::LeaseRunResponse& leased) {
    const std::string& run = leased.run().run_id();
    const v1::GangLease& gang = leased.gang();
    tracker_.SlotsHeld(run, static_cast<int>(gang.world_size()), gang.ranks_size());
    bool rank0 = false;
    for (const v1::GangRank& rank : gang.ranks()) {
      if (rank.rank() == 0) {
        rank0 = true;
        tracker_.Posting(run);
        grpc::ClientContext context;
        v1::PostRendezvousRequest post;
        post.set_run_id(run);
        post.set_lease_epoch(gang.gang_epoch());
        post.set_worker_id(worker_id_);
        post.set_address("127.0.0.1:29500#00000000000000000000000000000000");
        post.set_lease_secret(leased.lease_secret());
        v1::RendezvousResponse state;
        const grpc::Status status = stub_->PostRendezvous(&context, post, &state);
        if (!status.ok())
          return tracker_.Completed(run, "PostRendezvous: " + status.error_message());
      } else {
        CheckInUntilReleased(leased, rank.rank());
      }
    }
    if (!rank0) return;  // rank 0's worker ends the run; this worker parks again
    tracker_.AwaitAllReleased(run, stop_);
    Complete(leased);
  }

  void CheckInUntilReleased(const v1::LeaseRunResponse& leased, uint32_t rank) {
    const std::string& run = leased.run().run_id();
    v1::CheckInRendezvousRequest check_in;
    check_in.set_run_id(run);
    check_in.set_lease_epoch(leased.gang().gang_epoch());
    check_in.set_worker_id(worker_id_);
    check_in.set_rank(rank);
    check_in.set_lease_secret(leased.lease_secret());
    const absl::Time give_up = absl::Now() + absl::Seconds(60);
    while (!stop_ && absl::Now() < give_up) {
      grpc::ClientContext context;
      v1::RendezvousResponse state;
      const grpc::Status status = stub_->CheckInRendezvous(&context, check_in, &state);
      if (!status.ok()) {
        return tracker_.Completed(run, "CheckInRendezvous: " + status.error_message());
      }
      if (state.released()) return tracker_.Released(run);
      absl::SleepFor(absl::Milliseconds(poll_ms_));
    }
  }

  void Complete(const v1::LeaseRunResponse& leased) {
    grpc::ClientContext context;
    v1::CompleteRunRequest complete;
    complete.set_run_id(leased.run().run_id());
    complete.set_lease_epoch(leased.lease().lease_epoch());
    complete.set_lease_secret(leased.lease_secret());
    *complete.mutable_success() = core::PlannedSummary(leased.run().spec(), 1.0, 1.0);
    v1::CompleteRunResponse done;
    const grpc::Status status = stub_->CompleteRun(&context, complete, &done);
    tracker_.Completed(leased.run().run_id(),
                       status.ok() ? "" : "CompleteRun: " + status.error_message());
  }

  std::unique_ptr<v1::WorkerService::Stub> stub_;
  Tracker& tracker_;
  const int poll_ms_;
  std::string worker_id_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  absl::Mutex mu_;
  grpc::ClientContext* context_ ABSL_GUARDED_BY(mu_) = nullptr;
};

}  // namespace parity::gang_bench
