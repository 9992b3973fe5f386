#include "kernels/cuda/tests/lane_emulator.h"

#include <cstdio>
#include <cstdlib>

namespace parity::kernels::testing {
namespace {

constexpr size_t kStackBytes = 256 * 1024;
constexpr uint16_t kNanPattern = 0x7fc1;  // a quiet bf16 NaN: shared memory nobody wrote

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "lane emulator: %s\n", what);
  std::abort();
}

}  // namespace

int64_t LaneEnv::BlockX() const { return block_.x_; }
int64_t LaneEnv::BlockY() const { return block_.y_; }
uint16_t* LaneEnv::Smem() const { return block_.smem_.data(); }

void LaneEnv::SyncBlock() const { block_.Wait(block_.block_barrier_, block_.threads_); }

float LaneEnv::ShflXor(float v, int mask) const {
  BlockEmulator::WarpExchange& x = block_.exchange_[Warp()];
  BlockEmulator::Barrier& barrier = block_.warp_barriers_[Warp()];
  x.value[Lane()] = v;
  block_.Wait(barrier, 32);
  const float other = x.value[Lane() ^ mask];
  block_.Wait(barrier, 32);  // everyone has read before the next exchange writes
  return other;
}

void LaneEnv::Mma(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) const {
  BlockEmulator::WarpExchange& x = block_.exchange_[Warp()];
  BlockEmulator::Barrier& barrier = block_.warp_barriers_[Warp()];
  const int lane = Lane();
  for (int i = 0; i < 4; ++i) x.a[lane][i] = a[i], x.c[lane][i] = d[i];
  x.b[lane][0] = b[0], x.b[lane][1] = b[1];
  block_.Wait(barrier, 32);
  // A(r, k): lane (r % 8)·4 + (k % 8)/2, register (r ≥ 8) + 2·(k ≥ 8), half k % 2.
  // B(k, n): lane n·4 + (k % 8)/2, register (k ≥ 8), half k % 2.
  const auto half = [](uint32_t reg, int k) {
    return ToFloat(Bf16{static_cast<uint16_t>((reg >> (16 * (k & 1))) & 0xffffu)});
  };
  const int g = lane >> 2, t = lane & 3;
  float out[4];
  for (int i = 0; i < 4; ++i) {
    const int r = g + (i >= 2 ? 8 : 0), n = 2 * t + (i & 1);
    double sum = 0.0;
    for (int k = 0; k < 16; ++k) {
      const float av = half(x.a[(r % 8) * 4 + (k % 8) / 2][(r >= 8 ? 1 : 0) + (k >= 8 ? 2 : 0)], k);
      const float bv = half(x.b[n * 4 + (k % 8) / 2][k >= 8 ? 1 : 0], k);
      sum += static_cast<double>(av) * static_cast<double>(bv);
    }
    out[i] = static_cast<float>(static_cast<double>(x.c[lane][i]) + sum);
  }
  block_.Wait(barrier, 32);
  for (int i = 0; i < 4; ++i) d[i] = out[i];
}

// Lanes 8m..8m+7 name the rows of matrix m; register m of lane l holds row l/4, columns
// 2(l%4) and 2(l%4)+1 of matrix m — or of its transpose (then rows 2(l%4), 2(l%4)+1, column l/4).
void LaneEnv::LdMatrixX4(const uint16_t* row, bool trans, uint32_t (&r)[4]) const {
  if (reinterpret_cast<uintptr_t>(row) % 16 != 0) Fail("ldmatrix: a row is not 16-byte aligned");
  BlockEmulator::WarpExchange& x = block_.exchange_[Warp()];
  BlockEmulator::Barrier& barrier = block_.warp_barriers_[Warp()];
  const int lane = Lane(), q = lane / 4, p = 2 * (lane % 4);
  x.row[lane] = row;
  block_.Wait(barrier, 32);
  for (int m = 0; m < 4; ++m) {
    const uint16_t* const* rows = x.row.data() + 8 * m;
    const uint16_t lo = trans ? rows[p][q] : rows[q][p];
    const uint16_t hi = trans ? rows[p + 1][q] : rows[q][p + 1];
    r[m] = static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
  }
  block_.Wait(barrier, 32);
}

uint32_t LaneEnv::Ld32(const uint16_t* p) const {
  if (reinterpret_cast<uintptr_t>(p) % 4 != 0) Fail("misaligned 4-byte load");
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
void LaneEnv::St32(uint16_t* p, uint32_t v) const {
  if (reinterpret_cast<uintptr_t>(p) % 4 != 0) Fail("misaligned 4-byte store");
  std::memcpy(p, &v, 4);
}
void LaneEnv::Copy16(uint16_t* dst, const uint16_t* src) const {
  if (reinterpret_cast<uintptr_t>(dst) % 16 != 0 || reinterpret_cast<uintptr_t>(src) % 16 != 0) {
    Fail("misaligned 16-byte move");
  }
  std::memcpy(dst, src, 16);
}
void LaneEnv::Zero16(uint16_t* dst) const {
  if (reinterpret_cast<uintptr_t>(dst) % 16 != 0) Fail("misaligned 16-byte store");
  std::memset(dst, 0, 16);
}

BlockEmulator::BlockEmulator(int threads, size_t smem_bytes)
    : threads_(threads),
      smem_((smem_bytes + 1) / 2 + 8),
      contexts_(threads),
      done_(threads),
      warp_barriers_(threads / 32),
      exchange_(threads / 32) {
  if (threads <= 0 || threads % 32 != 0) Fail("threads must be a positive multiple of 32");
  for (int i = 0; i < threads; ++i) stacks_.push_back(std::make_unique<char[]>(kStackBytes));
}

BlockEmulator::~BlockEmulator() = default;

void BlockEmulator::Trampoline(unsigned lo, unsigned hi) {
  auto* self = reinterpret_cast<BlockEmulator*>((static_cast<uintptr_t>(hi) << 32) | lo);
  LaneEnv env(*self, self->current_);
  (*self->body_)(env);
  self->done_[self->current_] = true;
  // Returning switches to uc_link, the scheduler.
}

void BlockEmulator::Yield() { swapcontext(&contexts_[current_], &scheduler_); }

void BlockEmulator::Wait(Barrier& barrier, int participants) {
  const uint64_t generation = barrier.generation;
  if (++barrier.arrived == participants) {
    barrier.arrived = 0;
    ++barrier.generation;
    return;
  }
  while (barrier.generation == generation) Yield();
}

// Outside Run: getcontext returns twice, which would leave Run's loop variables unreliable.
void BlockEmulator::Prepare(int i) {
  const auto self = reinterpret_cast<uintptr_t>(this);
  done_[i] = false;
  if (getcontext(&contexts_[i]) != 0) Fail("getcontext failed");
  contexts_[i].uc_stack.ss_sp = stacks_[i].get();
  contexts_[i].uc_stack.ss_size = kStackBytes;
  contexts_[i].uc_link = &scheduler_;
  makecontext(&contexts_[i], reinterpret_cast<void (*)()>(&Trampoline), 2,
              static_cast<unsigned>(self & 0xffffffffu), static_cast<unsigned>(self >> 32));
}

void BlockEmulator::Run(int64_t x, int64_t y, const std::function<void(LaneEnv&)>& body) {
  x_ = x, y_ = y, body_ = &body;
  std::fill(smem_.begin(), smem_.end(), kNanPattern);
  block_barrier_ = {};
  for (Barrier& b : warp_barriers_) b = {};
  for (int i = 0; i < threads_; ++i) Prepare(i);
  // Round robin: a fiber runs until it waits at a barrier or finishes. A full round in which no
  // barrier generation moved and no fiber finished is a deadlock.
  for (int remaining = threads_; remaining > 0;) {
    uint64_t before = block_barrier_.generation;
    for (const Barrier& b : warp_barriers_) before += b.generation;
    const int remaining_before = remaining;
    for (int i = 0; i < threads_; ++i) {
      if (done_[i]) continue;
      current_ = i;
      swapcontext(&scheduler_, &contexts_[i]);
      if (done_[i]) --remaining;
    }
    uint64_t after = block_barrier_.generation;
    for (const Barrier& b : warp_barriers_) after += b.generation;
    if (remaining > 0 && after == before && remaining == remaining_before) {
      Fail("deadlock: threads wait at a barrier others never reach");
    }
  }
}

void BlockEmulator::RunGrid(int64_t gx, int64_t gy, const std::function<void(LaneEnv&)>& body) {
  for (int64_t y = 0; y < gy; ++y) {
    for (int64_t x = 0; x < gx; ++x) Run(x, y, body);
  }
}

}  // namespace parity::kernels::testing
