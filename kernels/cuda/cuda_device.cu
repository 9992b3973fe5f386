// The CUDA backend: device buffers, the device's stream, cuBLAS/cuBLASLt handles and workspace
// (BackendState), and the op tables filled from ops_*.cu: fp32 (the parity mode) and bf16 (the
// throughput mode). There is no fp64 table: the CPU backend keeps the finite-difference checks.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/backend/device.h"
#include "kernels/backend/memory_counts.h"
#include "kernels/cuda/backend_state.h"
#include "kernels/cuda/ops.h"

namespace parity::kernels {
namespace cuda {

void Die(const char* call, const char* detail, const char* file, int line) {
  std::fprintf(stderr, "parity cuda: %s failed at %s:%d: %s\n", call, file, line, detail);
  std::fflush(stderr);
  std::abort();
}

}  // namespace cuda

namespace {

constexpr size_t kWorkspaceBytes = size_t{32} << 20;  // cuBLASLt's recommendation for Hopper

class CudaBuffer final : public Buffer {
 public:
  CudaBuffer(cuda::DeviceMemory memory, size_t bytes, cudaStream_t stream,
             std::shared_ptr<MemoryCounts> counts)
      : memory_(std::move(memory)), bytes_(bytes), stream_(stream), counts_(std::move(counts)) {}
  ~CudaBuffer() override { counts_->Freed(bytes_); }
  void* data() override { return memory_.get(); }
  size_t bytes() const override { return bytes_; }
  void CopyToHost(void* dst, size_t offset, size_t n) const override {
    PARITY_CUDA_CHECK(cudaMemcpyAsync(dst, static_cast<const char*>(memory_.get()) + offset, n,
                                      cudaMemcpyDeviceToHost, stream_));
    PARITY_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
  void CopyFromHost(const void* src, size_t offset, size_t n) override {
    PARITY_CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(memory_.get()) + offset, src, n,
                                      cudaMemcpyHostToDevice, stream_));
    // The caller may free or reuse `src` as soon as we return.
    PARITY_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }

 private:
  cuda::DeviceMemory memory_;
  size_t bytes_;
  cudaStream_t stream_;  // the device's stream; buffers must not outlive their device
  std::shared_ptr<MemoryCounts> counts_;  // the device's, shared with its other buffers
};

// Page-locked host memory (cudaMallocHost), for queued transfers that do not wait.
class PinnedHostBuffer final : public HostBuffer {
 public:
  PinnedHostBuffer(void* data, size_t bytes) : data_(data), bytes_(bytes) {}
  ~PinnedHostBuffer() override { (void)cudaFreeHost(data_); }
  void* data() override { return data_; }
  size_t bytes() const override { return bytes_; }

 private:
  void* data_;
  size_t bytes_;
};

class CudaStream final : public Stream {
 public:
  explicit CudaStream(cudaStream_t stream) : stream_(stream) {}
  void Synchronize() override { PARITY_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

 private:
  cudaStream_t stream_;
};

// The entries both tables have, by name: each name is overloaded in ops.h, and an entry's type
// picks the overload (fp32 in OpTable<float>; bf16 where op_table_bf16.h stores bf16), so a
// precision mismatch does not compile.
template <typename Table>
void FillSharedEntries(Table& t) {
  t.embedding_forward = &cuda::EmbeddingForward;
  t.embedding_backward = &cuda::EmbeddingBackward;
  t.rmsnorm_forward = &cuda::RmsNormForward;
  t.rmsnorm_backward = &cuda::RmsNormBackward;
  t.matmul_forward = &cuda::MatmulForward;
  t.matmul_backward = &cuda::MatmulBackward;
  t.swiglu_forward = &cuda::SwiGluForward;
  t.swiglu_backward = &cuda::SwiGluBackward;
  t.rope_forward = &cuda::RopeForward;
  t.rope_backward = &cuda::RopeBackward;
  t.attention_forward = &cuda::AttentionForward;
  t.attention_backward = &cuda::AttentionBackward;
  t.cross_entropy_forward = &cuda::CrossEntropyForward;
  t.cross_entropy_backward = &cuda::CrossEntropyBackward;
  t.route_forward = &cuda::RouteForward;
  t.route_backward = &cuda::RouteBackward;
  t.permute_forward = &cuda::PermuteForward;
  t.permute_backward = &cuda::PermuteBackward;
  t.combine_forward = &cuda::CombineForward;
  t.combine_backward = &cuda::CombineBackward;
  t.grouped_matmul_forward = &cuda::GroupedMatmulForward;
  t.grouped_matmul_backward = &cuda::GroupedMatmulBackward;
  t.routing_plan = &cuda::RoutingPlan;
  t.bias_update = &cuda::BiasUpdate;
  t.sum_squares = &cuda::SumSquares;
  t.adamw_update = &cuda::AdamWUpdate;
}

OpTable<float> MakeCudaTable() {
  OpTable<float> t;
  FillSharedEntries(t);
  t.adamw_multi_tensor = &cuda::AdamWMultiTensor;  // the trainer's optimizer, in every precision
  return t;
}

// The bf16 mode's table: the shared entries, then the fp32-output and fp32-gradient GEMMs and the
// weight cast.
Bf16OpTable MakeCudaBf16Table() {
  // Every entry of Bf16OpTable is set below; a new entry changes the size and stops the build
  // here until it is filled (the GPU test also checks Complete()).
  static_assert(sizeof(Bf16OpTable) == 29 * sizeof(void (*)()),
                "Bf16OpTable changed: fill its new entries in MakeCudaBf16Table");
  Bf16OpTable t;
  FillSharedEntries(t);
  t.matmul_forward_f32 = &cuda::MatmulForward;
  t.matmul_backward_f32 = &cuda::MatmulBackward;
  t.cast_to_bf16 = &cuda::CastToBf16;
  return t;
}

// An instantiated CUDA graph, replayed on the device's stream.
class CudaGraph final : public Graph {
 public:
  CudaGraph(cudaGraphExec_t exec, cudaStream_t stream) : exec_(exec), stream_(stream) {}
  ~CudaGraph() override { (void)cudaGraphExecDestroy(exec_); }
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;
  absl::Status Launch() override {
    if (const cudaError_t e = cudaGraphLaunch(exec_, stream_); e != cudaSuccess) {
      return absl::InternalError(absl::StrCat("cuda: cudaGraphLaunch: ", cudaGetErrorString(e)));
    }
    return absl::OkStatus();
  }

 private:
  cudaGraphExec_t exec_;
  cudaStream_t stream_;
};

class CudaDevice final : public Device {
 public:
  // `context_bytes`: device memory in use before the device allocated anything of its own (the
  // CUDA context and module images; on a shared GPU, other processes' too).
  CudaDevice(std::string name, std::unique_ptr<BackendState> state, size_t context_bytes)
      : name_(std::move(name)),
        state_(std::move(state)),
        context_bytes_(context_bytes),
        stream_(state_->stream),
        context_{.pool = nullptr, .flops = &flops_, .backend = state_.get()},
        f32_(MakeCudaTable()),
        bf16_(MakeCudaBf16Table()) {}
  ~CudaDevice() override { (void)cudaStreamSynchronize(state_->stream); }

  std::string_view Name() const override { return name_; }
  absl::StatusOr<std::unique_ptr<Buffer>> Allocate(size_t bytes) override {
    void* p = nullptr;
    const cudaError_t e = cudaMalloc(&p, bytes == 0 ? 1 : bytes);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();  // clear the (non-sticky) allocation error
      return absl::ResourceExhaustedError(
          absl::StrCat(name_, ": cannot allocate ", bytes, " bytes: ", cudaGetErrorString(e)));
    }
    cuda::DeviceMemory memory(p);
    PARITY_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, state_->stream));
    counts_->Allocated(bytes);
    return std::make_unique<CudaBuffer>(std::move(memory), bytes, state_->stream, counts_);
  }
  // What Allocate was asked for, as the CPU device counts it (core/memory_estimate.h is checked
  // against it); the ops' scratch from the stream-ordered pool is not in it.
  size_t AllocatedBytes() const override { return counts_->allocated; }
  // The process's device high-water mark as nvidia-smi would show it, comparable with the
  // planner's estimate total: the context, the cuBLAS workspace, the most buffer bytes live at
  // once, and the stream-ordered pool's high-water mark of ops' scratch (buffers are allocated
  // before the first op, so the two peaks add).
  size_t PeakBytes() const override {
    uint64_t pool_high = 0;
    cudaMemPool_t pool = nullptr;
    if (cudaDeviceGetDefaultMemPool(&pool, state_->ordinal) == cudaSuccess) {
      (void)cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &pool_high);
    }
    // Scratch inside recorded graphs comes from the device's graph memory, not the pool.
    uint64_t graph_high = 0;
    (void)cudaDeviceGetGraphMemAttribute(state_->ordinal, cudaGraphMemAttrUsedMemHigh, &graph_high);
    return context_bytes_ + state_->workspace_bytes + counts_->peak +
           static_cast<size_t>(pool_high) + static_cast<size_t>(graph_high);
  }
  Stream& DefaultStream() override { return stream_; }
  void Copy(void* dst, const void* src, size_t bytes) override {
    PARITY_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, state_->stream));
  }
  void Zero(void* dst, size_t bytes) override {
    PARITY_CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, state_->stream));
  }
  void ToHost(void* host_dst, const void* src, size_t bytes) override {
    PARITY_CUDA_CHECK(
        cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, state_->stream));
    PARITY_CUDA_CHECK(cudaStreamSynchronize(state_->stream));
  }
  void FromHost(void* dst, const void* host_src, size_t bytes) override {
    PARITY_CUDA_CHECK(
        cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, state_->stream));
    // Pageable sources are staged before cudaMemcpyAsync returns, pinned ones are not: wait, so
    // the caller may reuse `host_src` either way.
    PARITY_CUDA_CHECK(cudaStreamSynchronize(state_->stream));
  }
  void ToHostAsync(void* host_dst, const void* src, size_t bytes) override {
    PARITY_CUDA_CHECK(
        cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, state_->stream));
  }
  void FromHostAsync(void* dst, const void* host_src, size_t bytes) override {
    PARITY_CUDA_CHECK(
        cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, state_->stream));
  }
  absl::StatusOr<std::unique_ptr<HostBuffer>> AllocateHost(size_t bytes) override {
    void* p = nullptr;
    if (const cudaError_t e = cudaMallocHost(&p, bytes == 0 ? 1 : bytes); e != cudaSuccess) {
      (void)cudaGetLastError();
      return absl::ResourceExhaustedError(
          absl::StrCat(name_, ": cannot allocate ", bytes,
                       " bytes of pinned host memory: ", cudaGetErrorString(e)));
    }
    return std::make_unique<PinnedHostBuffer>(p, bytes);
  }
  // Stream capture in thread-local mode: this thread's work on the stream is recorded, not run,
  // and a call that would make it wait (a blocking copy, a synchronisation) invalidates the
  // capture, which EndCapture then reports. Ops' stream-ordered scratch becomes the graph's own
  // allocation nodes.
  absl::StatusOr<std::unique_ptr<Graph>> Record(std::function<void()> work) override {
    const cudaStream_t stream = state_->stream;
    if (const cudaError_t e = cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal);
        e != cudaSuccess) {
      return absl::InternalError(
          absl::StrCat(name_, ": cudaStreamBeginCapture: ", cudaGetErrorString(e)));
    }
    work();
    cudaGraph_t graph = nullptr;
    if (const cudaError_t e = cudaStreamEndCapture(stream, &graph); e != cudaSuccess) {
      (void)cudaGetLastError();
      if (graph != nullptr) (void)cudaGraphDestroy(graph);
      return absl::FailedPreconditionError(absl::StrCat(
          name_, ": recording a graph failed (cudaStreamEndCapture: ", cudaGetErrorString(e),
          "): the recorded work waited for the device or used an uncapturable call"));
    }
    cudaGraphExec_t exec = nullptr;
    const cudaError_t e = cudaGraphInstantiate(&exec, graph, 0);
    (void)cudaGraphDestroy(graph);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      return absl::InternalError(
          absl::StrCat(name_, ": cudaGraphInstantiate: ", cudaGetErrorString(e)));
    }
    return std::make_unique<CudaGraph>(exec, stream);
  }
  OpContext& Context() override { return context_; }
  const OpTable<float>* OpsF32() const override { return &f32_; }
  const OpTable<double>* OpsF64() const override { return nullptr; }
  const Bf16OpTable* OpsBf16() const override { return &bf16_; }

 private:
  std::string name_;
  std::unique_ptr<BackendState> state_;
  CudaStream stream_;
  FlopCounter flops_;
  OpContext context_;
  OpTable<float> f32_;
  Bf16OpTable bf16_;
  size_t context_bytes_;
  std::shared_ptr<MemoryCounts> counts_ = std::make_shared<MemoryCounts>();
};

absl::Status CudaError(const char* what, cudaError_t e) {
  return absl::FailedPreconditionError(absl::StrCat("cuda: ", what, ": ", cudaGetErrorString(e)));
}

absl::Status BlasError(const char* what, cublasStatus_t s) {
  return absl::FailedPreconditionError(
      absl::StrCat("cuda: ", what, ": ", cublasGetStatusString(s)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Device>> MakeCudaDevice(const CudaDeviceOptions& options) {
  int count = 0;
  // With no driver this fails ("CUDA driver version is insufficient...") rather than returning 0.
  if (const cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess) {
    (void)cudaGetLastError();
    return CudaError("no usable GPU", e);
  }
  if (count == 0) return absl::FailedPreconditionError("cuda: no usable GPU: no CUDA device");
  if (options.ordinal < 0 || options.ordinal >= count) {
    return absl::FailedPreconditionError(
        absl::StrCat("cuda: device ordinal ", options.ordinal, " out of range [0, ", count, ")"));
  }
  if (const cudaError_t e = cudaSetDevice(options.ordinal); e != cudaSuccess) {
    return CudaError("cudaSetDevice", e);
  }
  cudaDeviceProp prop{};
  if (const cudaError_t e = cudaGetDeviceProperties(&prop, options.ordinal); e != cudaSuccess) {
    return CudaError("cudaGetDeviceProperties", e);
  }
  if (prop.major < 7) {
    return absl::FailedPreconditionError(
        absl::StrCat("cuda: ", prop.name, " has compute capability ", prop.major, ".", prop.minor,
                     "; the kernels need 7.0 or newer"));
  }

  auto state = std::make_unique<BackendState>();
  state->ordinal = options.ordinal;
  cudaStream_t stream = nullptr;
  if (const cudaError_t e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
      e != cudaSuccess) {
    return CudaError("cudaStreamCreate", e);
  }
  state->stream_owner.reset(stream);
  state->stream = stream;
  // Keep freed scratch (cudaFreeAsync) cached in the pool instead of returning it at each sync.
  cudaMemPool_t pool = nullptr;
  if (cudaDeviceGetDefaultMemPool(&pool, options.ordinal) == cudaSuccess) {
    uint64_t keep = UINT64_MAX;
    (void)cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep);
  }
  // The context exists now (cudaSetDevice made it); what is in use is not ours to count as model
  // memory, but it is on the device all the same.
  size_t free_bytes = 0, total_bytes = 0;
  const size_t context_bytes =
      cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess ? total_bytes - free_bytes : 0;
  cublasLtHandle_t lt = nullptr;
  if (const cublasStatus_t s = cublasLtCreate(&lt); s != CUBLAS_STATUS_SUCCESS) {
    return BlasError("cublasLtCreate", s);
  }
  state->lt.reset(lt);
  cublasHandle_t blas = nullptr;
  if (const cublasStatus_t s = cublasCreate(&blas); s != CUBLAS_STATUS_SUCCESS) {
    return BlasError("cublasCreate", s);
  }
  state->blas.reset(blas);
  void* ws = nullptr;
  if (const cudaError_t e = cudaMalloc(&ws, kWorkspaceBytes); e != cudaSuccess) {
    (void)cudaGetLastError();
    return CudaError("workspace allocation", e);
  }
  state->workspace.reset(ws);
  state->workspace_bytes = kWorkspaceBytes;
  // cuBLAS on our stream, with our fixed workspace. Default math keeps at least the requested
  // precision — fp32 inputs under CUBLAS_COMPUTE_32F stay plain fp32, never TF32 (that needs
  // CUBLAS_TF32_TENSOR_OP_MATH or a FAST_TF32 compute type) — while bf16 inputs may use the tensor
  // cores, which pedantic math may refuse them; reductions stay in the fp32 compute type even
  // into a bf16 output (the rule the cuBLASLt plans follow, gemm.cc).
  if (cublasSetStream(blas, stream) != CUBLAS_STATUS_SUCCESS ||
      cublasSetWorkspace(blas, ws, kWorkspaceBytes) != CUBLAS_STATUS_SUCCESS ||
      cublasSetMathMode(
          blas, static_cast<cublasMath_t>(CUBLAS_DEFAULT_MATH |
                                          CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)) !=
          CUBLAS_STATUS_SUCCESS) {
    return absl::FailedPreconditionError("cuda: configuring the cuBLAS handle failed");
  }
  return std::make_unique<CudaDevice>(absl::StrCat("cuda:", prop.name), std::move(state),
                                      context_bytes);
}

}  // namespace parity::kernels
