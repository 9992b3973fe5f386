// A direct double-precision causal attention (GQA, rotary or ALiBi scores) for the GPU parity
// test: one query row at a time over the full softmax, no tiling, no saved probabilities. It is
// the definition the tiled CUDA kernels must reproduce: out, lse[B,H,S] and dqkv.
#pragma once

#include <vector>

#include "kernels/backend/op_table.h"

namespace parity::kernels::testing {

// out[B·S, H·Dh], lse[B·H·S] from qkv[B·S, (H+2Hkv)·Dh].
void AttentionForwardReference(const AttentionShape& s, const std::vector<double>& qkv,
                               std::vector<double>& out, std::vector<double>& lse);

// dqkv (overwritten, same layout as qkv) from dout[B·S, H·Dh].
void AttentionBackwardReference(const AttentionShape& s, const std::vector<double>& qkv,
                                const std::vector<double>& dout, std::vector<double>& dqkv);

}  // namespace parity::kernels::testing
