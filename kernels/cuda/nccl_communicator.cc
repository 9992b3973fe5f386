// The NCCL communicator of the CUDA backend (kernels/comm/communicator.h). Collectives run on the
// engine's stream (BackendState::stream) so they are ordered with the ops around them. The
// communicator is created non-blocking (ncclConfig_t::blocking = 0) so that forming the gang and
// every collective can be given up after a deadline (ncclCommAbort) instead of hanging on a dead
// peer: a step's device work is waited for here, polling the stream and NCCL's async error.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstring>
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
      : comm_(comm),
        rank_(rank),
        size_(size),
        device_(device),
        stream_(stream),
        timeout_(timeout) {}
  ~NcclCommunicator() override {
    if (comm_ != nullptr) (void)ncclCommAbort(comm_);  // safe whatever state it is in
  }

  int rank() const override { return rank_; }
  int world_size() const override { return size_; }
  std::string_view Name() const override { return "nccl"; }

  absl::Status AllReduceSum(float* data, int64_t count) override {
    return Finish("ncclAllReduce", ncclAllReduce(data, data, static_cast<size_t>(count),
                                                 ncclFloat32, ncclSum, comm_, stream_));
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
    const absl::Time deadline = absl::Now() + timeout_;
    for (;;) {
      if (r != ncclSuccess && r != ncclInProgress) return NcclError(call, r);
      ncclResult_t async = ncclSuccess;
      if (ncclCommGetAsyncError(comm_, &async) != ncclSuccess) return NcclError(call, async);
      if (async != ncclSuccess && async != ncclInProgress) return NcclError(call, async);
      if (async == ncclSuccess) {
        const cudaError_t q = cudaStreamQuery(stream_);
        if (q == cudaSuccess) return absl::OkStatus();
        if (q != cudaErrorNotReady) {
          return absl::InternalError(absl::StrCat(call, ": ", cudaGetErrorString(q)));
        }
      }
      if (absl::Now() > deadline) {
        (void)ncclCommAbort(comm_);
        comm_ = nullptr;
        return absl::DeadlineExceededError(
            absl::StrCat("--collective-timeout: ", call, " on rank ", rank_, " of ", size_,
                         " did not finish within ", absl::FormatDuration(timeout_)));
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
      r = ncclSuccess;
    }
  }

  ncclComm_t comm_;
  const int rank_, size_;
  Device& device_;
  cudaStream_t stream_;
  const absl::Duration timeout_;
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
