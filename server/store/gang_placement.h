// PlaceGang: where a gang's ranks go, as one pure function both stores call (memory and
// PostgreSQL read the pool, call it, and write what it chose), so that placement cannot drift
// between them. The rule: each rank needs `threads_per_rank` CPU threads (a CPU gang) or
// gpus / ranks GPUs, each with at least `gpu_memory_bytes` free (a GPU gang), and
// `memory_bytes` of host memory (0 = unknown); a worker hosts as many ranks as its offer holds.
// Fewer hosts first: workers are taken by how many ranks they can host, most first (ties by
// worker id), which needs the fewest workers; ranks are numbered in that order (rank 0 on the
// first). A run pinned to a dataset copy goes only to workers that registered it. All ranks or
// none: nullopt when the pool cannot host them all.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "parity/v1/sweep.pb.h"
#include "parity/v1/worker.pb.h"
#include "server/store/gang_queue.h"
#include "server/store/run_queue.h"

namespace parity::server {

// What a gang asks, from its run's resources.
struct GangAsk {
  uint32_t ranks = 2;
  uint32_t threads_per_rank = 1;  // a CPU gang's (gpus == 0)
  uint32_t gpus = 0;              // the whole gang's; a multiple of ranks
  uint64_t gpu_memory_bytes = 0;  // per GPU; 0 = unknown
  uint64_t memory_bytes = 0;      // host memory per rank; 0 = unknown
  std::string dataset_pin;        // data.dataset_digest: only workers holding that copy host it
};

// A worker of the pool and what it has free.
struct GangCandidate {
  std::string worker_id;
  ResourceOffer offer;
  std::vector<std::string> datasets;  // digests of the dataset copies it registered
};

// How many ranks of `ask` the candidate can host, and their devices (each rank's, in rank
// order). None without the pinned copy, if the run pins one (as for ordinary runs,
// lease_runs.sql: a rank given another copy would fail DATA_MISMATCH).
inline std::vector<std::vector<uint32_t>> RankDevices(const GangAsk& ask,
                                                      const GangCandidate& candidate) {
  std::vector<std::vector<uint32_t>> ranks;
  const std::vector<std::string>& held = candidate.datasets;
  if (!ask.dataset_pin.empty() &&
      std::find(held.begin(), held.end(), ask.dataset_pin) == held.end()) {
    return ranks;
  }
  const ResourceOffer& offer = candidate.offer;
  uint64_t capacity = 0;
  std::vector<uint32_t> gpus;
  if (ask.gpus == 0) {
    capacity = offer.cpu_threads / std::max<uint32_t>(ask.threads_per_rank, 1);
  } else {
    if (ask.ranks == 0 || ask.gpus % ask.ranks != 0) return ranks;
    for (const ResourceOffer::Gpu& gpu : GpusLargestFirst(offer)) {
      if (gpu.memory_bytes == 0 || gpu.memory_bytes >= ask.gpu_memory_bytes) {
        gpus.push_back(gpu.index);
      }
    }
    capacity = gpus.size() / (ask.gpus / ask.ranks);
  }
  if (ask.memory_bytes != 0 && offer.host_memory_bytes != 0) {
    capacity = std::min<uint64_t>(capacity, offer.host_memory_bytes / ask.memory_bytes);
  }
  capacity = std::min<uint64_t>(capacity, ask.ranks);
  for (uint64_t r = 0; r < capacity; ++r) {
    if (ask.gpus == 0) {
      ranks.push_back({offer.cpu_device_index});
    } else {
      const uint32_t per_rank = ask.gpus / ask.ranks;
      ranks.emplace_back(gpus.begin() + r * per_rank, gpus.begin() + (r + 1) * per_rank);
    }
  }
  return ranks;
}

// What a gang asks, from its run's spec.
inline GangAsk AskOf(const v1::RunSpec& spec) {
  const v1::ResourceRequest& r = spec.resources();
  return {.ranks = std::max<uint32_t>(r.ranks(), 1),
          .threads_per_rank = std::max<uint32_t>(r.cpu_threads(), 1),
          .gpus = r.gpus(),
          .gpu_memory_bytes = r.gpu_memory_bytes(),
          .memory_bytes = r.memory_bytes(),
          .dataset_pin = spec.data().dataset_digest()};
}

// Devices as an offer: a LeaseRun's free devices (OfferOf, worker_requests.h), or a worker's
// registered devices, all free — whether the live fleet could ever host a gang (the
// reservation's guard). `Devices` is any range of v1::Device.
template <typename Devices>
ResourceOffer OfferOfDevices(const Devices& devices) {
  ResourceOffer offer;
  bool have_cpu = false;
  for (const v1::Device& device : devices) {
    if (device.kind() == v1::DEVICE_KIND_CUDA) {
      offer.gpus.push_back({device.index(), device.memory_bytes()});
    } else if (device.kind() == v1::DEVICE_KIND_CPU) {
      offer.cpu_threads += std::max<uint32_t>(device.threads(), 1);
      offer.host_memory_bytes += device.memory_bytes();
      if (!have_cpu) offer.cpu_device_index = device.index();
      have_cpu = true;
    }
  }
  return offer;
}

inline std::optional<std::vector<GangSlot>> PlaceGang(const GangAsk& ask,
                                                      const std::vector<GangCandidate>& pool) {
  struct Fit {
    const GangCandidate* candidate;
    std::vector<std::vector<uint32_t>> ranks;
  };
  std::vector<Fit> fits;
  for (const GangCandidate& candidate : pool) {
    std::vector<std::vector<uint32_t>> ranks = RankDevices(ask, candidate);
    if (!ranks.empty()) fits.push_back({&candidate, std::move(ranks)});
  }
  std::sort(fits.begin(), fits.end(), [](const Fit& a, const Fit& b) {
    if (a.ranks.size() != b.ranks.size()) return a.ranks.size() > b.ranks.size();
    return a.candidate->worker_id < b.candidate->worker_id;
  });
  std::vector<GangSlot> slots;
  for (const Fit& fit : fits) {
    for (const std::vector<uint32_t>& devices : fit.ranks) {
      if (slots.size() == ask.ranks) break;
      slots.push_back({static_cast<uint32_t>(slots.size()), fit.candidate->worker_id, devices});
    }
    if (slots.size() == ask.ranks) return slots;
  }
  return std::nullopt;
}

}  // namespace parity::server
