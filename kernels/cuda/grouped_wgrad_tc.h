// The bf16 mode's expert weight gradients on the tensor cores, every group in one launch:
// dW_g[N,K] (fp32, +=) = dy_gᵀ·x_g for each group g, with dy [P,N] and x [P,K] bf16 row-major and
// group g's rows [offsets[g], offsets[g+1]) (the routing plan's device offsets: no host sizes, so
// nothing waits). cuBLAS's grouped GEMM has no bf16-in, fp32-out form, which is why this exists.
//
// Written against flash_tc.h's lane environment (the same code on the GPU and under the host
// emulator). A block of 4 warps owns a 64×64 tile of one group's dW (grid: tiles × groups; an
// empty group's blocks return at once), each warp a 32×32 quadrant; 32-row chunks of dy and x
// stream through shared memory; A = dyᵀ comes from `ldmatrix.trans` of dy's rows, B = x from
// `ldmatrix.trans` of x's rows (flash_tc.h's FlashFragB2). Every dW element has one writer and a
// fixed summation order: repeats are bit-identical. N and K must be multiples of 8 (16-byte rows).
#pragma once

#include <cstdint>

#include "kernels/cuda/flash_tc.h"

namespace parity::kernels::cuda {

inline constexpr int kWgradTile = 64;  // dW tile: 64 of N × 64 of K
inline constexpr int kWgradRows = 32;  // reduction rows a chunk
static_assert(kFlashThreads == 128, "4 warps: one 32×32 quadrant each");

struct WgradArgs {
  int64_t n, k;            // dW is [n, k] per group
  const int64_t* offsets;  // [groups + 1], device: group g's rows of dy and x
  const uint16_t* dy;      // [P, n] bf16
  const uint16_t* x;       // [P, k] bf16
  float* dw;               // [groups, n, k] fp32, accumulated into
};

constexpr int GroupedWgradSmem() { return 2 * kWgradRows * kFlashLd<kWgradTile> * 2; }

// The grid's first dimension: 64×64 tiles of one group's dW [n, k].
constexpr int64_t GroupedWgradTiles(int64_t n, int64_t k) {
  return ((n + kWgradTile - 1) / kWgradTile) * ((k + kWgradTile - 1) / kWgradTile);
}

// A fragment of Aᵀ where A's 16×16 block is stored k-major at s (rows = the reduction): the
// (rows 0-7 | 8-15) × (columns 0-7 | 8-15) matrices transposed, in the order a0..a3 wants them.
template <class Env>
PARITY_LANE void WgradFragAT(const Env& env, const uint16_t* s, int ld, uint32_t (&a)[4]) {
  const int m = env.Lane() >> 3, r = env.Lane() & 7;
  env.LdMatrixTrans(s + ((m >> 1) * 8 + r) * ld + (m & 1) * 8, a);
}

// Grid (⌈n/64⌉·⌈k/64⌉, groups).
template <class Env>
PARITY_LANE void GroupedWgradBlock(Env& env, const WgradArgs& a) {
  constexpr int L = kFlashLd<kWgradTile>;
  const int64_t group = env.BlockY(), begin = a.offsets[group], end = a.offsets[group + 1];
  if (end <= begin) return;  // the whole block: nothing to add
  const int64_t tiles_k = (a.k + kWgradTile - 1) / kWgradTile;
  const int64_t n0 = env.BlockX() / tiles_k * kWgradTile, k0 = env.BlockX() % tiles_k * kWgradTile;
  uint16_t* sdy = env.Smem();
  uint16_t* sx = sdy + kWgradRows * L;
  const int warp = env.Warp(), wm = warp >> 1, wn = warp & 1;
  float acc[2][4][4] = {};
  for (int64_t r0 = begin; r0 < end; r0 += kWgradRows) {
    env.SyncBlock();  // the previous chunk is consumed
    FlashLoadTile<kWgradTile>(env, sdy, a.dy + r0 * a.n + n0, a.n, kWgradRows, end - r0,
                              static_cast<int>(a.n - n0 < kWgradTile ? a.n - n0 : kWgradTile));
    FlashLoadTile<kWgradTile>(env, sx, a.x + r0 * a.k + k0, a.k, kWgradRows, end - r0,
                              static_cast<int>(a.k - k0 < kWgradTile ? a.k - k0 : kWgradTile));
    env.SyncBlock();
    PARITY_UNROLL
    for (int kk = 0; kk < kWgradRows / 16; ++kk) {
      PARITY_UNROLL
      for (int mi = 0; mi < 2; ++mi) {
        uint32_t af[4];
        WgradFragAT(env, sdy + kk * 16 * L + wm * 32 + mi * 16, L, af);
        PARITY_UNROLL
        for (int ni = 0; ni < 4; ni += 2) {
          uint32_t b0[2], b1[2];
          FlashFragB2(env, sx + kk * 16 * L + wn * 32 + ni * 8, L, b0, b1);
          env.Mma(acc[mi][ni], af, b0);
          env.Mma(acc[mi][ni + 1], af, b1);
        }
      }
    }
  }
  const int g = env.Lane() >> 2, t = env.Lane() & 3;
  float* dw = a.dw + group * a.n * a.k;
  PARITY_UNROLL
  for (int mi = 0; mi < 2; ++mi) {
    PARITY_UNROLL
    for (int ni = 0; ni < 4; ++ni) {
      PARITY_UNROLL
      for (int c = 0; c < 4; ++c) {
        const int64_t n = n0 + wm * 32 + mi * 16 + g + (c >= 2 ? 8 : 0);
        const int64_t k = k0 + wn * 32 + ni * 8 + 2 * t + (c & 1);
        if (n < a.n && k < a.k) dw[n * a.k + k] += acc[mi][ni][c];
      }
    }
  }
}

}  // namespace parity::kernels::cuda
