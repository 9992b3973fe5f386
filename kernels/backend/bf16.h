// bfloat16, the throughput mode's storage type: 1 sign, 8 exponent and 7 mantissa bits, the top
// half of an IEEE float. Arithmetic never happens in bf16 here: values are widened to float,
// computed in float and rounded back to nearest-even — what the tensor cores and the CUDA
// kernels do, so the CPU's emulation (cpu/ops_bf16.cc) is the reference the GPU is checked
// against. Layout-compatible with CUDA's __nv_bfloat16 (two bytes, same bits).
#pragma once

#include <bit>
#include <cstdint>

namespace parity::kernels {

struct Bf16 {
  uint16_t bits = 0;
};
static_assert(sizeof(Bf16) == 2);

// Round to nearest, ties to even (CUDA's __float2bfloat16_rn); NaN stays a quiet NaN of the same
// sign; values past the largest bf16 round to ±infinity.
inline Bf16 ToBf16(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return Bf16{static_cast<uint16_t>((u >> 16) | 0x40u)};
  const uint32_t rounded = u + 0x7fffu + ((u >> 16) & 1u);
  return Bf16{static_cast<uint16_t>(rounded >> 16)};
}

inline float ToFloat(Bf16 b) { return std::bit_cast<float>(static_cast<uint32_t>(b.bits) << 16); }

}  // namespace parity::kernels
