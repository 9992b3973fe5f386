// The backend interface: a device owns memory (Buffer), orders work (Stream) and exposes its op
// tables. The CPU backend (cpu/) is the readable reference; a CUDA backend plugs in by
// implementing the same three classes and filling OpTable<float> (double tables are optional and
// exist on CPU for finite-difference gradient checks).
//
// Model code holds raw T* into buffers and passes them to ops; it moves memory only through the
// device's Copy/Zero/ToHost/FromHost (checkpoints, per-expert row counts for the grouped expert
// GEMMs, metrics at logging steps) and their queued forms FromHostAsync/ToHostAsync (a training
// step's token ids and losses, which must not make the host wait once per micro-batch). Every
// pointer the model hands to an op is a device pointer, never host memory (the routing plan and
// the router biases included); the one exception is sum_squares's result (op_table.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>

#include "absl/status/statusor.h"
#include "kernels/backend/op_table.h"
#include "kernels/backend/op_table_bf16.h"

namespace parity::kernels {

// A block of device memory, 64-byte aligned, zero-initialised. Owned by whoever allocated it.
class Buffer {
 public:
  virtual ~Buffer() = default;
  virtual void* data() = 0;
  virtual size_t bytes() const = 0;
  virtual void CopyToHost(void* dst, size_t offset, size_t n) const = 0;
  virtual void CopyFromHost(const void* src, size_t offset, size_t n) = 0;
  template <typename T>
  T* as() {
    return static_cast<T*>(data());
  }
};

// Host memory for the queued transfers (Device::AllocateHost): on CUDA page-locked, so that a
// queued copy neither stages through a bounce buffer nor makes the host wait. Host memory, not
// device memory: not in the device's AllocatedBytes. Owned by whoever allocated it.
class HostBuffer {
 public:
  virtual ~HostBuffer() = default;
  virtual void* data() = 0;
  virtual size_t bytes() const = 0;
  template <typename T>
  T* as() {
    return static_cast<T*>(data());
  }
};

// How often a device was asked for what makes the host wait for it — a blocking transfer or a
// stream synchronisation — and for queued transfers (which do not wait), as far as the backend
// counts them: the CPU device does, so that tests can pin how often a training step waits; a
// backend that does not reports zeros.
struct TransferCounts {
  int64_t to_host = 0;      // ToHost calls
  int64_t from_host = 0;    // FromHost calls
  int64_t synchronize = 0;  // DefaultStream().Synchronize() calls
  int64_t queued = 0;       // FromHostAsync and ToHostAsync calls
  int64_t Waits() const { return to_host + from_host + synchronize; }
};

// Device work recorded once and replayed with one launch (on CUDA a graph). The recording fixes
// the work's pointers and host-side arguments; the memory behind the pointers may change between
// launches (that is what a replay reads).
class Graph {
 public:
  virtual ~Graph() = default;
  virtual absl::Status Launch() = 0;
};

// An ordered queue of work. On CPU every op is synchronous, so Synchronize is a no-op.
class Stream {
 public:
  virtual ~Stream() = default;
  virtual void Synchronize() = 0;
};

class Device {
 public:
  virtual ~Device() = default;
  virtual std::string_view Name() const = 0;
  virtual absl::StatusOr<std::unique_ptr<Buffer>> Allocate(size_t bytes) = 0;
  // Bytes requested through Allocate so far, freed or not (0 where a backend does not count);
  // what core/memory_estimate.h is checked against.
  virtual size_t AllocatedBytes() const { return 0; }
  // The high-water mark of device memory handed out at once: live buffers, plus ops' scratch
  // where the backend tracks it (a stream-ordered pool's used-memory peak). What a run's summary
  // reports as peak_device_memory_bytes beside the planner's estimate. A backend that frees
  // nothing during a run may leave the default, everything it allocated.
  virtual size_t PeakBytes() const { return AllocatedBytes(); }
  virtual Stream& DefaultStream() = 0;
  // Raw-pointer transfers on the default stream (pointers come from this device's buffers).
  virtual void Copy(void* dst, const void* src, size_t bytes) = 0;  // device → device
  virtual void Zero(void* dst, size_t bytes) = 0;
  virtual void ToHost(void* host_dst, const void* src, size_t bytes) = 0;
  virtual void FromHost(void* dst, const void* host_src, size_t bytes) = 0;
  // The same transfers queued on the default stream: they return at once and happen in stream
  // order, so FromHostAsync's source must stay unchanged, and ToHostAsync's destination unread,
  // until DefaultStream().Synchronize() (or a blocking call) returns. Host memory from
  // AllocateHost keeps them asynchronous; any other host memory is correct too, but on CUDA a
  // copy into pageable memory waits.
  virtual void FromHostAsync(void* dst, const void* host_src, size_t bytes) = 0;
  virtual void ToHostAsync(void* host_dst, const void* src, size_t bytes) = 0;
  virtual absl::StatusOr<std::unique_ptr<HostBuffer>> AllocateHost(size_t bytes) = 0;
  virtual TransferCounts Transfers() const { return {}; }
  // Records `work`, the ops it queues on the default stream, as a Graph: on CUDA by stream
  // capture (the work is recorded, not run; each Launch replays all of it with one launch), on the
  // CPU by keeping `work` itself to run at each Launch, so that the same code path runs on both.
  // `work` may queue only device work — no blocking transfer, no synchronisation, no host read of a
  // device result (on CUDA they fail the recording, reported here) — and must not reference
  // anything that dies before the Graph.
  virtual absl::StatusOr<std::unique_ptr<Graph>> Record(std::function<void()> work) = 0;
  // The context ops run with (thread pool, FLOP counter). Owned by the device.
  virtual OpContext& Context() = 0;
  // Op tables; nullptr where the backend has no kernels for that precision.
  virtual const OpTable<float>* OpsF32() const = 0;
  virtual const OpTable<double>* OpsF64() const = 0;
  // The bf16 mode's table (op_table_bf16.h); nullptr where the backend has no bf16 mode.
  virtual const Bf16OpTable* OpsBf16() const { return nullptr; }
};

template <typename T>
const OpTable<T>* OpsFor(const Device& device) {
  if constexpr (sizeof(T) == sizeof(float)) {
    return device.OpsF32();
  } else {
    return device.OpsF64();
  }
}

struct CpuDeviceOptions {
  int threads = 1;  // thread-pool size; BLAS runs single-threaded inside pool chunks
};
// The CPU backend (cpu/cpu_device.cc).
std::unique_ptr<Device> MakeCpuDevice(const CpuDeviceOptions& options);

struct CudaDeviceOptions {
  int ordinal = 0;  // CUDA device index, after CUDA_VISIBLE_DEVICES
};
// The CUDA backend (cuda/cuda_device.cu). FAILED_PRECONDITION when there is no usable GPU (no
// driver, no device, ordinal out of range); UNIMPLEMENTED in a build without CUDA
// (backend/no_cuda.cc). Name() is "cuda:<GPU model>", e.g. "cuda:NVIDIA H200".
absl::StatusOr<std::unique_ptr<Device>> MakeCudaDevice(const CudaDeviceOptions& options);

}  // namespace parity::kernels
