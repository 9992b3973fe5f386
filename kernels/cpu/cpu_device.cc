// The CPU backend: aligned host buffers, a synchronous stream, a thread pool, and the op tables
// filled from the reference kernels in ops_*.h for float and double, and the bf16 mode's
// emulation (ops_bf16.h).
#include <cblas.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/backend/device.h"
#include "kernels/backend/memory_counts.h"
#include "kernels/cpu/ops_attention.h"
#include "kernels/cpu/ops_bf16.h"
#include "kernels/cpu/ops_dense.h"
#include "kernels/cpu/ops_grouped.h"
#include "kernels/cpu/ops_moe.h"
#include "kernels/cpu/ops_optim.h"

namespace parity::kernels {
namespace {

class CpuBuffer final : public Buffer {
 public:
  CpuBuffer(void* data, size_t bytes, std::shared_ptr<MemoryCounts> counts)
      : data_(data), bytes_(bytes), counts_(std::move(counts)) {}
  ~CpuBuffer() override {
    std::free(data_);
    counts_->Freed(bytes_);
  }
  void* data() override { return data_; }
  size_t bytes() const override { return bytes_; }
  void CopyToHost(void* dst, size_t offset, size_t n) const override {
    std::memcpy(dst, static_cast<const char*>(data_) + offset, n);
  }
  void CopyFromHost(const void* src, size_t offset, size_t n) override {
    std::memcpy(static_cast<char*>(data_) + offset, src, n);
  }

 private:
  void* data_;  // owned, from aligned_alloc
  size_t bytes_;
  std::shared_ptr<MemoryCounts> counts_;  // the device's, shared with its other buffers
};

class CpuHostBuffer final : public HostBuffer {
 public:
  CpuHostBuffer(void* data, size_t bytes) : data_(data), bytes_(bytes) {}
  ~CpuHostBuffer() override { std::free(data_); }
  void* data() override { return data_; }
  size_t bytes() const override { return bytes_; }

 private:
  void* data_;  // owned, from aligned_alloc
  size_t bytes_;
};

// Nothing to wait for on the CPU; the calls are counted (Device::Transfers) all the same.
class CpuStream final : public Stream {
 public:
  explicit CpuStream(TransferCounts& counts) : counts_(counts) {}
  void Synchronize() override { ++counts_.synchronize; }

 private:
  TransferCounts& counts_;
};

template <typename T>
OpTable<T> MakeCpuTable() {
  OpTable<T> t;
  t.embedding_forward = &cpu::EmbeddingForward<T>;
  t.embedding_backward = &cpu::EmbeddingBackward<T>;
  t.rmsnorm_forward = &cpu::RmsNormForward<T>;
  t.rmsnorm_backward = &cpu::RmsNormBackward<T>;
  t.matmul_forward = &cpu::MatmulForward<T>;
  t.matmul_backward = &cpu::MatmulBackward<T>;
  t.swiglu_forward = &cpu::SwiGluForward<T>;
  t.swiglu_backward = &cpu::SwiGluBackward<T>;
  t.rope_forward = &cpu::RopeForward<T>;
  t.rope_backward = &cpu::RopeBackward<T>;
  t.attention_forward = &cpu::AttentionForward<T>;
  t.attention_backward = &cpu::AttentionBackward<T>;
  t.cross_entropy_forward = &cpu::CrossEntropyForward<T>;
  t.cross_entropy_backward = &cpu::CrossEntropyBackward<T>;
  t.route_forward = &cpu::RouteForward<T>;
  t.route_backward = &cpu::RouteBackward<T>;
  t.permute_forward = &cpu::PermuteForward<T>;
  t.permute_backward = &cpu::PermuteBackward<T>;
  t.combine_forward = &cpu::CombineForward<T>;
  t.combine_backward = &cpu::CombineBackward<T>;
  t.grouped_matmul_forward = &cpu::GroupedMatmulForward<T>;
  t.grouped_matmul_backward = &cpu::GroupedMatmulBackward<T>;
  t.routing_plan = &cpu::RoutingPlan;
  t.bias_update = &cpu::BiasUpdate;
  t.sum_squares = &cpu::SumSquares<T>;
  t.adamw_update = &cpu::AdamWUpdate<T>;
  t.adamw_multi_tensor = &cpu::AdamWMultiTensor<T>;
  return t;
}

// The CPU's recording: the work itself, run at each launch (CPU ops run as they are called, so
// there is nothing to capture; what a graph saves on a GPU — launch overhead — does not exist).
class CpuGraph final : public Graph {
 public:
  explicit CpuGraph(std::function<void()> work) : work_(std::move(work)) {}
  absl::Status Launch() override {
    work_();
    return absl::OkStatus();
  }

 private:
  std::function<void()> work_;
};

class CpuDevice final : public Device {
 public:
  explicit CpuDevice(const CpuDeviceOptions& options)
      : pool_(options.threads),
        context_{.pool = &pool_, .flops = &flops_},
        f32_(MakeCpuTable<float>()),
        f64_(MakeCpuTable<double>()),
        bf16_(cpu::MakeBf16Table()) {
    // One owner of the cores: our pool splits GEMMs; OpenBLAS must not spawn its own threads.
    openblas_set_num_threads(1);
  }
  std::string_view Name() const override { return "cpu"; }
  absl::StatusOr<std::unique_ptr<Buffer>> Allocate(size_t bytes) override {
    const size_t rounded = (bytes + 63) / 64 * 64 + 64;
    void* p = std::aligned_alloc(64, rounded);
    if (p == nullptr) {
      return absl::ResourceExhaustedError(absl::StrCat("cpu: cannot allocate ", bytes, " bytes"));
    }
    std::memset(p, 0, rounded);
    counts_->Allocated(bytes);
    return std::make_unique<CpuBuffer>(p, bytes, counts_);
  }
  size_t AllocatedBytes() const override { return counts_->allocated; }
  // CPU ops keep their temporaries in their own host vectors, not in device buffers, so the
  // peak is that of the live buffers.
  size_t PeakBytes() const override { return counts_->peak; }
  Stream& DefaultStream() override { return stream_; }
  void Copy(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void Zero(void* dst, size_t bytes) override { std::memset(dst, 0, bytes); }
  void ToHost(void* dst, const void* src, size_t bytes) override {
    ++transfers_.to_host;
    std::memcpy(dst, src, bytes);
  }
  void FromHost(void* dst, const void* src, size_t bytes) override {
    ++transfers_.from_host;
    std::memcpy(dst, src, bytes);
  }
  void ToHostAsync(void* dst, const void* src, size_t bytes) override {
    ++transfers_.queued;
    std::memcpy(dst, src, bytes);
  }
  void FromHostAsync(void* dst, const void* src, size_t bytes) override {
    ++transfers_.queued;
    std::memcpy(dst, src, bytes);
  }
  absl::StatusOr<std::unique_ptr<HostBuffer>> AllocateHost(size_t bytes) override {
    void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64 + 64);
    if (p == nullptr) {
      return absl::ResourceExhaustedError(
          absl::StrCat("cpu: cannot allocate ", bytes, " bytes of host memory"));
    }
    return std::make_unique<CpuHostBuffer>(p, bytes);
  }
  TransferCounts Transfers() const override { return transfers_; }
  absl::StatusOr<std::unique_ptr<Graph>> Record(std::function<void()> work) override {
    return std::make_unique<CpuGraph>(std::move(work));
  }
  OpContext& Context() override { return context_; }
  const OpTable<float>* OpsF32() const override { return &f32_; }
  const OpTable<double>* OpsF64() const override { return &f64_; }
  const Bf16OpTable* OpsBf16() const override { return &bf16_; }

 private:
  ThreadPool pool_;
  FlopCounter flops_;
  OpContext context_;
  TransferCounts transfers_;
  CpuStream stream_{transfers_};
  OpTable<float> f32_;
  OpTable<double> f64_;
  Bf16OpTable bf16_;  // the emulation (cpu/ops_bf16.h)
  std::shared_ptr<MemoryCounts> counts_ = std::make_shared<MemoryCounts>();
};

}  // namespace

std::unique_ptr<Device> MakeCpuDevice(const CpuDeviceOptions& options) {
  return std::make_unique<CpuDevice>(options);
}

}  // namespace parity::kernels
