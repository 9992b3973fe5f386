// Launching the tensor-core attention kernels (flash_tc.h) for the bf16 mode's attention op.
// ops_attention.cu calls these when FlashTcSupports says yes and falls back to its tiled fp32-math
// kernel otherwise; the FLOPs are counted there, the same for both.
#pragma once

#include <cstdint>

#include "kernels/backend/bf16.h"
#include "kernels/backend/op_table.h"

namespace parity::kernels::cuda {

// True when the tensor-core kernels take the shape (head_dim a multiple of 8 up to 128, heads a
// multiple of kv_heads, at most 65,535 64-row tiles) and every pointer is 16-byte aligned.
bool FlashTcSupports(const AttentionShape& s, const void* qkv, const void* out);

// out[B·S, H·Dh], lse[B·H·S] (natural log) from qkv, on the context's stream. No FLOPs counted.
void FlashTcForward(const OpContext& ctx, const AttentionShape& s, Bf16* out, float* lse,
                    const Bf16* qkv);
// dqkv (every element written) from dout, the forward's lse and delta[B·H·S] = rowsum(dout·out).
void FlashTcBackward(const OpContext& ctx, const AttentionShape& s, Bf16* dqkv, const Bf16* dout,
                     const float* lse, const float* delta, const Bf16* qkv);

}  // namespace parity::kernels::cuda
