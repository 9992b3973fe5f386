// Causal GQA attention on the tensor cores (the bf16 mode): FlashAttention-2's algorithm with
// `mma.sync.m16n8k16` bf16 products and fp32 accumulation, written once against a small "lane
// environment" so the same code runs on the GPU (flash_tc_device.cuh: builtins and inline PTX)
// and, one fiber per CUDA thread, on the host (tests/lane_emulator.h), where the CPU test suite
// checks it against the double-precision definition.
//
// An `Env` gives a thread its lane, warp and block, block and warp synchronisation, xor
// shuffles, `ldmatrix` (plain and transposed), the 16×8×16 matrix product on the warp's
// fragments, exp2/log2, bf16 packing and 4/16-byte memory moves. Fragment layouts are PTX's for
// m16n8k16 with g = lane / 4 and t = lane % 4: A (16×16, row-major) registers hold (g, 2t..2t+1),
// (g+8, 2t..), (g, 2t+8..), (g+8, 2t+8..); B (16×8, k-major) (k 2t..2t+1, n g), (k 2t+8.., n g); C
// (16×8 fp32) (g, 2t), (g, 2t+1), (g+8, 2t), (g+8, 2t+1). The lower-indexed bf16 of a pair sits in
// the low 16 bits.
//
// Three kernels, every output element with one writer (no atomics, so repeats are bit-identical):
//   forward  block = 64 query rows of one (sequence, head), 4 warps × 16 rows; 64-key tiles of
//            K and V stream through shared memory; online softmax in base 2; out (bf16) and the
//            natural-log lse are written. P is rounded to bf16 for P·V (as FlashAttention does).
//   dq       block = 64 query rows; recomputes P = exp(S − lse) per key tile, dP = dO·Vᵀ,
//            dS = P·(dP − delta), dq += dS·K.
//   dk, dv   block = 64 keys of one (sequence, kv head), 4 warps × 16 keys; loops over the
//            group's heads and 32-query tiles at or after the keys; Sᵀ = K·Qᵀ, dPᵀ = V·dOᵀ,
//            dv += Pᵀ·dO, dk += dSᵀ·Q.
// Shapes: head_dim a multiple of 8 up to kFlashMaxHeadDim (zero-padded to the kernel's kDh);
// any sequence length (rows past it are zero-filled and never stored). Scores: s·scale −
// slope·(i−j) as the CPU computes them, kept in base-2 units (·log2 e) for exp2.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/gpu_limits.h"
#include "kernels/backend/op_table.h"

#ifdef __CUDACC__
#define PARITY_LANE __device__ __forceinline__
#define PARITY_UNROLL _Pragma("unroll")
#else
#define PARITY_LANE inline
#define PARITY_UNROLL
#endif

namespace parity::kernels::cuda {

inline constexpr int kFlashWarps = 4;
inline constexpr int kFlashThreads = 32 * kFlashWarps;
inline constexpr int kFlashRows = 16 * kFlashWarps;  // query rows of a forward / dq block
inline constexpr int kFlashKeys = 64;                // keys per streamed tile (and per dk/dv block)
inline constexpr int kFlashBwdRows = 32;             // query rows per dk/dv step
inline constexpr int kFlashMaxHeadDim = static_cast<int>(core::kCudaTensorCoreMaxHeadDim);
static_assert(core::kCudaTensorCoreHeadDimStep == 8, "tiles move 8 bf16 (16 bytes) at a time");
inline constexpr float kLog2e = 1.4426950408889634f;
inline constexpr float kLn2 = 0.6931471805599453f;

// Shared-memory row stride in bf16 elements: 16 bytes of padding per row, so the 8 rows × 4
// words a warp reads for one fragment fall in 32 distinct banks.
template <int kDh>
inline constexpr int kFlashLd = kDh + 8;

struct FlashArgs {
  int64_t seq, heads, kv_heads, head_dim;
  int64_t ld;        // qkv / dqkv row: (H + 2·Hkv)·Dh elements
  int64_t ldo;       // out / dout row: H·Dh elements
  float scale;       // 1/√Dh
  float scale_log2;  // log2(e)/√Dh: scores in base-2 units
  bool alibi;
};

// The kernels' arguments for an attention shape (host side).
inline FlashArgs MakeFlashArgs(const AttentionShape& s) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(s.head_dim));
  return FlashArgs{.seq = s.seq,
                   .heads = s.heads,
                   .kv_heads = s.kv_heads,
                   .head_dim = s.head_dim,
                   .ld = (s.heads + 2 * s.kv_heads) * s.head_dim,
                   .ldo = s.heads * s.head_dim,
                   .scale = static_cast<float>(scale),
                   .scale_log2 = static_cast<float>(scale * 1.4426950408889634),
                   .alibi = s.positions == Positions::kAlibi};
}

// ALiBi slope of head h in base-2 units, 2^(−8(h+1)/H)·log2 e (0 without ALiBi).
template <class Env>
PARITY_LANE float SlopeLog2(const Env& env, const FlashArgs& a, int64_t h) {
  return a.alibi ? env.SlopeLog2(h, a.heads) : 0.0f;
}

// Shared memory per block, in bytes.
template <int kDh>
constexpr int FlashForwardSmem() {
  return 3 * kFlashRows * kFlashLd<kDh> * 2;
}
template <int kDh>
constexpr int FlashDqSmem() {
  return 4 * kFlashRows * kFlashLd<kDh> * 2 + 2 * kFlashRows * 4;
}
template <int kDh>
constexpr int FlashDkDvSmem() {
  return (2 * kFlashKeys + 2 * kFlashBwdRows) * kFlashLd<kDh> * 2 + 2 * kFlashBwdRows * 4;
}

// rows × kDh bf16 from global rows src[r·ld + c] into shared dst[r·kFlashLd + c], 16 bytes per
// move; rows ≥ valid and columns ≥ dh (a multiple of 8) are zero.
template <int kDh, class Env>
PARITY_LANE void FlashLoadTile(Env& env, uint16_t* dst, const uint16_t* src, int64_t ld, int rows,
                               int64_t valid, int dh) {
  constexpr int kChunks = kDh / 8;
  for (int c = env.Thread(); c < rows * kChunks; c += kFlashThreads) {
    const int r = c / kChunks, col = (c - r * kChunks) * 8;
    uint16_t* d = dst + r * kFlashLd<kDh> + col;
    if (r < valid && col < dh) {
      env.Copy16(d, src + r * ld + col);
    } else {
      env.Zero16(d);
    }
  }
}

// n floats v[i] = src[i]·mul for i < valid, else 0.
template <class Env>
PARITY_LANE void FlashLoadRow(Env& env, float* dst, const float* src, int n, int64_t valid,
                              float mul) {
  for (int i = env.Thread(); i < n; i += kFlashThreads) dst[i] = i < valid ? src[i] * mul : 0.0f;
}

// Fragments come from shared memory through `ldmatrix` (four 8×8 b16 matrices a warp, each lane
// naming one 16-byte row: lanes 8m..8m+7 the rows of matrix m; register m of lane l receives
// row l/4, columns 2(l%4), 2(l%4)+1 of matrix m, or of its transpose with .trans).

// A fragment of the 16×16 block at s (row-major, stride ld): matrices (rows 0-7 | 8-15) ×
// (columns 0-7 | 8-15) in the order a0..a3 wants them.
template <class Env>
PARITY_LANE void FlashFragA(const Env& env, const uint16_t* s, int ld, uint32_t (&a)[4]) {
  const int m = env.Lane() >> 3, r = env.Lane() & 7;
  env.LdMatrix(s + ((m & 1) * 8 + r) * ld + (m >> 1) * 8, a);
}
// B fragments of two adjacent n-tiles where B[k][n] = M[n][k] (M row-major at s, 16 rows: the
// tiles' columns): b0 = M rows 0-7 × k 0-7, b1 = rows 0-7 × k 8-15, then rows 8-15 likewise.
template <class Env>
PARITY_LANE void FlashFragBt2(const Env& env, const uint16_t* s, int ld, uint32_t (&b0)[2],
                              uint32_t (&b1)[2]) {
  const int m = env.Lane() >> 3, r = env.Lane() & 7;
  uint32_t x[4];
  env.LdMatrix(s + ((m >> 1) * 8 + r) * ld + (m & 1) * 8, x);
  b0[0] = x[0], b0[1] = x[1], b1[0] = x[2], b1[1] = x[3];
}
// B fragments of two adjacent n-tiles where B[k][n] = M[k][n] (M row-major at s: 16 rows of k,
// 16 columns of n), transposed on the way: b0 = (k 0-7 × n 0-7)ᵀ, b1 = (k 8-15 × n 0-7)ᵀ, then
// columns 8-15 likewise.
template <class Env>
PARITY_LANE void FlashFragB2(const Env& env, const uint16_t* s, int ld, uint32_t (&b0)[2],
                             uint32_t (&b1)[2]) {
  const int m = env.Lane() >> 3, r = env.Lane() & 7;
  uint32_t x[4];
  env.LdMatrixTrans(s + ((m & 1) * 8 + r) * ld + (m >> 1) * 8, x);
  b0[0] = x[0], b0[1] = x[1], b1[0] = x[2], b1[1] = x[3];
}
// The A fragment (16×16) made of C tiles c[j] and c[j+1] (16×8 each, fp32), rounded to bf16:
// the accumulator layout of two adjacent tiles is the A layout, so no data moves between lanes.
template <class Env>
PARITY_LANE void FlashCToA(const Env& env, const float (&lo)[4], const float (&hi)[4],
                           uint32_t (&a)[4]) {
  a[0] = env.Pack(lo[0], lo[1]);
  a[1] = env.Pack(lo[2], lo[3]);
  a[2] = env.Pack(hi[0], hi[1]);
  a[3] = env.Pack(hi[2], hi[3]);
}

// acc[n] (16 × 8n) += A(16 × kDh at sa) · Bᵀ where B's rows (8 per n) start at sb.
template <int kDh, int kTiles, class Env>
PARITY_LANE void FlashRowTimesRowsT(Env& env, const uint16_t* sa, const uint16_t* sb,
                                    float (&acc)[kTiles][4]) {
  constexpr int L = kFlashLd<kDh>;
  PARITY_UNROLL
  for (int kk = 0; kk < kDh / 16; ++kk) {
    uint32_t a[4];
    FlashFragA(env, sa + kk * 16, L, a);
    static_assert(kTiles % 2 == 0, "n-tiles are loaded in pairs");
    PARITY_UNROLL
    for (int n = 0; n < kTiles; n += 2) {
      uint32_t b0[2], b1[2];
      FlashFragBt2(env, sb + n * 8 * L + kk * 16, L, b0, b1);
      env.Mma(acc[n], a, b0);
      env.Mma(acc[n + 1], a, b1);
    }
  }
}

// acc (16 × kDh) += P (16 × 16·kSteps, the C tiles p[2k], p[2k+1]) · M (rows at sm, row-major).
template <int kDh, int kSteps, class Env>
PARITY_LANE void FlashTilesTimesRows(Env& env, const float (&p)[2 * kSteps][4], const uint16_t* sm,
                                     float (&acc)[kDh / 8][4]) {
  constexpr int L = kFlashLd<kDh>;
  PARITY_UNROLL
  for (int k = 0; k < kSteps; ++k) {
    uint32_t a[4];
    FlashCToA(env, p[2 * k], p[2 * k + 1], a);
    PARITY_UNROLL
    for (int n = 0; n < kDh / 8; n += 2) {
      uint32_t b0[2], b1[2];
      FlashFragB2(env, sm + k * 16 * L + n * 8, L, b0, b1);
      env.Mma(acc[n], a, b0);
      env.Mma(acc[n + 1], a, b1);
    }
  }
}

// Max, then sum, over the 4 lanes (t = 0..3) that hold one row of a C tile.
template <class Env>
PARITY_LANE float FlashQuadMax(Env& env, float v) {
  v = env.Max(v, env.ShflXor(v, 1));
  return env.Max(v, env.ShflXor(v, 2));
}
template <class Env>
PARITY_LANE float FlashQuadSum(Env& env, float v) {
  v += env.ShflXor(v, 1);
  return v + env.ShflXor(v, 2);
}

// Stores acc·mul (16 × kDh C tiles) as bf16 rows `row` (C rows g) and `row + 8` of dst (stride
// ld), columns < dh, rows < seq.
template <int kDh, class Env>
PARITY_LANE void FlashStoreRows(Env& env, const float (&acc)[kDh / 8][4], float mul0, float mul1,
                                uint16_t* dst, int64_t ld, int64_t row, int64_t seq, int dh) {
  const int t = env.Lane() & 3;
  PARITY_UNROLL
  for (int n = 0; n < kDh / 8; ++n) {
    const int col = n * 8 + 2 * t;
    if (col >= dh) continue;
    if (row < seq) env.St32(dst + row * ld + col, env.Pack(acc[n][0] * mul0, acc[n][1] * mul0));
    if (row + 8 < seq) {
      env.St32(dst + (row + 8) * ld + col, env.Pack(acc[n][2] * mul1, acc[n][3] * mul1));
    }
  }
}

// K and V of keys [k0, k0 + 64) of kv head kvh into sk and sv; `rows` is the sequence's first
// qkv row.
template <int kDh, class Env>
PARITY_LANE void FlashLoadKeys(Env& env, const FlashArgs& a, const uint16_t* rows, int64_t kvh,
                               int64_t k0, uint16_t* sk, uint16_t* sv) {
  const int dh = static_cast<int>(a.head_dim);
  FlashLoadTile<kDh>(env, sk, rows + k0 * a.ld + (a.heads + kvh) * dh, a.ld, kFlashKeys, a.seq - k0,
                     dh);
  FlashLoadTile<kDh>(env, sv, rows + k0 * a.ld + (a.heads + a.kv_heads + kvh) * dh, a.ld,
                     kFlashKeys, a.seq - k0, dh);
}

// What the backward needs of n query rows [q0, q0 + n) of head h in sequence b: q, dout, lse in
// base-2 units and delta.
template <int kDh, class Env>
PARITY_LANE void FlashLoadQueries(Env& env, const FlashArgs& a, int64_t b, int64_t h, int64_t q0,
                                  int n, const uint16_t* qkv, const uint16_t* dout,
                                  const float* lse, const float* delta, uint16_t* sq, uint16_t* sdo,
                                  float* slse, float* sdelta) {
  const int dh = static_cast<int>(a.head_dim);
  const int64_t valid = a.seq - q0, stat = (b * a.heads + h) * a.seq + q0;
  FlashLoadTile<kDh>(env, sq, qkv + (b * a.seq + q0) * a.ld + h * dh, a.ld, n, valid, dh);
  FlashLoadTile<kDh>(env, sdo, dout + (b * a.seq + q0) * a.ldo + h * dh, a.ldo, n, valid, dh);
  FlashLoadRow(env, slse, lse + stat, n, valid, kLog2e);
  FlashLoadRow(env, sdelta, delta + stat, n, valid, 1.0f);
}

// Grid (B·H, ⌈S/64⌉). out[B·S, H·Dh] (bf16), lse[B·H·S] (natural log) from qkv (bf16).
template <int kDh, class Env>
PARITY_LANE void FlashForwardBlock(Env& env, const FlashArgs& a, uint16_t* out, float* lse,
                                   const uint16_t* qkv) {
  constexpr int L = kFlashLd<kDh>;
  uint16_t* sq = env.Smem();
  uint16_t* sk = sq + kFlashRows * L;
  uint16_t* sv = sk + kFlashKeys * L;
  const int64_t bh = env.BlockX(), b = bh / a.heads, h = bh % a.heads;
  const int64_t kvh = h / (a.heads / a.kv_heads), q0 = env.BlockY() * int64_t{kFlashRows};
  const int dh = static_cast<int>(a.head_dim), warp = env.Warp();
  const int g = env.Lane() >> 2, t = env.Lane() & 3;
  const uint16_t* rows = qkv + b * a.seq * a.ld;
  FlashLoadTile<kDh>(env, sq, rows + q0 * a.ld + h * dh, a.ld, kFlashRows, a.seq - q0, dh);
  const int64_t row0 = q0 + warp * 16 + g, row1 = row0 + 8, warp_last = q0 + warp * 16 + 15;
  const float slope = SlopeLog2(env, a, h);
  float o[kDh / 8][4] = {};
  float m0 = -__builtin_huge_valf(), m1 = -__builtin_huge_valf(), l0 = 0.0f, l1 = 0.0f;
  const int64_t key_end = q0 + kFlashRows < a.seq ? q0 + kFlashRows : a.seq;
  for (int64_t k0 = 0; k0 < key_end; k0 += kFlashKeys) {
    env.SyncBlock();  // the previous tile is consumed
    FlashLoadKeys<kDh>(env, a, rows, kvh, k0, sk, sv);
    env.SyncBlock();
    if (k0 > warp_last) continue;  // the whole tile is above this warp's diagonal
    float s[kFlashKeys / 8][4] = {};
    FlashRowTimesRowsT<kDh>(env, sq + warp * 16 * L, sk, s);
    float mx0 = -__builtin_huge_valf(), mx1 = -__builtin_huge_valf();
    PARITY_UNROLL
    for (int n = 0; n < kFlashKeys / 8; ++n) {
      PARITY_UNROLL
      for (int c = 0; c < 4; ++c) {
        const int64_t i = c < 2 ? row0 : row1, j = k0 + n * 8 + 2 * t + (c & 1);
        const float x = s[n][c] * a.scale_log2 - slope * static_cast<float>(i - j);
        s[n][c] = j > i || j >= a.seq ? -__builtin_huge_valf() : x;
        if (c < 2) mx0 = env.Max(mx0, s[n][c]);
        if (c >= 2) mx1 = env.Max(mx1, s[n][c]);
      }
    }
    const float mn0 = env.Max(m0, FlashQuadMax(env, mx0)),
                mn1 = env.Max(m1, FlashQuadMax(env, mx1));
    // A row with every key so far masked keeps a −∞ maximum; exp2 against 0 then gives zeros.
    const float ref0 = mn0 == -__builtin_huge_valf() ? 0.0f : mn0;
    const float ref1 = mn1 == -__builtin_huge_valf() ? 0.0f : mn1;
    const float alpha0 = env.Exp2(m0 - ref0), alpha1 = env.Exp2(m1 - ref1);
    l0 *= alpha0, l1 *= alpha1;
    PARITY_UNROLL
    for (int n = 0; n < kDh / 8; ++n) {
      o[n][0] *= alpha0, o[n][1] *= alpha0, o[n][2] *= alpha1, o[n][3] *= alpha1;
    }
    PARITY_UNROLL
    for (int n = 0; n < kFlashKeys / 8; ++n) {
      PARITY_UNROLL
      for (int c = 0; c < 4; ++c) {
        s[n][c] = env.Exp2(s[n][c] - (c < 2 ? ref0 : ref1));
        (c < 2 ? l0 : l1) += s[n][c];
      }
    }
    FlashTilesTimesRows<kDh, kFlashKeys / 16>(env, s, sv, o);
    m0 = mn0, m1 = mn1;
  }
  l0 = FlashQuadSum(env, l0), l1 = FlashQuadSum(env, l1);
  uint16_t* orows = out + b * a.seq * a.ldo + h * dh;
  FlashStoreRows<kDh>(env, o, 1.0f / l0, 1.0f / l1, orows, a.ldo, row0, a.seq, dh);
  if (t == 0) {
    float* lrow = lse + bh * a.seq;
    if (row0 < a.seq) lrow[row0] = (m0 + env.Log2(l0)) * kLn2;
    if (row1 < a.seq) lrow[row1] = (m1 + env.Log2(l1)) * kLn2;
  }
}

// Grid (B·H, ⌈S/64⌉). dq (the q columns of dqkv, bf16) from dout, lse, delta = rowsum(dout·out).
template <int kDh, class Env>
PARITY_LANE void FlashDqBlock(Env& env, const FlashArgs& a, uint16_t* dqkv, const uint16_t* dout,
                              const float* lse, const float* delta, const uint16_t* qkv) {
  constexpr int L = kFlashLd<kDh>;
  uint16_t* sq = env.Smem();
  uint16_t* sdo = sq + kFlashRows * L;
  uint16_t* sk = sdo + kFlashRows * L;
  uint16_t* sv = sk + kFlashKeys * L;
  float* slse = reinterpret_cast<float*>(sv + kFlashKeys * L);
  float* sdelta = slse + kFlashRows;
  const int64_t bh = env.BlockX(), b = bh / a.heads, h = bh % a.heads;
  const int64_t kvh = h / (a.heads / a.kv_heads), q0 = env.BlockY() * int64_t{kFlashRows};
  const int dh = static_cast<int>(a.head_dim), warp = env.Warp();
  const int g = env.Lane() >> 2, t = env.Lane() & 3;
  const uint16_t* rows = qkv + b * a.seq * a.ld;
  FlashLoadQueries<kDh>(env, a, b, h, q0, kFlashRows, qkv, dout, lse, delta, sq, sdo, slse, sdelta);
  const int r0 = warp * 16 + g;  // this thread's rows in the tile: r0 and r0 + 8
  const int64_t row0 = q0 + r0, warp_last = q0 + warp * 16 + 15;
  const float slope = SlopeLog2(env, a, h);
  float dq[kDh / 8][4] = {};
  const int64_t key_end = q0 + kFlashRows < a.seq ? q0 + kFlashRows : a.seq;
  for (int64_t k0 = 0; k0 < key_end; k0 += kFlashKeys) {
    env.SyncBlock();
    FlashLoadKeys<kDh>(env, a, rows, kvh, k0, sk, sv);
    env.SyncBlock();
    if (k0 > warp_last) continue;
    float s[kFlashKeys / 8][4] = {}, dp[kFlashKeys / 8][4] = {};
    FlashRowTimesRowsT<kDh>(env, sq + warp * 16 * L, sk, s);
    FlashRowTimesRowsT<kDh>(env, sdo + warp * 16 * L, sv, dp);
    PARITY_UNROLL
    for (int n = 0; n < kFlashKeys / 8; ++n) {
      PARITY_UNROLL
      for (int c = 0; c < 4; ++c) {
        const int r = c < 2 ? r0 : r0 + 8;
        const int64_t i = q0 + r, j = k0 + n * 8 + 2 * t + (c & 1);
        const float x = s[n][c] * a.scale_log2 - slope * static_cast<float>(i - j) - slse[r];
        const float p = j > i || j >= a.seq ? 0.0f : env.Exp2(x);
        s[n][c] = p * (dp[n][c] - sdelta[r]);  // dS
      }
    }
    FlashTilesTimesRows<kDh, kFlashKeys / 16>(env, s, sk, dq);
  }
  FlashStoreRows<kDh>(env, dq, a.scale, a.scale, dqkv + b * a.seq * a.ld + h * dh, a.ld, row0,
                      a.seq, dh);
}

// Grid (B·Hkv, ⌈S/64⌉). dk and dv (the k and v columns of dqkv, bf16) of 64 keys, summed over
// the kv head's query heads in head order.
template <int kDh, class Env>
PARITY_LANE void FlashDkDvBlock(Env& env, const FlashArgs& a, uint16_t* dqkv, const uint16_t* dout,
                                const float* lse, const float* delta, const uint16_t* qkv) {
  constexpr int L = kFlashLd<kDh>;
  uint16_t* sk = env.Smem();
  uint16_t* sv = sk + kFlashKeys * L;
  uint16_t* sq = sv + kFlashKeys * L;
  uint16_t* sdo = sq + kFlashBwdRows * L;
  float* slse = reinterpret_cast<float*>(sdo + kFlashBwdRows * L);
  float* sdelta = slse + kFlashBwdRows;
  const int64_t bkv = env.BlockX(), b = bkv / a.kv_heads, kvh = bkv % a.kv_heads;
  const int64_t group = a.heads / a.kv_heads, k0 = env.BlockY() * int64_t{kFlashKeys};
  const int dh = static_cast<int>(a.head_dim), warp = env.Warp();
  const int g = env.Lane() >> 2, t = env.Lane() & 3;
  const uint16_t* rows = qkv + b * a.seq * a.ld;
  FlashLoadKeys<kDh>(env, a, rows, kvh, k0, sk, sv);
  const int64_t key0 = k0 + warp * 16 + g, warp_first = k0 + warp * 16;
  float dk[kDh / 8][4] = {}, dv[kDh / 8][4] = {};
  for (int64_t h = kvh * group; h < (kvh + 1) * group; ++h) {
    const float slope = SlopeLog2(env, a, h);
    for (int64_t q0 = k0; q0 < a.seq; q0 += kFlashBwdRows) {
      env.SyncBlock();
      FlashLoadQueries<kDh>(env, a, b, h, q0, kFlashBwdRows, qkv, dout, lse, delta, sq, sdo, slse,
                            sdelta);
      env.SyncBlock();
      if (q0 + kFlashBwdRows - 1 < warp_first) continue;  // every query precedes these keys
      float st[kFlashBwdRows / 8][4] = {}, dpt[kFlashBwdRows / 8][4] = {};
      FlashRowTimesRowsT<kDh>(env, sk + warp * 16 * L, sq, st);
      FlashRowTimesRowsT<kDh>(env, sv + warp * 16 * L, sdo, dpt);
      PARITY_UNROLL
      for (int n = 0; n < kFlashBwdRows / 8; ++n) {
        PARITY_UNROLL
        for (int c = 0; c < 4; ++c) {
          const int r = n * 8 + 2 * t + (c & 1);  // query row in the tile
          const int64_t i = q0 + r, j = c < 2 ? key0 : key0 + 8;
          const float x = st[n][c] * a.scale_log2 - slope * static_cast<float>(i - j) - slse[r];
          const float p = j > i || i >= a.seq || j >= a.seq ? 0.0f : env.Exp2(x);
          st[n][c] = p;                             // Pᵀ
          dpt[n][c] = p * (dpt[n][c] - sdelta[r]);  // dSᵀ
        }
      }
      FlashTilesTimesRows<kDh, kFlashBwdRows / 16>(env, st, sdo, dv);
      FlashTilesTimesRows<kDh, kFlashBwdRows / 16>(env, dpt, sq, dk);
    }
  }
  uint16_t* drows = dqkv + b * a.seq * a.ld;
  FlashStoreRows<kDh>(env, dk, a.scale, a.scale, drows + (a.heads + kvh) * dh, a.ld, key0, a.seq,
                      dh);
  FlashStoreRows<kDh>(env, dv, 1.0f, 1.0f, drows + (a.heads + a.kv_heads + kvh) * dh, a.ld, key0,
                      a.seq, dh);
}

}  // namespace parity::kernels::cuda
