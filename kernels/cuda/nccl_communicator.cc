// The NCCL communicator of the CUDA backend (kernels/comm/communicator.h). Collectives run on the
// engine's stream (BackendState::stream) so they are ordered with the ops around them; queued
// gradient sums (QueueAllReduceSum) run on a stream of their own, each after an event recorded on
// the engine's stream when it was queued, so that a layer's sum overlaps the backward of the
// layers below, and WaitQueued joins them back before the optimizer reads the gradients. The
// communicator is created non-blocking (ncclConfig_t::blocking = 0) so that forming the gang and
// every collective can be given up after a deadline (ncclCommAbort) instead of hanging on a dead
// peer: a step's device work is waited for here, polling the stream and NCCL's async error.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "kernels/comm/communicator.h"
#include "kernels/cuda/backend_state.h"

namespace parity::kernels {
namespace {

absl::Status NcclError(const char* call, ncclResult_t r) {
  return absl::UnavailableError(
      absl::StrCat(call, " failed: ", ncclGetErrorString(r),
                   " (a peer died or the gang could not form; the gang must restart)"));
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(ncclComm_t comm, int rank, int size, Device& device, cudaStream_t stream,
                   absl::Duration timeout)
      : comm_(comm), rank_(rank), size_(size), device_(device), stream_(stream), timeout_(timeout) {
    // Without its own stream and events a queued sum simply runs on the engine's stream.
    if (cudaStreamCreateWithFlags(&queue_, cudaStreamNonBlocking) != cudaSuccess) queue_ = stream_;
    if (cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming) != cudaSuccess) ready_ = nullptr;
    if (cudaEventCreateWithFlags(&done_, cudaEventDisableTiming) != cudaSuccess) done_ = nullptr;
  }
  ~NcclCommunicator() override {
    if (comm_ != nullptr) (void)ncclCommAbort(comm_);  // safe whatever state it is in
    if (ready_ != nullptr) (void)cudaEventDestroy(ready_);
    if (done_ != nullptr) (void)cudaEventDestroy(done_);
    if (queue_ != stream_) (void)cudaStreamDestroy(queue_);
  }

  int rank() const override { return rank_; }
  int world_size() const override { return size_; }
  std::string_view Name() const override { return "nccl"; }

  absl::Status AllReduceSum(float* data, int64_t count) override {
    return Finish("ncclAllReduce", ncclAllReduce(data, data, static_cast<size_t>(count),
                                                 ncclFloat32, ncclSum, comm_, stream_));
  }

  bool QueuesOnDevice() const override { return comm_ != nullptr; }

  absl::Status QueueAllReduceSum(float* data, int64_t count) override {
    if (comm_ == nullptr) return NcclError("ncclAllReduce", ncclInvalidUsage);
    // After the engine's work queued so far (the gradients of this range are final there).
    if (queue_ != stream_ && ready_ != nullptr) {
      if (cudaEventRecord(ready_, stream_) != cudaSuccess ||
          cudaStreamWaitEvent(queue_, ready_, 0) != cudaSuccess) {
        return absl::InternalError("cudaEventRecord/cudaStreamWaitEvent before ncclAllReduce");
      }
    }
    return Enqueued("ncclAllReduce", ncclAllReduce(data, data, static_cast<size_t>(count),
                                                   ncclFloat32, ncclSum, comm_, queue_));
  }

  absl::Status WaitQueued() override {
    if (comm_ == nullptr) return NcclError("ncclAllReduce", ncclInvalidUsage);
    if (absl::Status s = Drained("queued ncclAllReduce", queue_); !s.ok()) return s;
    // The host saw the sums finish; the event orders the engine's stream after them all the same.
    if (queue_ != stream_ && done_ != nullptr) {
      if (cudaEventRecord(done_, queue_) != cudaSuccess ||
          cudaStreamWaitEvent(stream_, done_, 0) != cudaSuccess) {
        return absl::InternalError("cudaEventRecord/cudaStreamWaitEvent after the queued sums");
      }
    }
    return absl::OkStatus();
  }

  absl::Status AllReduceSumHost(double* data, int64_t count) override {
    return ViaDevice(data, static_cast<size_t>(count) * sizeof(double), [&](void* d) {
      return Finish("ncclAllReduce", ncclAllReduce(d, d, static_cast<size_t>(count), ncclFloat64,
                                                   ncclSum, comm_, stream_));
    });
  }

  absl::Status Broadcast(void* data, size_t bytes, int root) override {
    return Finish("ncclBroadcast",
                  ncclBroadcast(data, data, bytes, ncclUint8, root, comm_, stream_));
  }

  absl::Status BroadcastHost(void* data, size_t bytes, int root) override {
    return ViaDevice(data, bytes, [&](void* d) { return Broadcast(d, bytes, root); });
  }

  absl::Status Barrier() override {
    double zero = 0;
    return AllReduceSumHost(&zero, 1);  // NCCL has no barrier; a one-element sum is one
  }

  // NCCL between the GPUs of one host never notices a dead peer; the waiting loop below (on the
  // engine's thread, which alone may abort the communicator) sees this and aborts.
  void Interrupt(const std::string& why) override {
    std::lock_guard<std::mutex> lock(interrupt_mu_);
    interrupt_why_ = why;
    interrupted_.store(true);
  }

 private:
  // Stages host bytes through a device buffer around a collective.
  template <typename F>
  absl::Status ViaDevice(void* host, size_t bytes, F&& collective) {
    absl::StatusOr<std::unique_ptr<Buffer>> buf = device_.Allocate(std::max<size_t>(bytes, 8));
    if (!buf.ok()) return buf.status();
    device_.FromHost((*buf)->data(), host, bytes);
    if (absl::Status s = collective((*buf)->data()); !s.ok()) return s;
    device_.ToHost(host, (*buf)->data(), bytes);
    return absl::OkStatus();
  }

  // Waits for the enqueued collective: NCCL's enqueue (non-blocking communicators may return
  // ncclInProgress) and then the stream, until the deadline; past it the communicator is aborted.
  absl::Status Finish(const char* call, ncclResult_t r) {
    if (absl::Status s = Enqueued(call, r); !s.ok()) return s;
    return Drained(call, stream_);
  }

  // Waits until NCCL has taken the call (a non-blocking communicator must not be given the next
  // one before); the device work itself may still run.
  absl::Status Enqueued(const char* call, ncclResult_t r) {
    if (r != ncclSuccess && r != ncclInProgress) return NcclError(call, r);
    return Poll(call, [] { return cudaSuccess; });
  }

  // Waits until `stream`'s work (the collectives on it among it) has finished.
  absl::Status Drained(const char* call, cudaStream_t stream) {
    return Poll(call, [stream] { return cudaStreamQuery(stream); });
  }

  // Polls NCCL's asynchronous state and `query` (cudaErrorNotReady: not yet) until both are done,
  // until the deadline; past it the communicator is aborted.
  template <typename Query>
  absl::Status Poll(const char* call, Query query) {
    const absl::Time deadline = absl::Now() + timeout_;
    for (;;) {
      ncclResult_t async = ncclSuccess;
      if (ncclCommGetAsyncError(comm_, &async) != ncclSuccess) return NcclError(call, async);
      if (async != ncclSuccess && async != ncclInProgress) return NcclError(call, async);
      if (async == ncclSuccess) {
        const cudaError_t q = query();
        if (q == cudaSuccess) return absl::OkStatus();
        if (q != cudaErrorNotReady) {
          return absl::InternalError(absl::StrCat(call, ": ", cudaGetErrorString(q)));
        }
      }
      if (interrupted_.load()) {
        (void)ncclCommAbort(comm_);
        comm_ = nullptr;
        std::lock_guard<std::mutex> lock(interrupt_mu_);
        return absl::UnavailableError(absl::StrCat(call, " on rank ", rank_, " of ", size_,
                                                   " interrupted: ", interrupt_why_));
      }
      if (absl::Now() > deadline) {
        (void)ncclCommAbort(comm_);
        comm_ = nullptr;
        return absl::DeadlineExceededError(
            absl::StrCat("--collective-timeout: ", call, " on rank ", rank_, " of ", size_,
                         " did not finish within ", absl::FormatDuration(timeout_)));
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  ncclComm_t comm_;
  const int rank_, size_;
  Device& device_;
  cudaStream_t stream_;
  const absl::Duration timeout_;
  std::atomic<bool> interrupted_{false};
  std::mutex interrupt_mu_;
  std::string interrupt_why_;     // guarded by interrupt_mu_
  cudaStream_t queue_ = nullptr;  // the queued sums' stream (stream_ if none could be made)
  cudaEvent_t ready_ = nullptr;   // recorded on stream_ before each queued sum
  cudaEvent_t done_ = nullptr;    // recorded on queue_ after them
};

}  // namespace

absl::StatusOr<std::unique_ptr<Communicator>> MakeNcclCommunicator(const NcclSetup& setup,
                                                                   Device& device) {
  BackendState* state = device.Context().backend;
  if (state == nullptr) {
    return absl::InvalidArgumentError("--device: NCCL needs the CUDA device (use Gloo on cpu)");
  }
  if (cudaSetDevice(state->ordinal) != cudaSuccess) {
    return absl::InternalError("cudaSetDevice failed before NCCL initialisation");
  }
  ncclUniqueId id{};
  std::string mine;
  if (setup.rank == 0) {
    if (const ncclResult_t r = ncclGetUniqueId(&id); r != ncclSuccess) {
      return NcclError("ncclGetUniqueId", r);
    }
    mine.assign(id.internal, sizeof(id.internal));
  }
  absl::StatusOr<std::string> shared = setup.exchange_id(mine);
  if (!shared.ok()) return shared.status();
  if (shared->size() != sizeof(id.internal)) {
    return absl::UnavailableError("the rendezvous returned an NCCL id of the wrong size");
  }
  std::memcpy(id.internal, shared->data(), sizeof(id.internal));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  ncclResult_t r = ncclCommInitRankConfig(&comm, setup.world_size, id, setup.rank, &config);
  auto nccl = std::make_unique<NcclCommunicator>(comm, setup.rank, setup.world_size, device,
                                                 state->stream, setup.timeout);
  if (r != ncclSuccess && r != ncclInProgress) return NcclError("ncclCommInitRankConfig", r);
  const absl::Time deadline = absl::Now() + setup.timeout;
  do {
    if (ncclCommGetAsyncError(comm, &r) != ncclSuccess) break;
    if (r == ncclSuccess) return nccl;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  } while (r == ncclInProgress && absl::Now() < deadline);
  if (r == ncclInProgress) {
    return absl::DeadlineExceededError(
        absl::StrCat("--rendezvous-timeout: rank ", setup.rank, " of ", setup.world_size,
                     ": the NCCL gang did not form within ", absl::FormatDuration(setup.timeout)));
  }
  return NcclError("ncclCommInitRankConfig", r);
}

}  // namespace parity::kernels
