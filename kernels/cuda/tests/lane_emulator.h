// A host emulation of one CUDA thread block for kernels written against a lane environment
// (flash_tc.h): every CUDA thread is a fiber (ucontext) on the calling thread, `__syncthreads`
// and the warp-synchronous operations (xor shuffles, `mma.sync`) are barriers that switch fibers
// until all participants arrived. Shared memory is pre-filled with a NaN pattern, so a read of
// anything the kernel did not write shows up in the results. Fibers run one at a time in a fixed
// order, so a run is deterministic; real-hardware races are out of its reach.
//
// `ldmatrix` gathers the warp's 32 row addresses and hands each lane its registers as PTX defines
// them (plain and .trans). The matrix product follows PTX's m16n8k16 fragment layouts (flash_tc.h's
// header): each lane contributes its registers, and each lane's D elements are computed from the
// whole warp's A, B and C, products exact (bf16·bf16 fits a float) and summed in double.
#pragma once

#include <ucontext.h>

#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <vector>

#include "kernels/backend/bf16.h"

namespace parity::kernels::testing {

class BlockEmulator;

// The emulated kernels read and write bf16 as raw bits (uint16_t): n values drawn N(0, 1) and
// rounded to bf16, and their exact widening for the double-precision references.
inline std::vector<uint16_t> RandomBf16(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<uint16_t> v(n);
  for (uint16_t& x : v) x = ToBf16(dist(rng)).bits;
  return v;
}
inline double Wide(uint16_t bits) { return ToFloat(Bf16{bits}); }
inline std::vector<double> Wide(const std::vector<uint16_t>& v) {
  std::vector<double> w(v.size());
  for (size_t i = 0; i < v.size(); ++i) w[i] = Wide(v[i]);
  return w;
}

// The environment one emulated CUDA thread sees (the host twin of cuda::DeviceLaneEnv).
class LaneEnv {
 public:
  LaneEnv(BlockEmulator& block, int thread) : block_(block), thread_(thread) {}

  int Thread() const { return thread_; }
  int Lane() const { return thread_ & 31; }
  int Warp() const { return thread_ >> 5; }
  int64_t BlockX() const;
  int64_t BlockY() const;
  uint16_t* Smem() const;
  void SyncBlock() const;
  float ShflXor(float v, int mask) const;
  void Mma(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) const;
  void LdMatrix(const uint16_t* row, uint32_t (&r)[4]) const { LdMatrixX4(row, false, r); }
  void LdMatrixTrans(const uint16_t* row, uint32_t (&r)[4]) const { LdMatrixX4(row, true, r); }

  float Max(float x, float y) const { return std::fmax(x, y); }
  float Exp2(float x) const { return std::exp2(x); }
  float Log2(float x) const { return std::log2(x); }
  float SlopeLog2(int64_t h, int64_t heads) const {
    return static_cast<float>(
        std::exp2(-8.0 * static_cast<double>(h + 1) / static_cast<double>(heads)) *
        1.4426950408889634);
  }
  uint32_t Pack(float lo, float hi) const {
    return static_cast<uint32_t>(ToBf16(lo).bits) | (static_cast<uint32_t>(ToBf16(hi).bits) << 16);
  }
  uint32_t Ld32(const uint16_t* p) const;
  void LdMatrixX4(const uint16_t* row, bool trans, uint32_t (&r)[4]) const;
  void St32(uint16_t* p, uint32_t v) const;
  void Copy16(uint16_t* dst, const uint16_t* src) const;
  void Zero16(uint16_t* dst) const;

 private:
  BlockEmulator& block_;
  int thread_;
};

class BlockEmulator {
 public:
  // `threads` a multiple of 32; `smem_bytes` of shared memory per block.
  BlockEmulator(int threads, size_t smem_bytes);
  ~BlockEmulator();
  BlockEmulator(const BlockEmulator&) = delete;
  BlockEmulator& operator=(const BlockEmulator&) = delete;

  // Runs body(env) once per thread of block (x, y) and returns when every thread has finished.
  // Dies with a message when the threads deadlock (some wait at a barrier the others left).
  void Run(int64_t x, int64_t y, const std::function<void(LaneEnv&)>& body);

  // Emulates every block of a (gx, gy) grid in order.
  void RunGrid(int64_t gx, int64_t gy, const std::function<void(LaneEnv&)>& body);

 private:
  friend class LaneEnv;
  struct Barrier {
    int arrived = 0;
    uint64_t generation = 0;
  };
  struct WarpExchange {
    std::array<float, 32> value{};
    std::array<std::array<uint32_t, 4>, 32> a{};
    std::array<std::array<uint32_t, 2>, 32> b{};
    std::array<std::array<float, 4>, 32> c{};
    std::array<const uint16_t*, 32> row{};
  };

  void Prepare(int thread);
  void Wait(Barrier& barrier, int participants);
  void Yield();
  static void Trampoline(unsigned lo, unsigned hi);

  int threads_;
  std::vector<uint16_t> smem_;
  std::vector<std::unique_ptr<char[]>> stacks_;
  std::vector<ucontext_t> contexts_;
  std::vector<bool> done_;
  ucontext_t scheduler_{};
  int current_ = 0;
  int64_t x_ = 0, y_ = 0;
  const std::function<void(LaneEnv&)>* body_ = nullptr;
  Barrier block_barrier_;
  std::vector<Barrier> warp_barriers_;
  std::vector<WarpExchange> exchange_;
};

}  // namespace parity::kernels::testing
