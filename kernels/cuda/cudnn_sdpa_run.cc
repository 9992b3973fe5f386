// cuDNN attention at run time: one cuDNN handle per device state, plans built on first use of a
// shape and kept (a shape cuDNN refused is remembered too, so it is asked once), and the two
// entry points the bf16 attention ops call before falling back to the tensor-core kernels.
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/memory_estimate.h"
#include "kernels/cuda/backend_state.h"
#include "kernels/cuda/cudnn_graph.h"
#include "kernels/cuda/cudnn_sdpa.h"

namespace parity::kernels::cuda {

namespace {

// pass, batch, seq, heads, kv heads, head dim
using SdpaKey = std::array<int64_t, 6>;

SdpaKey KeyOf(SdpaPass pass, const AttentionShape& s) {
  return {static_cast<int64_t>(pass), s.batch, s.seq, s.heads, s.kv_heads, s.head_dim};
}

// "forward B8 S2048 H20/20 Dh128": the pass and shape a log line is about.
std::string Named(SdpaPass pass, const AttentionShape& s) {
  return absl::StrCat(pass == SdpaPass::kForward ? "forward" : "backward", " B", s.batch, " S",
                      s.seq, " H", s.heads, "/", s.kv_heads, " Dh", s.head_dim);
}

// One line to stderr, once per event: each plan, each refusal (the GPU check collects them).
void Say(const std::string& text) { std::fprintf(stderr, "cuDNN attention: %s\n", text.c_str()); }

// A run meets one or two shapes a pass (micro-batches of a step differ by at most one sequence);
// past this many, one plan goes (the first by key) and is rebuilt if its shape comes again.
constexpr size_t kMaxSdpaPlans = 32;

struct CudnnFree {
  void operator()(cudnnHandle_t h) const { (void)cudnnDestroy(h); }
};

}  // namespace

struct SdpaState {
  // Null when PARITY_CUDNN_ATTENTION=0 turned cuDNN attention off or no handle could be made:
  // then every call falls back.
  std::unique_ptr<cudnnContext, CudnnFree> handle;
  std::map<SdpaKey, SdpaPlanPtr> plans;  // null: cuDNN refused this shape
};

void SdpaStateDeleter::operator()(SdpaState* state) const { delete state; }

namespace {

SdpaState& SdpaOf(const OpContext& ctx) {
  BackendState& backend = State(ctx);
  if (backend.sdpa == nullptr) {
    backend.sdpa.reset(new SdpaState{});
    SdpaState& sdpa = *backend.sdpa;
    const char* env = std::getenv("PARITY_CUDNN_ATTENTION");
    if (env == nullptr || std::strcmp(env, "0") != 0) {
      cudnnHandle_t h = nullptr;
      if (const cudnnStatus_t s = cudnnCreate(&h); s != CUDNN_STATUS_SUCCESS) {
        Say(absl::StrCat("no cuDNN handle (", CudnnErrorText(s),
                         "); using the tensor-core kernels"));
      } else {
        sdpa.handle.reset(h);
      }
    }
  }
  return *backend.sdpa;
}

// The plan for `pass` at `s`, or null when cuDNN is off, unavailable or refused the shape (the
// first refusal of a shape is printed with its reason; the first plan with its engine).
const SdpaPlan* PlanFor(SdpaState& sdpa, SdpaPass pass, const AttentionShape& s,
                        cudaStream_t stream) {
  if (sdpa.handle == nullptr) return nullptr;
  const SdpaKey key = KeyOf(pass, s);
  if (auto it = sdpa.plans.find(key); it != sdpa.plans.end()) return it->second.get();
  // Building a plan loads a compiled kernel into the context, which a stream being recorded into
  // a CUDA graph must not see; graph replay records a shape's second micro-batch, after the
  // first built its plans eagerly, so this only declines a shape no eager call has met.
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &capturing) != cudaSuccess ||
      capturing != cudaStreamCaptureStatusNone) {
    return nullptr;
  }
  if (sdpa.plans.size() >= kMaxSdpaPlans) sdpa.plans.erase(sdpa.plans.begin());
  absl::StatusOr<SdpaPlanPtr> plan = BuildSdpaPlan(pass, s, "");
  if (!plan.ok()) {
    Say(absl::StrCat(Named(pass, s),
                     " runs on the tensor-core kernels: ", plan.status().message()));
    sdpa.plans[key] = nullptr;
    return nullptr;
  }
  const SdpaPlanInfo info = Describe(**plan);
  Say(absl::StrCat(Named(pass, s), " on engine ", info.engine, ", workspace ", info.workspace_bytes,
                   " bytes"));
  return (sdpa.plans[key] = *std::move(plan)).get();
}

// Runs the plan; on an execution error the shape is refused from then on (printed once) and the
// caller falls back, which rewrites every output the plan would have written. `row_floats` > 0
// asks for an fp32 scratch of that many values bound to pointers[count − 1] (the backward's
// row sums), allocated with the workspace in stream order.
bool Execute(SdpaState& sdpa, const SdpaPlan& plan, SdpaPass pass, const AttentionShape& s,
             cudaStream_t stream, int64_t count, const int64_t* uids, void** pointers,
             int64_t row_floats) {
  const int64_t workspace_bytes = Describe(plan).workspace_bytes;
  // Row sums first, rounded up to 256 bytes so the workspace after them stays aligned.
  const int64_t row_bytes = (row_floats * static_cast<int64_t>(sizeof(float)) + 255) / 256 * 256;
  void* scratch = nullptr;
  const int64_t total = workspace_bytes + row_bytes;
  if (total > 0) PARITY_CUDA_CHECK(cudaMallocAsync(&scratch, static_cast<size_t>(total), stream));
  if (row_floats > 0) pointers[count - 1] = scratch;
  void* workspace = workspace_bytes > 0 ? static_cast<char*>(scratch) + row_bytes : nullptr;
  absl::Status status;
  if (const cudnnStatus_t st = cudnnSetStream(sdpa.handle.get(), stream);
      st != CUDNN_STATUS_SUCCESS) {
    status = absl::InternalError(absl::StrCat("cudnnSetStream: ", CudnnErrorText(st)));
  } else {
    status = ExecuteSdpaPlan(plan, sdpa.handle.get(), count, uids, pointers, workspace);
  }
  if (scratch != nullptr) PARITY_CUDA_CHECK(cudaFreeAsync(scratch, stream));
  if (status.ok()) return true;
  Say(absl::StrCat(Named(pass, s),
                   " failed, falling back to the tensor-core kernels: ", status.message()));
  sdpa.plans[KeyOf(pass, s)] = nullptr;
  return false;
}

bool Aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

bool CudnnSdpaForward(const OpContext& ctx, const AttentionShape& s, Bf16* out, float* lse,
                      const Bf16* qkv) {
  if (s.batch * s.heads * s.seq == 0 || !Aligned16(qkv) || !Aligned16(out)) return false;
  SdpaState& sdpa = SdpaOf(ctx);
  const SdpaPlan* plan = PlanFor(sdpa, SdpaPass::kForward, s, State(ctx).stream);
  if (plan == nullptr) return false;
  float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(s.head_dim)));
  float neg_inf = -std::numeric_limits<float>::infinity();
  auto* base = const_cast<Bf16*>(qkv);
  const int64_t k_offset = s.heads * s.head_dim, v_offset = (s.heads + s.kv_heads) * s.head_dim;
  const std::array<int64_t, 7> uids{kSdpaQ,     kSdpaK,     kSdpaV,     kSdpaO,
                                    kSdpaStats, kSdpaScale, kSdpaNegInf};
  std::array<void*, 7> pointers{base, base + k_offset, base + v_offset, out, lse, &scale, &neg_inf};
  return Execute(sdpa, *plan, SdpaPass::kForward, s, State(ctx).stream,
                 static_cast<int64_t>(uids.size()), uids.data(), pointers.data(), 0);
}

namespace {

// One backward call over `s` (a slice of the batch) at the given buffers' first sequence.
bool BackwardSlice(const OpContext& ctx, SdpaState& sdpa, const SdpaPlan& plan,
                   const AttentionShape& s, Bf16* dqkv, const Bf16* dout, const Bf16* out,
                   const float* lse, const Bf16* qkv) {
  float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(s.head_dim)));
  float neg_inf = -std::numeric_limits<float>::infinity(), one = 1.0f;
  auto* base = const_cast<Bf16*>(qkv);
  const int64_t k_offset = s.heads * s.head_dim, v_offset = (s.heads + s.kv_heads) * s.head_dim;
  const std::array<int64_t, 13> uids{kSdpaQ,      kSdpaK,   kSdpaV,         kSdpaO,  kSdpaDO,
                                     kSdpaStats,  kSdpaDQ,  kSdpaDK,        kSdpaDV, kSdpaScale,
                                     kSdpaNegInf, kSdpaOne, kSdpaSoftmaxSum};
  std::array<void*, 13> pointers{base,
                                 base + k_offset,
                                 base + v_offset,
                                 const_cast<Bf16*>(out),
                                 const_cast<Bf16*>(dout),
                                 const_cast<float*>(lse),
                                 dqkv,
                                 dqkv + k_offset,
                                 dqkv + v_offset,
                                 &scale,
                                 &neg_inf,
                                 &one,
                                 nullptr};  // rowsum(dout·out): Execute's scratch
  return Execute(sdpa, plan, SdpaPass::kBackward, s, State(ctx).stream,
                 static_cast<int64_t>(uids.size()), uids.data(), pointers.data(),
                 s.batch * s.heads * s.seq);
}

}  // namespace

// cuDNN's deterministic backward keeps dP for the whole call in its workspace (B·H·S²·2 bytes:
// 1.34 GB at the 2B dense shape's micro-batch of 8), which the planner's memory estimate does not
// hold. So a call whose workspace would pass core::kCudaAttentionWorkspaceBytes runs as slices of
// the batch that each stay under it (each sequence's gradient depends on that sequence alone),
// and a shape whose single sequence passes it runs on the tensor-core kernels instead.
bool CudnnSdpaBackward(const OpContext& ctx, const AttentionShape& s, Bf16* dqkv, const Bf16* dout,
                       const Bf16* out, const float* lse, const Bf16* qkv) {
  return CudnnSdpaBackwardWithin(ctx, s, dqkv, dout, out, lse, qkv,
                                 static_cast<int64_t>(core::kCudaAttentionWorkspaceBytes));
}

bool CudnnSdpaBackwardWithin(const OpContext& ctx, const AttentionShape& s, Bf16* dqkv,
                             const Bf16* dout, const Bf16* out, const float* lse, const Bf16* qkv,
                             int64_t cap) {
  if (s.batch * s.heads * s.seq == 0 || !Aligned16(qkv) || !Aligned16(dqkv) || !Aligned16(dout) ||
      !Aligned16(out)) {
    return false;
  }
  SdpaState& sdpa = SdpaOf(ctx);
  const cudaStream_t stream = State(ctx).stream;
  const SdpaPlan* plan = PlanFor(sdpa, SdpaPass::kBackward, s, stream);
  if (plan == nullptr) return false;
  const int64_t workspace = Describe(*plan).workspace_bytes;
  if (workspace <= cap) return BackwardSlice(ctx, sdpa, *plan, s, dqkv, dout, out, lse, qkv);
  const int64_t per_sequence = (workspace + s.batch - 1) / s.batch;
  if (per_sequence > cap) {
    Say(absl::StrCat(Named(SdpaPass::kBackward, s), " needs ", per_sequence,
                     " bytes of workspace a sequence, over the ", cap,
                     " the memory estimate holds; it runs on the tensor-core kernels"));
    sdpa.plans[KeyOf(SdpaPass::kBackward, s)] = nullptr;
    return false;
  }
  const int64_t slice = cap / per_sequence;
  const int64_t ld = (s.heads + 2 * s.kv_heads) * s.head_dim, ldo = s.heads * s.head_dim;
  for (int64_t b0 = 0; b0 < s.batch; b0 += slice) {
    AttentionShape part = s;
    part.batch = std::min(slice, s.batch - b0);
    const SdpaPlan* part_plan = PlanFor(sdpa, SdpaPass::kBackward, part, stream);
    // A slice cuDNN will not run leaves earlier slices written; the fallback rewrites them all.
    if (part_plan == nullptr ||
        !BackwardSlice(ctx, sdpa, *part_plan, part, dqkv + b0 * s.seq * ld, dout + b0 * s.seq * ldo,
                       out + b0 * s.seq * ldo, lse + b0 * s.heads * s.seq, qkv + b0 * s.seq * ld)) {
      return false;
    }
  }
  return true;
}

}  // namespace parity::kernels::cuda
