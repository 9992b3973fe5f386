#include "kernels/cuda/cudnn_graph.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace parity::kernels::cuda {

std::string CudnnErrorText(cudnnStatus_t status) {
  char last[1024] = {0};
  cudnnGetLastErrorString(last, sizeof last);
  std::string text = cudnnGetErrorString(status);
  if (last[0] != '\0') absl::StrAppend(&text, " (", last, ")");
  return text;
}

CudnnDescriptor MakeCudnnDescriptor(cudnnBackendDescriptorType_t type, absl::Status& status,
                                    const char* what) {
  if (!status.ok()) return nullptr;
  cudnnBackendDescriptor_t d = nullptr;
  const cudnnStatus_t s = cudnnBackendCreateDescriptor(type, &d);
  if (s != CUDNN_STATUS_SUCCESS) {
    status = absl::InternalError(absl::StrCat("creating ", what, ": ", CudnnErrorText(s)));
    return nullptr;
  }
  return CudnnDescriptor(d);
}

void CudnnGraphBuilder::Fail(cudnnStatus_t s, const std::string& what) {
  if (status_.ok()) status_ = absl::InternalError(absl::StrCat(what, ": ", CudnnErrorText(s)));
}

void CudnnGraphBuilder::Set(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name,
                            cudnnBackendAttributeType_t type, int64_t count, const void* value,
                            const char* what) {
  if (!status_.ok()) return;
  const cudnnStatus_t s = cudnnBackendSetAttribute(d, name, type, count, value);
  if (s != CUDNN_STATUS_SUCCESS) Fail(s, absl::StrCat(what, ": attribute ", name));
}

bool CudnnGraphBuilder::Finalize(cudnnBackendDescriptor_t d, const std::string& what) {
  if (!status_.ok()) return false;
  const cudnnStatus_t s = cudnnBackendFinalize(d);
  if (s != CUDNN_STATUS_SUCCESS) Fail(s, what);
  return s == CUDNN_STATUS_SUCCESS;
}

cudnnBackendDescriptor_t CudnnGraphBuilder::Get(int64_t uid, const char* what) {
  auto it = tensors_.find(uid);
  if (it == tensors_.end()) {
    if (status_.ok()) {
      status_ = absl::InternalError(absl::StrCat(what, ": tensor ", uid, " was never declared"));
    }
    return nullptr;
  }
  return it->second.get();
}

void CudnnGraphBuilder::Tensor(int64_t uid, const TensorSpec& spec, const char* name) {
  CudnnDescriptor t = MakeCudnnDescriptor(CUDNN_BACKEND_TENSOR_DESCRIPTOR, status_, name);
  if (!status_.ok()) return;
  const auto rank = static_cast<int64_t>(spec.dims.size());
  const int64_t alignment = 16;
  const bool is_virtual = spec.is_virtual, by_value = spec.by_value;
  Set(t.get(), CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &spec.type, name);
  Set(t.get(), CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, rank, spec.dims.data(), name);
  Set(t.get(), CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, rank, spec.strides.data(), name);
  Set(t.get(), CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid, name);
  Set(t.get(), CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &alignment, name);
  Set(t.get(), CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual, name);
  if (by_value) {
    Set(t.get(), CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &by_value, name);
  }
  if (!Finalize(t.get(), absl::StrCat("tensor ", name))) return;
  tensors_[uid] = std::move(t);
}

int64_t CudnnGraphBuilder::Virtual(std::vector<int64_t> dims, std::vector<int64_t> strides,
                                   cudnnDataType_t type) {
  const int64_t uid = next_virtual_++;
  Tensor(uid, TensorSpec{std::move(dims), std::move(strides), type, true, false}, "virtual");
  return uid;
}

void CudnnGraphBuilder::AddOperation(CudnnDescriptor op, const char* what) {
  if (!Finalize(op.get(), absl::StrCat("operation ", operations_.size(), " (", what, ")"))) return;
  operations_.push_back(std::move(op));
}

void CudnnGraphBuilder::Pointwise(cudnnPointwiseMode_t mode, int64_t x, int64_t b, int64_t t,
                                  int64_t y, cudnnDataType_t compute, int64_t axis) {
  CudnnDescriptor pw =
      MakeCudnnDescriptor(CUDNN_BACKEND_POINTWISE_DESCRIPTOR, status_, "pointwise");
  if (!status_.ok()) return;
  Set(pw.get(), CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode, "pointwise");
  Set(pw.get(), CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &compute, "pointwise");
  if (axis >= 0) Set(pw.get(), CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis, "pointwise");
  if (!Finalize(pw.get(), absl::StrCat("pointwise mode ", mode))) return;
  CudnnDescriptor op =
      MakeCudnnDescriptor(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, status_, "pointwise op");
  if (!status_.ok()) return;
  cudnnBackendDescriptor_t pw_raw = pw.get(), x_raw = Get(x, "pointwise x"),
                           y_raw = Get(y, "pointwise y");
  const cudnnBackendAttributeType_t kDesc = CUDNN_TYPE_BACKEND_DESCRIPTOR;
  Set(op.get(), CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, kDesc, 1, &pw_raw, "pointwise op");
  Set(op.get(), CUDNN_ATTR_OPERATION_POINTWISE_XDESC, kDesc, 1, &x_raw, "pointwise op");
  if (b >= 0) {
    cudnnBackendDescriptor_t b_raw = Get(b, "pointwise b");
    Set(op.get(), CUDNN_ATTR_OPERATION_POINTWISE_BDESC, kDesc, 1, &b_raw, "pointwise op");
  }
  if (t >= 0) {
    cudnnBackendDescriptor_t t_raw = Get(t, "pointwise t");
    Set(op.get(), CUDNN_ATTR_OPERATION_POINTWISE_TDESC, kDesc, 1, &t_raw, "pointwise op");
  }
  Set(op.get(), CUDNN_ATTR_OPERATION_POINTWISE_YDESC, kDesc, 1, &y_raw, "pointwise op");
  descriptors_.push_back(std::move(pw));
  AddOperation(std::move(op), "pointwise");
}

void CudnnGraphBuilder::Matmul(int64_t a, int64_t b, int64_t c) {
  CudnnDescriptor mm = MakeCudnnDescriptor(CUDNN_BACKEND_MATMUL_DESCRIPTOR, status_, "matmul");
  if (!status_.ok()) return;
  const cudnnDataType_t compute = CUDNN_DATA_FLOAT;
  Set(mm.get(), CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute, "matmul");
  if (!Finalize(mm.get(), "matmul descriptor")) return;
  CudnnDescriptor op =
      MakeCudnnDescriptor(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, status_, "matmul op");
  if (!status_.ok()) return;
  cudnnBackendDescriptor_t mm_raw = mm.get(), a_raw = Get(a, "matmul a"),
                           b_raw = Get(b, "matmul b"), c_raw = Get(c, "matmul c");
  const cudnnBackendAttributeType_t kDesc = CUDNN_TYPE_BACKEND_DESCRIPTOR;
  Set(op.get(), CUDNN_ATTR_OPERATION_MATMUL_ADESC, kDesc, 1, &a_raw, "matmul op");
  Set(op.get(), CUDNN_ATTR_OPERATION_MATMUL_BDESC, kDesc, 1, &b_raw, "matmul op");
  Set(op.get(), CUDNN_ATTR_OPERATION_MATMUL_CDESC, kDesc, 1, &c_raw, "matmul op");
  Set(op.get(), CUDNN_ATTR_OPERATION_MATMUL_DESC, kDesc, 1, &mm_raw, "matmul op");
  descriptors_.push_back(std::move(mm));
  AddOperation(std::move(op), "matmul");
}

void CudnnGraphBuilder::Reduce(cudnnReduceTensorOp_t reduce, int64_t x, int64_t y) {
  CudnnDescriptor red = MakeCudnnDescriptor(CUDNN_BACKEND_REDUCTION_DESCRIPTOR, status_, "reduce");
  if (!status_.ok()) return;
  const cudnnDataType_t compute = CUDNN_DATA_FLOAT;
  Set(red.get(), CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &reduce,
      "reduce");
  Set(red.get(), CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute, "reduce");
  if (!Finalize(red.get(), "reduction descriptor")) return;
  CudnnDescriptor op =
      MakeCudnnDescriptor(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, status_, "reduce op");
  if (!status_.ok()) return;
  cudnnBackendDescriptor_t red_raw = red.get(), x_raw = Get(x, "reduce x"),
                           y_raw = Get(y, "reduce y");
  const cudnnBackendAttributeType_t kDesc = CUDNN_TYPE_BACKEND_DESCRIPTOR;
  Set(op.get(), CUDNN_ATTR_OPERATION_REDUCTION_XDESC, kDesc, 1, &x_raw, "reduce op");
  Set(op.get(), CUDNN_ATTR_OPERATION_REDUCTION_YDESC, kDesc, 1, &y_raw, "reduce op");
  Set(op.get(), CUDNN_ATTR_OPERATION_REDUCTION_DESC, kDesc, 1, &red_raw, "reduce op");
  descriptors_.push_back(std::move(red));
  AddOperation(std::move(op), "reduction");
}

void CudnnGraphBuilder::Reshape(int64_t x, int64_t y) {
  CudnnDescriptor op =
      MakeCudnnDescriptor(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR, status_, "reshape op");
  if (!status_.ok()) return;
  cudnnBackendDescriptor_t x_raw = Get(x, "reshape x"), y_raw = Get(y, "reshape y");
  const cudnnBackendAttributeType_t kDesc = CUDNN_TYPE_BACKEND_DESCRIPTOR;
  Set(op.get(), CUDNN_ATTR_OPERATION_RESHAPE_XDESC, kDesc, 1, &x_raw, "reshape op");
  Set(op.get(), CUDNN_ATTR_OPERATION_RESHAPE_YDESC, kDesc, 1, &y_raw, "reshape op");
  AddOperation(std::move(op), "reshape");
}

absl::Status CudnnGraphBuilder::Finish(CudnnDescriptor& graph) {
  graph = MakeCudnnDescriptor(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, status_, "operation graph");
  if (!status_.ok()) return status_;
  std::vector<cudnnBackendDescriptor_t> ops;
  for (const CudnnDescriptor& op : operations_) ops.push_back(op.get());
  Set(graph.get(), CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
      static_cast<int64_t>(ops.size()), ops.data(), "operation graph");
  Finalize(graph.get(), absl::StrCat("operation graph of ", ops.size(), " operations"));
  return status_;
}

}  // namespace parity::kernels::cuda
