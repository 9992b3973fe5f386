// The engine's communicator: the collectives data-parallel training needs, over the ranks of one
// gang. Three implementations: world size 1 (no copies, no sockets), Gloo over TCP for the CPU
// backend (gloo_communicator.cc), NCCL for the CUDA backend (kernels/cuda/nccl_communicator.cc,
// built with CUDA). MakeCommunicator picks by the device and runs the rendezvous: rank 0 hosts the
// gang's key-value store (kv_store.h) and reports its address; the others dial it.
//
// Every collective is called by every rank in the same order (the trainer's loop is the same
// program on every rank). "Device" pointers are memory of the engine's Device (host memory on the
// CPU backend, GPU memory on CUDA, ordered on the device's default stream); "Host" variants take
// host memory on every backend. After a sum every rank holds the same bits (Gloo's ring reduces
// each chunk once and copies it; NCCL's ring likewise), so replicas never drift.
//
// Errors: Unavailable when a peer died, refused or the gang could not form; DeadlineExceeded when
// a rendezvous or a collective ran past its timeout. Both mean the gang is broken: the caller
// stops and the whole gang restarts from the last checkpoint (parity-train exits 7). A gang's
// communicator is watched (gang_watch.h): a rank that leaves without MarkFinished — killed,
// crashed, stopped on an error — fails the others' collectives within a second or two, whatever
// the collective library notices.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "kernels/backend/device.h"
#include "kernels/backend/device_choice.h"

namespace parity::kernels {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  virtual std::string_view Name() const = 0;  // "local", "gloo", "nccl"

  // In place: data[i] = Σ over ranks of data[i] (device memory, `count` floats).
  virtual absl::Status AllReduceSum(float* data, int64_t count) = 0;
  // In place over host doubles (losses, byte counts, expert loads, flags).
  virtual absl::Status AllReduceSumHost(double* data, int64_t count) = 0;
  // Copies `bytes` of device memory from rank `root` to every rank.
  virtual absl::Status Broadcast(void* data, size_t bytes, int root) = 0;
  virtual absl::Status BroadcastHost(void* data, size_t bytes, int root) = 0;
  virtual absl::Status Barrier() = 0;

  // Sums that are only queued — NCCL on a stream of its own, ordered after the device work the
  // engine queued so far — and waited for together by WaitQueued: what lets a gradient sum
  // overlap the rest of the backward on a GPU. `data` must not be written until WaitQueued
  // returns. Backends that sum host memory (local, Gloo) say false and are never asked.
  virtual bool QueuesOnDevice() const { return false; }
  virtual absl::Status QueueAllReduceSum(float* data, int64_t count) {
    return AllReduceSum(data, count);
  }
  // Every queued sum finished (or the gang is broken: Unavailable / DeadlineExceeded), and the
  // engine's later device work ordered after them.
  virtual absl::Status WaitQueued() { return absl::OkStatus(); }

  // Makes the collective in flight (on another thread) and every later one fail promptly with
  // Unavailable carrying `why`. Thread-safe; called by the gang's watch when a rank left.
  virtual void Interrupt(const std::string& /*why*/) {}
  // This rank's run ended normally and it calls no further collective: its leaving is not a
  // failure the others must stop for (the gang's watch tells them so).
  virtual void MarkFinished() {}
};

// How long a collective may stay blocked after the gang broke and the backend was interrupted
// before the process is declared wedged (a woken collective returns in milliseconds).
inline constexpr absl::Duration kInterruptGrace = absl::Seconds(5);

// How this process joins its gang (parity-train's --rank, --world-size, --rendezvous-listen,
// --rendezvous, --gang-epoch, --rendezvous-timeout, --collective-timeout, --comm-host; the
// token from PARITY_RENDEZVOUS_TOKEN).
struct CommOptions {
  int rank = 0;
  int world_size = 1;
  std::string listen_host;     // rank 0: where its rendezvous store listens (an OS-chosen port)
  std::string address;         // ranks > 0: rank 0's store, "host:port"
  std::string transport_host;  // where this rank's Gloo transport listens; "" = the interface
                               // that routes to rank 0 (rank 0: listen_host)
  uint64_t gang_epoch = 0;     // the scheduler's attempt epoch; a rank of another is refused
  std::string run_id;          // presented at the store; a rank of another run is refused
  absl::Duration rendezvous_timeout = absl::Seconds(300);
  absl::Duration collective_timeout = absl::Minutes(30);
  // The gang's secret presented at the store. Rank 0: "" = draw one (NewGangToken), reported
  // through on_listening; ranks > 0: rank 0's, from PARITY_RENDEZVOUS_TOKEN (never argv).
  std::string token;
  // Rank 0: called once its store listens, with the address and the token the others must be
  // given (the token is a secret: only the worker that relays it may see it).
  std::function<void(const std::string& address, const std::string& token)> on_listening;
  // Called from the gang's watch thread when the gang broke (a rank left) and this rank's
  // collective stayed blocked `interrupt_grace` past the backend's Interrupt — a library that
  // cannot be woken (Gloo). The process cannot get its thread back: parity-train reports the
  // status and exits (7). Unset: the collective waits out --collective-timeout.
  std::function<void(const absl::Status& why)> on_wedged;
  absl::Duration interrupt_grace = kInterruptGrace;
};

// InvalidArgument naming the flag: world size < 1, rank outside [0, world size), rank 0 without
// --rendezvous-listen or another rank without --rendezvous or a token (world size > 1),
// non-positive timeouts.
absl::Status ValidateCommOptions(const CommOptions& options);

// World size 1: a no-op communicator. Otherwise the rendezvous and the backend's library.
absl::StatusOr<std::unique_ptr<Communicator>> MakeCommunicator(const CommOptions& options,
                                                               DeviceKind kind, Device& device);

// The single-process communicator (every collective is the identity).
std::unique_ptr<Communicator> MakeLocalCommunicator();

// The key prefix of one gang's attempt: run id and epoch, so a stale rank's keys never meet a
// newer gang's even if it got past the store's HELLO.
std::string GangKeyPrefix(const CommOptions& options);

// The NCCL communicator (kernels/cuda/nccl_communicator.cc; Unimplemented without CUDA).
// `exchange_id` is called once: rank 0 passes the id it created and gets it back, the others pass
// "" and get rank 0's. `device` must be the CUDA device; collectives run on its stream.
struct NcclSetup {
  int rank = 0;
  int world_size = 1;
  absl::Duration timeout = absl::Seconds(300);  // of ncclCommInitRank (the gang forming)
  std::function<absl::StatusOr<std::string>(const std::string& id)> exchange_id;
};
absl::StatusOr<std::unique_ptr<Communicator>> MakeNcclCommunicator(const NcclSetup& setup,
                                                                   Device& device);

}  // namespace parity::kernels
