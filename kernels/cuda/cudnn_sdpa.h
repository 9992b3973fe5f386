// Causal attention through cuDNN's fused scaled-dot-product attention (the bf16 mode), built with
// the cuDNN backend graph API (the frontend headers are not packaged): the forward and backward
// are each one operation graph of matmuls, pointwise ops and reductions in the pattern cuDNN's
// fused-attention engines recognise, read on the packed qkv buffer in place (no copies).
//
// Plans are built once per shape and pass, from heuristics, keeping only engines that do not
// note themselves non-deterministic; a shape cuDNN has no plan for (or ALiBi, which the graph
// does not express) is reported, and the caller runs the tensor-core kernels (flash_tc.h)
// instead. Both paths write lse[B,H,S] as the natural-log sum-exp of the scaled, masked scores,
// so a forward from one and a backward from the other agree.
//
// Plans can also be built without a GPU, for a device described in JSON (cuDNN ≥ 9.8's
// deviceless compilation): the CPU test suite checks that cuDNN accepts both graphs for an H200
// at the study's shapes, and which engine it picks.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "kernels/backend/op_table.h"
#include "kernels/cuda/cudnn_attention.h"

struct cudnnContext;  // cudnnHandle_t's target (cudnn.h stays in the .cc files)

namespace parity::kernels::cuda {

enum class SdpaPass { kForward, kBackward };

// A finalized execution plan for one pass at one shape (opaque; cudnn.h stays in the .cc).
class SdpaPlan;
struct SdpaPlanDeleter {
  void operator()(SdpaPlan* plan) const;
};
using SdpaPlanPtr = std::unique_ptr<SdpaPlan, SdpaPlanDeleter>;

// What a plan is, for logs and the GPU check.
struct SdpaPlanInfo {
  int64_t engine = -1;          // cuDNN's global engine index
  int64_t workspace_bytes = 0;  // device workspace one execution needs, bytes
};

// Why a shape is not for cuDNN before any graph is built (empty when it may be): ALiBi, head dims
// that are not a multiple of 8 or above 256 (core::kCudaMaxHeadDim), grouped heads that do not
// divide, more query rows than int32 counts.
std::string CudnnSdpaRefusal(const AttentionShape& shape);

// A device description in cuDNN's JSON form for deviceless plans (BuildSdpaPlan below): the lent
// H200 (sm_90, 132 SMs, 143,771 MiB).
const std::string& H200DevicePropertiesJson();

// Builds the plan for `pass` at `shape` for the device that `device_json` describes (deviceless),
// or, with an empty string, for the current CUDA device. The status names the step that failed
// (graph, heuristics, every candidate's finalize) with cuDNN's error text.
absl::StatusOr<SdpaPlanPtr> BuildSdpaPlan(SdpaPass pass, const AttentionShape& shape,
                                          const std::string& device_json);
SdpaPlanInfo Describe(const SdpaPlan& plan);

// CudnnSdpaBackward with another workspace cap than core::kCudaAttentionWorkspaceBytes, in bytes:
// a call that would need more runs as slices of the batch (for tests of the slicing).
bool CudnnSdpaBackwardWithin(const OpContext& ctx, const AttentionShape& s, Bf16* dqkv,
                             const Bf16* dout, const Bf16* out, const float* lse, const Bf16* qkv,
                             int64_t cap);

// Runs `plan` on `handle`'s stream: uids[i] is bound to pointers[i] (device buffers, or host
// scalars for the by-value tensors), `workspace` holds Describe(plan).workspace_bytes.
absl::Status ExecuteSdpaPlan(const SdpaPlan& plan, cudnnContext* handle, int64_t count,
                             const int64_t* uids, void* const* pointers, void* workspace);

// The tensor ids ExecuteSdpaPlan binds (forward: q, k, v, out, lse, scale, -inf; backward adds
// dout, dq, dk, dv, rowsum(dout·out) and one).
enum SdpaUid : int64_t {
  kSdpaQ = 1,
  kSdpaK,           // Kᵀ [B,Hkv,Dh,S] (the backward reshapes it back for dQ)
  kSdpaV,           // forward: V [B,Hkv,S,Dh]; backward: Vᵀ [B,Hkv,Dh,S]
  kSdpaO,           // [B,H,S,Dh]
  kSdpaStats,       // lse [B,H,S,1], fp32
  kSdpaScale,       // 1/√Dh, a host float
  kSdpaNegInf,      // −∞, a host float: the causal mask's fill
  kSdpaOne,         // 1, a host float
  kSdpaDO,          // [B,H,S,Dh]
  kSdpaDQ,          // into dqkv
  kSdpaDK,          // into dqkv
  kSdpaDV,          // into dqkv
  kSdpaSoftmaxSum,  // rowsum(dO·O) [B,H,S,1], fp32 scratch
};

}  // namespace parity::kernels::cuda
