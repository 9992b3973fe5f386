#include "worker/device_inventory.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"

namespace parity::worker {
namespace {

// The few driver API entry points we need; CUresult is an int, CUdevice an int.
using CuInit = int (*)(unsigned);
using CuDeviceGetCount = int (*)(int*);
using CuDeviceGet = int (*)(int*, int);
using CuDeviceGetName = int (*)(char*, int, int);
using CuDeviceTotalMem = int (*)(size_t*, int);

}  // namespace

uint64_t HostMemoryBytes() {
  long pages = sysconf(_SC_PHYS_PAGES);
  long page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
}

std::vector<parity::v1::Device> DiscoverCudaDevices() {
  std::vector<parity::v1::Device> out;
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) return out;
  auto init = reinterpret_cast<CuInit>(dlsym(lib, "cuInit"));
  auto count = reinterpret_cast<CuDeviceGetCount>(dlsym(lib, "cuDeviceGetCount"));
  auto get = reinterpret_cast<CuDeviceGet>(dlsym(lib, "cuDeviceGet"));
  auto name = reinterpret_cast<CuDeviceGetName>(dlsym(lib, "cuDeviceGetName"));
  auto mem = reinterpret_cast<CuDeviceTotalMem>(dlsym(lib, "cuDeviceTotalMem_v2"));
  int n = 0;
  if (init != nullptr && count != nullptr && get != nullptr && init(0) == 0 && count(&n) == 0) {
    for (int i = 0; i < n; ++i) {
      int dev = 0;
      if (get(&dev, i) != 0) continue;
      parity::v1::Device d;
      d.set_kind(parity::v1::DEVICE_KIND_CUDA);
      d.set_index(static_cast<uint32_t>(i));
      char buf[256] = {};
      if (name != nullptr && name(buf, sizeof buf - 1, dev) == 0) d.set_name(buf);
      size_t bytes = 0;
      if (mem != nullptr && mem(&bytes, dev) == 0) d.set_memory_bytes(bytes);
      out.push_back(std::move(d));
    }
  }
  // The driver stays loaded: unloading it after cuInit is not supported.
  return out;
}

std::vector<parity::v1::Device> DiscoverDevices(const InventoryOptions& options) {
  std::vector<parity::v1::Device> out;
  parity::v1::Device cpu;
  cpu.set_kind(parity::v1::DEVICE_KIND_CPU);
  cpu.set_index(0);
  cpu.set_name("cpu");
  cpu.set_memory_bytes(HostMemoryBytes());
  cpu.set_threads(options.threads > 0 ? options.threads
                                      : std::max(1u, std::thread::hardware_concurrency()));
  out.push_back(cpu);
  if (options.discover_gpus) {
    for (parity::v1::Device& d : DiscoverCudaDevices()) out.push_back(std::move(d));
  }
  return out;
}

DeviceSlots::DeviceSlots(std::vector<parity::v1::Device> devices, uint32_t max_runs)
    : devices_(std::move(devices)), max_runs_(std::max(1u, max_runs)) {
  for (const parity::v1::Device& d : devices_) {
    if (d.kind() == parity::v1::DEVICE_KIND_CPU) total_threads_ += d.threads();
  }
}

uint32_t DeviceSlots::FreeThreadsLocked() const {
  uint32_t used = 0;
  for (const auto& [id, g] : grants_) used += g.threads;
  return used >= total_threads_ ? 0 : total_threads_ - used;
}

std::vector<parity::v1::Device> DeviceSlots::FreeDevices() const {
  absl::MutexLock lock(&mu_);
  std::vector<parity::v1::Device> out;
  if (grants_.size() >= max_runs_) return out;
  std::set<uint32_t> busy;
  for (const auto& [id, g] : grants_) busy.insert(g.gpu_indices.begin(), g.gpu_indices.end());
  const uint32_t free_threads = FreeThreadsLocked();
  for (const parity::v1::Device& d : devices_) {
    if (d.kind() == parity::v1::DEVICE_KIND_CPU) {
      if (free_threads == 0) continue;
      parity::v1::Device c = d;
      c.set_threads(free_threads);
      out.push_back(std::move(c));
    } else if (!busy.contains(d.index())) {
      out.push_back(d);
    }
  }
  return out;
}

absl::StatusOr<DeviceGrant> DeviceSlots::Acquire(const std::string& run_id,
                                                 const parity::v1::ResourceRequest& request,
                                                 const std::vector<uint32_t>& device_indices) {
  absl::MutexLock lock(&mu_);
  if (grants_.contains(run_id))
    return absl::AlreadyExistsError(absl::StrCat("run ", run_id, " already holds devices"));
  if (grants_.size() >= max_runs_) return absl::FailedPreconditionError("worker is at --max-runs");
  std::set<uint32_t> busy;
  for (const auto& [id, g] : grants_) busy.insert(g.gpu_indices.begin(), g.gpu_indices.end());
  DeviceGrant grant;
  // A CPU run's lease names the CPU device (index 0 too): only a GPU run's indices are ordinals.
  std::vector<uint32_t> wanted = request.gpus() > 0 ? device_indices : std::vector<uint32_t>{};
  if (wanted.empty() && request.gpus() > 0) {
    for (const parity::v1::Device& d : devices_) {
      if (d.kind() == parity::v1::DEVICE_KIND_CUDA && !busy.contains(d.index()) &&
          wanted.size() < request.gpus()) {
        wanted.push_back(d.index());
      }
    }
  }
  if (wanted.size() < request.gpus()) {
    return absl::FailedPreconditionError(
        absl::StrCat("run needs ", request.gpus(), " GPUs, ", wanted.size(), " free"));
  }
  for (uint32_t idx : wanted) {
    const bool exists =
        std::any_of(devices_.begin(), devices_.end(), [&](const parity::v1::Device& d) {
          return d.kind() == parity::v1::DEVICE_KIND_CUDA && d.index() == idx;
        });
    if (!exists || busy.contains(idx)) {
      return absl::FailedPreconditionError(
          absl::StrCat("GPU ", idx, " is not free on this worker"));
    }
  }
  grant.gpu_indices = std::move(wanted);
  const uint32_t free_threads = FreeThreadsLocked();
  const uint32_t share = std::max(1u, total_threads_ / max_runs_);
  uint32_t want =
      request.cpu_threads() > 0 ? request.cpu_threads() : (request.gpus() > 0 ? 1u : share);
  grant.threads = std::max(1u, std::min(want, std::max(free_threads, 1u)));
  grants_[run_id] = grant;
  return grant;
}

void DeviceSlots::Release(const std::string& run_id) {
  absl::MutexLock lock(&mu_);
  grants_.erase(run_id);
}

size_t DeviceSlots::active_runs() const {
  absl::MutexLock lock(&mu_);
  return grants_.size();
}

std::vector<DeviceUsage> DeviceSlots::Usage() const {
  absl::MutexLock lock(&mu_);
  std::set<uint32_t> busy_gpus;
  uint32_t threads_booked = 0;
  for (const auto& [id, g] : grants_) {
    busy_gpus.insert(g.gpu_indices.begin(), g.gpu_indices.end());
    threads_booked += g.threads;
  }
  std::vector<DeviceUsage> usage;
  for (const parity::v1::Device& d : devices_) {
    if (d.kind() == parity::v1::DEVICE_KIND_CPU) {
      usage.push_back({d, threads_booked > 0, threads_booked});
    } else {
      usage.push_back({d, busy_gpus.contains(d.index()), 0});
    }
  }
  return usage;
}

}  // namespace parity::worker
