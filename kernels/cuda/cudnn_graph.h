// A small owner-and-builder over the cuDNN backend API's descriptors, enough to express the
// attention graphs of cudnn_sdpa.cc: tensors by unique id, pointwise, matmul, reduction and
// reshape operations, then an operation graph. Errors are sticky: the first failing call is kept
// (with the step it was, and cuDNN's own text) and every later call is a no-op, so a graph reads
// as a straight list of operations and is checked once at the end.
#pragma once

#include <cudnn.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace parity::kernels::cuda {

struct CudnnDescriptorDeleter {
  void operator()(cudnnBackendDescriptor_t d) const { (void)cudnnBackendDestroyDescriptor(d); }
};
using CudnnDescriptor =
    std::unique_ptr<std::remove_pointer_t<cudnnBackendDescriptor_t>, CudnnDescriptorDeleter>;

// cuDNN's status text plus the last error message it recorded (cudnnGetLastErrorString).
std::string CudnnErrorText(cudnnStatus_t status);

// Creates a descriptor of `type`, or sets `status` (when still ok) and returns null.
CudnnDescriptor MakeCudnnDescriptor(cudnnBackendDescriptorType_t type, absl::Status& status,
                                    const char* what);

struct TensorSpec {
  std::vector<int64_t> dims, strides;
  cudnnDataType_t type = CUDNN_DATA_FLOAT;
  bool is_virtual = true;
  bool by_value = false;  // a host scalar passed in the variant pack
};

class CudnnGraphBuilder {
 public:
  // Declares tensor `uid`; ids below kFirstVirtualUid are the caller's, the rest are handed out.
  static constexpr int64_t kFirstVirtualUid = 1000;
  void Tensor(int64_t uid, const TensorSpec& spec, const char* name);
  int64_t Virtual(std::vector<int64_t> dims, std::vector<int64_t> strides,
                  cudnnDataType_t type = CUDNN_DATA_FLOAT);

  // y = mode(x[, b][, t]); axis ≥ 0 for GEN_INDEX. compute: the op's math precision.
  void Pointwise(cudnnPointwiseMode_t mode, int64_t x, int64_t b, int64_t t, int64_t y,
                 cudnnDataType_t compute = CUDNN_DATA_FLOAT, int64_t axis = -1);
  void Matmul(int64_t a, int64_t b, int64_t c);  // fp32 accumulation
  void Reduce(cudnnReduceTensorOp_t op, int64_t x, int64_t y);
  void Reshape(int64_t x, int64_t y);

  // The finalized operation graph of every operation added, or the first error.
  absl::Status Finish(CudnnDescriptor& graph);
  const absl::Status& status() const { return status_; }

 private:
  void Fail(cudnnStatus_t s, const std::string& what);
  // Finalizes `d` unless an earlier call failed; false (the failure kept) when it did or does.
  bool Finalize(cudnnBackendDescriptor_t d, const std::string& what);
  void Set(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name,
           cudnnBackendAttributeType_t type, int64_t count, const void* value, const char* what);
  cudnnBackendDescriptor_t Get(int64_t uid, const char* what);
  void AddOperation(CudnnDescriptor op, const char* what);

  absl::Status status_;
  std::map<int64_t, CudnnDescriptor> tensors_;
  std::vector<CudnnDescriptor> descriptors_;  // operator descriptors the operations point at
  std::vector<CudnnDescriptor> operations_;
  int64_t next_virtual_ = kFirstVirtualUid;
};

}  // namespace parity::kernels::cuda
