// What a worker offers: its CPU threads and CUDA GPUs, and which of them are free right now.
//
// GPU discovery goes through the CUDA driver API loaded with dlopen("libcuda.so.1"), so the worker
// builds and runs on machines without CUDA or without a driver (it then reports zero GPUs).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "parity/v1/sweep.pb.h"
#include "parity/v1/worker.pb.h"

namespace parity::worker {

struct InventoryOptions {
  // CPU threads to offer (threads); 0 = std::thread::hardware_concurrency().
  uint32_t threads = 0;
  // Look for CUDA GPUs.
  bool discover_gpus = true;
};

// The CPU (index 0, threads, host memory) followed by every CUDA GPU found.
std::vector<parity::v1::Device> DiscoverDevices(const InventoryOptions& options);
// CUDA GPUs through the driver API; empty when there is no driver or no GPU (never fails).
std::vector<parity::v1::Device> DiscoverCudaDevices();
// Physical memory of the host (bytes).
uint64_t HostMemoryBytes();

// What one leased run was given.
struct DeviceGrant {
  uint32_t threads = 0;
  std::vector<uint32_t> gpu_indices = {};
};

// One device the worker offers and whether a run holds it now.
struct DeviceUsage {
  parity::v1::Device device;
  bool busy = false;            // a GPU granted to a run; the CPU while any run books threads
  uint32_t threads_booked = 0;  // CPU only: threads booked by runs (threads)
};

// Books devices to runs. Thread-safe: the lease loop acquires, supervisor completions release.
class DeviceSlots {
 public:
  // `max_runs` caps concurrent runs (≥ 1). Each CPU run gets its requested threads or at least
  // the fair share threads/max_runs, whichever is larger, within what is free.
  DeviceSlots(std::vector<parity::v1::Device> devices, uint32_t max_runs);

  // Devices to offer in LeaseRun now; empty when the worker is full.
  std::vector<parity::v1::Device> FreeDevices() const;
  // Books devices for `run_id`. `device_indices` are the lease's: for a GPU run the CUDA ordinals
  // granted (empty: take the first free ones); for a CPU run the CPU device's index, ignored.
  // FAILED_PRECONDITION when the GPUs are not free.
  absl::StatusOr<DeviceGrant> Acquire(const std::string& run_id,
                                      const parity::v1::ResourceRequest& request,
                                      const std::vector<uint32_t>& device_indices);
  void Release(const std::string& run_id);
  size_t active_runs() const;
  // Every device with what is booked on it now (for metrics).
  std::vector<DeviceUsage> Usage() const;
  const std::vector<parity::v1::Device>& devices() const { return devices_; }

 private:
  uint32_t FreeThreadsLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::vector<parity::v1::Device> devices_;
  const uint32_t max_runs_;
  uint32_t total_threads_ = 0;  // set in the constructor, then constant
  mutable absl::Mutex mu_;
  std::map<std::string, DeviceGrant> grants_ ABSL_GUARDED_BY(mu_);  // run id → its devices
};

}  // namespace parity::worker
