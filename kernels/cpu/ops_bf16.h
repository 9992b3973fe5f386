// The CPU's bf16 mode: an emulation of the GPU's numerics, and the reference the CUDA bf16 kernels
// are checked against. Each op widens its bf16 inputs to float, runs the fp32 reference op of
// ops_*.h and rounds its bf16 outputs to nearest-even; a bf16 output that accumulates (+=) is
// rounded after the fp32 addition, as a tensor-core GEMM with beta 1 does. Products of two bf16
// values are exact in fp32, so a bf16 GEMM here differs from cuBLAS's only in summation order.
//
// It is slower than the fp32 table (every call converts its arrays): a reference and a way to
// train the bf16 mode on a machine without a GPU, not a CPU speed-up.
#pragma once

#include "kernels/backend/op_table_bf16.h"

namespace parity::kernels::cpu {

Bf16OpTable MakeBf16Table();

}  // namespace parity::kernels::cpu
