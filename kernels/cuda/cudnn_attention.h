// The bf16 attention ops' first choice: cuDNN's fused attention (cudnn_sdpa.h says how). Each
// entry point runs its pass through cuDNN and returns true, or returns false having written
// nothing — cuDNN not built in, turned off (PARITY_CUDNN_ATTENTION=0), or without a plan for the
// shape (the first refusal of a shape is printed once to stderr with its reason) — and the op
// runs the tensor-core kernels instead. FLOPs are counted by the op, the same for every path.
#pragma once

#include "kernels/backend/bf16.h"
#include "kernels/backend/op_table.h"

namespace parity::kernels::cuda {

// out[B·S, H·Dh] and lse[B·H·S] (natural log) from qkv.
bool CudnnSdpaForward(const OpContext& ctx, const AttentionShape& s, Bf16* out, float* lse,
                      const Bf16* qkv);
// dqkv (every element written) from dout, the forward's out and lse, and qkv.
bool CudnnSdpaBackward(const OpContext& ctx, const AttentionShape& s, Bf16* dqkv, const Bf16* dout,
                       const Bf16* out, const float* lse, const Bf16* qkv);

}  // namespace parity::kernels::cuda
