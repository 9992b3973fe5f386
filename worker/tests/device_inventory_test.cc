#include "worker/device_inventory.h"

#include <iostream>

#include "gtest/gtest.h"

namespace parity::worker {
namespace {

parity::v1::Device Cpu(uint32_t threads) {
  parity::v1::Device d;
  d.set_kind(parity::v1::DEVICE_KIND_CPU);
  d.set_threads(threads);
  return d;
}
parity::v1::Device Gpu(uint32_t index) {
  parity::v1::Device d;
  d.set_kind(parity::v1::DEVICE_KIND_CUDA);
  d.set_index(index);
  d.set_memory_bytes(80ull << 30);
  return d;
}
parity::v1::ResourceRequest Threads(uint32_t n) {
  parity::v1::ResourceRequest r;
  r.set_cpu_threads(n);
  return r;
}

TEST(DeviceInventoryTest, CpuFirstWithTheThreadsAsked) {
  std::vector<parity::v1::Device> d = DiscoverDevices({.threads = 3, .discover_gpus = true});
  ASSERT_FALSE(d.empty());
  EXPECT_EQ(d[0].kind(), parity::v1::DEVICE_KIND_CPU);
  EXPECT_EQ(d[0].threads(), 3u);
  EXPECT_GT(d[0].memory_bytes(), 0u);
  for (size_t i = 1; i < d.size(); ++i) EXPECT_EQ(d[i].kind(), parity::v1::DEVICE_KIND_CUDA);
}

TEST(DeviceInventoryTest, NoDriverMeansNoGpusAndNoCrash) {
  std::vector<parity::v1::Device> gpus = DiscoverCudaDevices();
  if (!gpus.empty())
    GTEST_SKIP() << "a CUDA driver and GPU are present (" << gpus.size() << " GPUs)";
  EXPECT_EQ(DiscoverDevices({.threads = 2, .discover_gpus = true}).size(), 1u) << "just the CPU";
}

TEST(DeviceInventoryTest, GpusReportNameAndMemory) {
  std::vector<parity::v1::Device> gpus = DiscoverCudaDevices();
  if (gpus.empty()) GTEST_SKIP() << "no CUDA driver or GPU on this machine";
  for (const parity::v1::Device& g : gpus) {
    std::cout << "cuda:" << g.index() << " " << g.name() << " " << (g.memory_bytes() >> 20)
              << " MiB\n";
    EXPECT_EQ(g.kind(), parity::v1::DEVICE_KIND_CUDA);
    EXPECT_FALSE(g.name().empty());
    EXPECT_GT(g.memory_bytes(), 1ull << 30) << "a GPU reports its memory";
  }
}

TEST(DeviceSlotsTest, FairShareAndMaxRuns) {
  DeviceSlots slots({Cpu(8)}, /*max_runs=*/2);
  ASSERT_EQ(slots.FreeDevices().size(), 1u);
  EXPECT_EQ(slots.FreeDevices()[0].threads(), 8u);
  absl::StatusOr<DeviceGrant> a =
      slots.Acquire("a", Threads(0), {0});  // the lease names the CPU, index 0
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->threads, 4u) << "0 threads asked = the fair share 8/2";
  EXPECT_EQ(slots.FreeDevices()[0].threads(), 4u);
  absl::StatusOr<DeviceGrant> b = slots.Acquire("b", Threads(2), {});
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->threads, 2u);
  EXPECT_TRUE(slots.FreeDevices().empty()) << "at max_runs nothing is offered";
  EXPECT_EQ(slots.Acquire("c", Threads(1), {}).status().code(),
            absl::StatusCode::kFailedPrecondition);
  slots.Release("a");
  EXPECT_EQ(slots.active_runs(), 1u);
  EXPECT_EQ(slots.FreeDevices()[0].threads(), 6u);
}

TEST(DeviceSlotsTest, GpusAreBookedByIndex) {
  DeviceSlots slots({Cpu(4), Gpu(0), Gpu(1)}, /*max_runs=*/2);
  EXPECT_EQ(slots.FreeDevices().size(), 3u);
  parity::v1::ResourceRequest one_gpu;
  one_gpu.set_gpus(1);
  absl::StatusOr<DeviceGrant> a = slots.Acquire("a", one_gpu, {1});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->gpu_indices, std::vector<uint32_t>{1});
  EXPECT_EQ(a->threads, 1u);
  absl::StatusOr<DeviceGrant> cpu_run = slots.Acquire("cpu", Threads(1), {0});
  ASSERT_TRUE(cpu_run.ok()) << "a CPU run's device index is the CPU's, not GPU 0";
  EXPECT_TRUE(cpu_run->gpu_indices.empty());
  slots.Release("cpu");
  EXPECT_EQ(slots.Acquire("b", one_gpu, {1}).status().code(), absl::StatusCode::kFailedPrecondition)
      << "GPU 1 is taken";
  absl::StatusOr<DeviceGrant> b = slots.Acquire("b", one_gpu, {});
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->gpu_indices, std::vector<uint32_t>{0}) << "first free GPU when the lease names none";
}

}  // namespace
}  // namespace parity::worker
