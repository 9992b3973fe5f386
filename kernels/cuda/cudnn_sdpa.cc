#include "kernels/cuda/cudnn_sdpa.h"

#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <limits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/gpu_limits.h"
#include "kernels/cuda/cudnn_graph.h"

namespace parity::kernels::cuda {

// Short names for the caller's tensor ids inside the graphs.
constexpr int64_t kQ = kSdpaQ, kK = kSdpaK, kV = kSdpaV, kO = kSdpaO, kStats = kSdpaStats,
                  kScale = kSdpaScale, kNegInf = kSdpaNegInf, kOne = kSdpaOne, kDO = kSdpaDO,
                  kDQ = kSdpaDQ, kDK = kSdpaDK, kDV = kSdpaDV, kSoftmaxSum = kSdpaSoftmaxSum;

class SdpaPlan {
 public:
  SdpaPass pass = SdpaPass::kForward;
  AttentionShape shape{};
  // Declared in the order they are made, so they are destroyed plan first, device last.
  CudnnDescriptor device;
  CudnnGraphBuilder builder;  // owns every tensor and operation the graph points at
  CudnnDescriptor graph, engine_config, plan;
  SdpaPlanInfo info;
};

void SdpaPlanDeleter::operator()(SdpaPlan* plan) const { delete plan; }

SdpaPlanInfo Describe(const SdpaPlan& plan) { return plan.info; }

absl::Status ExecuteSdpaPlan(const SdpaPlan& plan, cudnnContext* handle, int64_t count,
                             const int64_t* uids, void* const* pointers, void* workspace) {
  absl::Status status;
  CudnnDescriptor pack =
      MakeCudnnDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, status, "variant pack");
  if (!status.ok()) return status;
  cudnnStatus_t s = cudnnBackendSetAttribute(pack.get(), CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS,
                                             CUDNN_TYPE_INT64, count, uids);
  if (s == CUDNN_STATUS_SUCCESS) {
    s = cudnnBackendSetAttribute(pack.get(), CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS,
                                 CUDNN_TYPE_VOID_PTR, count, pointers);
  }
  if (s == CUDNN_STATUS_SUCCESS) {
    s = cudnnBackendSetAttribute(pack.get(), CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR,
                                 1, &workspace);
  }
  if (s == CUDNN_STATUS_SUCCESS) s = cudnnBackendFinalize(pack.get());
  if (s == CUDNN_STATUS_SUCCESS) s = cudnnBackendExecute(handle, plan.plan.get(), pack.get());
  if (s != CUDNN_STATUS_SUCCESS) {
    return absl::InternalError(absl::StrCat("cuDNN attention execution: ", CudnnErrorText(s)));
  }
  return absl::OkStatus();
}

std::string CudnnSdpaRefusal(const AttentionShape& s) {
  if (s.positions == Positions::kAlibi) return "ALiBi positions (the graph has no ALiBi bias)";
  if (s.head_dim < 8 || s.head_dim > core::kCudaMaxHeadDim || s.head_dim % 8 != 0) {
    return absl::StrCat("head dim ", s.head_dim, " (cuDNN's path here takes multiples of 8 to ",
                        core::kCudaMaxHeadDim, ")");
  }
  if (s.kv_heads <= 0 || s.heads % s.kv_heads != 0) {
    return absl::StrCat(s.heads, " heads over ", s.kv_heads, " kv heads");
  }
  // cuDNN indexes rows and positions in 32 bits.
  const int64_t kMax = std::numeric_limits<int32_t>::max();
  if (s.batch * s.heads * s.seq > kMax) {
    return absl::StrCat(s.batch * s.heads * s.seq, " query rows (more than 2^31 - 1)");
  }
  return "";
}

const std::string& H200DevicePropertiesJson() {
  // Read off the lent H200 (driver 580, CUDA 13; bench/RESULTS.md, "GPU check"): the fields
  // cuDNN 9.19's device-property descriptor reads from JSON.
  static const std::string json =
      R"({"cudaDeviceId":0,"deviceName":"NVIDIA H200","deviceVer":900,"driverVer":13000,)"
      R"("maxGridSize":[2147483647,65535,65535],"maxBlockSize":[1024,1024,64],)"
      R"("regsPerBlock":65536,"multiProcessorCount":132,"warpSize":32,)"
      R"("maxSharedMemoryPerBlock":49152,"maxSharedMemoryPerBlockOptin":232448,)"
      R"("reservedSharedMemoryPerBlock":1024,"maxRegistersPerSM":65536,"maxCtasPerSM":32,)"
      R"("maxThreadsPerBlock":1024,"maxThreadsPerSM":2048,"pciDeviceId":0,"isTccDriver":0,)"
      R"("supportCoopLaunch":1,"totalGlobalMem":150754820096,"smClockRateKHz":1980000,)"
      R"("memClockRateKHz":3201000,"l2CacheSize":52428800})";
  return json;
}

namespace {

using Dims = std::vector<int64_t>;

// The shape's extents and the packed buffers' row strides, in elements.
struct Extents {
  int64_t b, h, hk, s, d;
  int64_t ld;   // qkv / dqkv row: (H + 2·Hkv)·Dh
  int64_t ldo;  // out / dout row: H·Dh
};

Extents ExtentsOf(const AttentionShape& s) {
  return Extents{s.batch,
                 s.heads,
                 s.kv_heads,
                 s.seq,
                 s.head_dim,
                 (s.heads + 2 * s.kv_heads) * s.head_dim,
                 s.heads * s.head_dim};
}

// Rows of a packed buffer as [B, heads, S, Dh] (or its transpose [B, heads, Dh, S]).
TensorSpec Packed(const Extents& e, int64_t heads, int64_t ld, bool transposed) {
  TensorSpec t;
  t.type = CUDNN_DATA_BFLOAT16;
  t.is_virtual = false;
  t.dims = transposed ? Dims{e.b, heads, e.d, e.s} : Dims{e.b, heads, e.s, e.d};
  t.strides = transposed ? Dims{e.s * ld, e.d, 1, ld} : Dims{e.s * ld, e.d, ld, 1};
  return t;
}

TensorSpec RowStats(const Extents& e) {
  return TensorSpec{{e.b, e.h, e.s, 1}, {e.h * e.s, e.s, 1, 1}, CUDNN_DATA_FLOAT, false, false};
}

TensorSpec HostScalar() {
  return TensorSpec{{1, 1, 1, 1}, {1, 1, 1, 1}, CUDNN_DATA_FLOAT, false, true};
}

Dims ScoreDims(const Extents& e) { return {e.b, e.h, e.s, e.s}; }
Dims ScoreStrides(const Extents& e) { return {e.h * e.s * e.s, e.s * e.s, e.s, 1}; }
Dims ScoreTransposedStrides(const Extents& e) { return {e.h * e.s * e.s, e.s * e.s, 1, e.s}; }
Dims RowDims(const Extents& e) { return {e.b, e.h, e.s, 1}; }
Dims RowStrides(const Extents& e) { return {e.h * e.s, e.s, 1, 1}; }

// A new virtual [B,H,S,S] tensor (scores, probabilities and their gradients), and a [B,H,S,1] one
// (per-row statistics), fp32 unless said.
int64_t Scores(CudnnGraphBuilder& g, const Extents& e, cudnnDataType_t type = CUDNN_DATA_FLOAT) {
  return g.Virtual(ScoreDims(e), ScoreStrides(e), type);
}
int64_t Rows(CudnnGraphBuilder& g, const Extents& e) {
  return g.Virtual(RowDims(e), RowStrides(e));
}

// scores with the causal mask applied: key j > query i becomes −∞.
int64_t CausalMask(CudnnGraphBuilder& g, const Extents& e, int64_t scores) {
  const int64_t row = Scores(g, e, CUDNN_DATA_INT32);
  g.Pointwise(CUDNN_POINTWISE_GEN_INDEX, scores, -1, -1, row, CUDNN_DATA_INT32, 2);
  const int64_t col = Scores(g, e, CUDNN_DATA_INT32);
  g.Pointwise(CUDNN_POINTWISE_GEN_INDEX, scores, -1, -1, col, CUDNN_DATA_INT32, 3);
  const int64_t keep = Scores(g, e, CUDNN_DATA_BOOLEAN);
  g.Pointwise(CUDNN_POINTWISE_CMP_GE, row, col, -1, keep, CUDNN_DATA_BOOLEAN);
  const int64_t masked = Scores(g, e);
  g.Pointwise(CUDNN_POINTWISE_BINARY_SELECT, scores, kNegInf, keep, masked);
  return masked;
}

// out = softmax(mask(q·kᵀ·scale))·v, stats = max + log Σ exp (the natural-log lse).
void ForwardGraph(CudnnGraphBuilder& g, const Extents& e) {
  g.Tensor(kQ, Packed(e, e.h, e.ld, false), "q");
  g.Tensor(kK, Packed(e, e.hk, e.ld, true), "k transposed");
  g.Tensor(kV, Packed(e, e.hk, e.ld, false), "v");
  g.Tensor(kO, Packed(e, e.h, e.ldo, false), "out");
  g.Tensor(kStats, RowStats(e), "lse");
  g.Tensor(kScale, HostScalar(), "scale");
  g.Tensor(kNegInf, HostScalar(), "-inf");

  const int64_t s = Scores(g, e);
  g.Matmul(kQ, kK, s);
  const int64_t scaled = Scores(g, e);
  g.Pointwise(CUDNN_POINTWISE_MUL, s, kScale, -1, scaled);
  const int64_t masked = CausalMask(g, e, scaled);
  const int64_t max = Rows(g, e);
  g.Reduce(CUDNN_REDUCE_TENSOR_MAX, masked, max);
  const int64_t shifted = Scores(g, e);
  g.Pointwise(CUDNN_POINTWISE_SUB, masked, max, -1, shifted);
  const int64_t exp = Scores(g, e);
  g.Pointwise(CUDNN_POINTWISE_EXP, shifted, -1, -1, exp);
  const int64_t sum = Rows(g, e);
  g.Reduce(CUDNN_REDUCE_TENSOR_ADD, exp, sum);
  const int64_t log = Rows(g, e);
  g.Pointwise(CUDNN_POINTWISE_LOG, sum, -1, -1, log);
  g.Pointwise(CUDNN_POINTWISE_ADD, max, log, -1, kStats);
  const int64_t p = Scores(g, e, CUDNN_DATA_BFLOAT16);
  g.Pointwise(CUDNN_POINTWISE_DIV, exp, sum, -1, p);
  g.Matmul(p, kV, kO);
}

// c = aᵀ·b over the scores, into `out` (a kv-head tensor); with grouped heads the full-head
// product is summed over each group first.
void ProductIntoKvHeads(CudnnGraphBuilder& g, const Extents& e, int64_t transposed_scores,
                        int64_t rhs, int64_t out) {
  if (e.h == e.hk) return g.Matmul(transposed_scores, rhs, out);
  const int64_t full =
      g.Virtual({e.b, e.h, e.s, e.d}, {e.h * e.s * e.d, e.s * e.d, e.d, 1}, CUDNN_DATA_BFLOAT16);
  g.Matmul(transposed_scores, rhs, full);
  g.Reduce(CUDNN_REDUCE_TENSOR_ADD, full, out);
}

// FlashAttention-2's backward as one graph: P = exp(mask(q·kᵀ·scale) − lse), dV = Pᵀ·dO,
// dS = P·(dO·vᵀ − rowsum(dO·O))·scale, dK = dSᵀ·q, dQ = dS·k. dQ is written directly (no fp32
// accumulation buffer with atomics): the deterministic form.
void BackwardGraph(CudnnGraphBuilder& g, const Extents& e) {
  g.Tensor(kQ, Packed(e, e.h, e.ld, false), "q");
  g.Tensor(kK, Packed(e, e.hk, e.ld, true), "k transposed");
  g.Tensor(kV, Packed(e, e.hk, e.ld, true), "v transposed");
  g.Tensor(kO, Packed(e, e.h, e.ldo, false), "out");
  g.Tensor(kDO, Packed(e, e.h, e.ldo, false), "dout");
  g.Tensor(kStats, RowStats(e), "lse");
  g.Tensor(kSoftmaxSum, RowStats(e), "rowsum(dout*out)");
  g.Tensor(kDQ, Packed(e, e.h, e.ld, false), "dq");
  g.Tensor(kDK, Packed(e, e.hk, e.ld, false), "dk");
  g.Tensor(kDV, Packed(e, e.hk, e.ld, false), "dv");
  g.Tensor(kScale, HostScalar(), "scale");
  g.Tensor(kNegInf, HostScalar(), "-inf");
  g.Tensor(kOne, HostScalar(), "one");

  const Dims head_dims{e.b, e.h, e.s, e.d}, head_strides{e.h * e.s * e.d, e.s * e.d, e.d, 1};
  const int64_t dout_out = g.Virtual(head_dims, head_strides);
  g.Pointwise(CUDNN_POINTWISE_MUL, kDO, kO, -1, dout_out);
  const int64_t row_sum = Rows(g, e);
  g.Reduce(CUDNN_REDUCE_TENSOR_ADD, dout_out, row_sum);
  g.Pointwise(CUDNN_POINTWISE_MUL, row_sum, kOne, -1, kSoftmaxSum);

  const int64_t s = Scores(g, e);
  g.Matmul(kQ, kK, s);
  const int64_t scaled = Scores(g, e);
  g.Pointwise(CUDNN_POINTWISE_MUL, s, kScale, -1, scaled);
  const int64_t shifted = Scores(g, e);
  g.Pointwise(CUDNN_POINTWISE_SUB, scaled, kStats, -1, shifted);
  const int64_t masked = CausalMask(g, e, shifted);
  const int64_t p = Scores(g, e);
  g.Pointwise(CUDNN_POINTWISE_EXP, masked, -1, -1, p);

  const int64_t p_t = g.Virtual(ScoreDims(e), ScoreTransposedStrides(e), CUDNN_DATA_BFLOAT16);
  g.Reshape(p, p_t);
  ProductIntoKvHeads(g, e, p_t, kDO, kDV);

  const int64_t dp = Scores(g, e);
  g.Matmul(kDO, kV, dp);
  const int64_t centred = Scores(g, e);
  g.Pointwise(CUDNN_POINTWISE_SUB, dp, kSoftmaxSum, -1, centred);
  const int64_t dp_p = Scores(g, e);
  g.Pointwise(CUDNN_POINTWISE_MUL, centred, p, -1, dp_p);
  const int64_t ds = Scores(g, e);
  g.Pointwise(CUDNN_POINTWISE_MUL, dp_p, kScale, -1, ds);

  const int64_t ds_t = g.Virtual(ScoreDims(e), ScoreTransposedStrides(e), CUDNN_DATA_BFLOAT16);
  g.Reshape(ds, ds_t);
  ProductIntoKvHeads(g, e, ds_t, kQ, kDK);

  TensorSpec k_rows = Packed(e, e.hk, e.ld, false);
  k_rows.is_virtual = true;
  const int64_t k = CudnnGraphBuilder::kFirstVirtualUid - 1;  // k as rows, viewed from kᵀ
  g.Tensor(k, k_rows, "k");
  g.Reshape(kK, k);
  g.Matmul(ds, k, kDQ);
}

absl::StatusOr<CudnnDescriptor> DeviceProperties(const std::string& json) {
  absl::Status status;
  CudnnDescriptor d =
      MakeCudnnDescriptor(CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR, status, "device properties");
  if (!status.ok()) return status;
  cudnnStatus_t s;
  if (json.empty()) {
    int device = 0;
    if (cudaGetDevice(&device) != cudaSuccess) {
      return absl::FailedPreconditionError("cuDNN attention: no current CUDA device");
    }
    const int32_t id = device;
    s = cudnnBackendSetAttribute(d.get(), CUDNN_ATTR_DEVICEPROP_DEVICE_ID, CUDNN_TYPE_INT32, 1,
                                 &id);
  } else {
    s = cudnnBackendSetAttribute(d.get(), CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION,
                                 CUDNN_TYPE_CHAR, static_cast<int64_t>(json.size()), json.data());
  }
  if (s == CUDNN_STATUS_SUCCESS) s = cudnnBackendFinalize(d.get());
  if (s != CUDNN_STATUS_SUCCESS) {
    return absl::FailedPreconditionError(
        absl::StrCat("cuDNN device properties: ", CudnnErrorText(s)));
  }
  return d;
}

// The engine an engine configuration runs, or null when cuDNN cannot say.
CudnnDescriptor EngineOf(cudnnBackendDescriptor_t engine_config) {
  absl::Status status;
  CudnnDescriptor engine = MakeCudnnDescriptor(CUDNN_BACKEND_ENGINE_DESCRIPTOR, status, "engine");
  if (!status.ok()) return nullptr;
  cudnnBackendDescriptor_t raw = engine.get();
  int64_t n = 0;
  if (cudnnBackendGetAttribute(engine_config, CUDNN_ATTR_ENGINECFG_ENGINE,
                               CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n,
                               &raw) != CUDNN_STATUS_SUCCESS) {
    return nullptr;
  }
  return engine;
}

bool NonDeterministic(cudnnBackendDescriptor_t engine) {
  // An engine that cannot say what it is is not trusted to repeat.
  if (engine == nullptr) return true;
  cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
  int64_t n = 0;
  if (cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                               CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &n,
                               notes) != CUDNN_STATUS_SUCCESS) {
    return true;
  }
  for (int64_t i = 0; i < n; ++i) {
    if (notes[i] == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC) return true;
  }
  return false;
}

int64_t GlobalIndex(cudnnBackendDescriptor_t engine) {
  int64_t n = 0, index = -1;
  if (engine == nullptr ||
      cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n,
                               &index) != CUDNN_STATUS_SUCCESS) {
    return -1;
  }
  return index;
}

// Finalizes the first deterministic candidate `mode`'s heuristics offer; false when none does,
// with every candidate's reason appended to `why`.
bool TryHeuristics(SdpaPlan& plan, cudnnBackendHeurMode_t mode, std::string& why) {
  absl::Status status;
  CudnnDescriptor heur = MakeCudnnDescriptor(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, status, "heur");
  if (!status.ok()) return absl::StrAppend(&why, status.message(), "; "), false;
  cudnnBackendDescriptor_t graph = plan.graph.get(), device = plan.device.get();
  cudnnStatus_t s = cudnnBackendSetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH,
                                             CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph);
  if (s == CUDNN_STATUS_SUCCESS) {
    s = cudnnBackendSetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1,
                                 &mode);
  }
  if (s == CUDNN_STATUS_SUCCESS) {
    s = cudnnBackendSetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_DEVICEPROP,
                                 CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &device);
  }
  if (s == CUDNN_STATUS_SUCCESS) s = cudnnBackendFinalize(heur.get());
  int64_t count = 0;
  if (s == CUDNN_STATUS_SUCCESS) {
    s = cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                 CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr);
  }
  if (s != CUDNN_STATUS_SUCCESS) {
    return absl::StrAppend(&why, "heuristics mode ", mode, ": ", CudnnErrorText(s), "; "), false;
  }
  std::vector<CudnnDescriptor> configs;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (int64_t i = 0; i < count; ++i) {
    configs.push_back(MakeCudnnDescriptor(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, status, "config"));
    if (!status.ok()) return absl::StrAppend(&why, status.message(), "; "), false;
    raw.push_back(configs.back().get());
  }
  int64_t returned = 0;
  if (count > 0) {
    s = cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                 CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &returned, raw.data());
    if (s != CUDNN_STATUS_SUCCESS) {
      return absl::StrAppend(&why, "heuristics results: ", CudnnErrorText(s), "; "), false;
    }
  }
  if (returned == 0) absl::StrAppend(&why, "heuristics mode ", mode, " offered no engine; ");
  for (int64_t i = 0; i < returned; ++i) {
    const CudnnDescriptor engine_of = EngineOf(raw[i]);
    const int64_t engine = GlobalIndex(engine_of.get());
    if (NonDeterministic(engine_of.get())) {
      absl::StrAppend(&why, "engine ", engine, " is non-deterministic; ");
      continue;
    }
    CudnnDescriptor exec =
        MakeCudnnDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, status, "plan");
    if (!status.ok()) return absl::StrAppend(&why, status.message(), "; "), false;
    s = cudnnBackendSetAttribute(exec.get(), CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
                                 CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &raw[i]);
    if (s == CUDNN_STATUS_SUCCESS) {
      s = cudnnBackendSetAttribute(exec.get(), CUDNN_ATTR_EXECUTION_PLAN_DEVICEPROP,
                                   CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &device);
    }
    if (s == CUDNN_STATUS_SUCCESS) s = cudnnBackendFinalize(exec.get());
    int64_t workspace = 0, n = 0;
    if (s == CUDNN_STATUS_SUCCESS) {
      s = cudnnBackendGetAttribute(exec.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                   CUDNN_TYPE_INT64, 1, &n, &workspace);
    }
    if (s != CUDNN_STATUS_SUCCESS) {
      // The configuration's own workspace figure, known before its plan finalizes.
      int64_t config_workspace = -1;
      (void)cudnnBackendGetAttribute(raw[i], CUDNN_ATTR_ENGINECFG_WORKSPACE_SIZE, CUDNN_TYPE_INT64,
                                     1, &n, &config_workspace);
      absl::StrAppend(&why, "engine ", engine, " (workspace ", config_workspace,
                      " bytes): ", CudnnErrorText(s), "; ");
      continue;
    }
    plan.engine_config = std::move(configs[static_cast<size_t>(i)]);
    plan.plan = std::move(exec);
    plan.info.engine = engine;
    plan.info.workspace_bytes = workspace;
    return true;
  }
  return false;
}

}  // namespace

absl::StatusOr<SdpaPlanPtr> BuildSdpaPlan(SdpaPass pass, const AttentionShape& shape,
                                          const std::string& device_json) {
  const char* name = pass == SdpaPass::kForward ? "forward" : "backward";
  if (std::string refusal = CudnnSdpaRefusal(shape); !refusal.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("cuDNN attention ", name, ": ", refusal));
  }
  SdpaPlanPtr plan(new SdpaPlan{});
  plan->pass = pass;
  plan->shape = shape;
  absl::StatusOr<CudnnDescriptor> device = DeviceProperties(device_json);
  if (!device.ok()) return device.status();
  plan->device = *std::move(device);
  const Extents e = ExtentsOf(shape);
  if (pass == SdpaPass::kForward) {
    ForwardGraph(plan->builder, e);
  } else {
    BackwardGraph(plan->builder, e);
  }
  if (absl::Status st = plan->builder.Finish(plan->graph); !st.ok()) {
    return absl::InternalError(absl::StrCat("cuDNN attention ", name, " graph: ", st.message()));
  }
  std::string why;
  if (TryHeuristics(*plan, CUDNN_HEUR_MODE_A, why) ||
      TryHeuristics(*plan, CUDNN_HEUR_MODE_FALLBACK, why)) {
    return plan;
  }
  return absl::NotFoundError(
      absl::StrCat("cuDNN attention ", name, ": no deterministic engine (", why, ")"));
}

}  // namespace parity::kernels::cuda
