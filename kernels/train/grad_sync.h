// The gradient sum of a data-parallel step (internal to train/): the flat gradient is summed over
// the ranks in buckets. Where the backend allows it (the CPU backend with Gloo: the collectives
// run on host memory from any thread), each layer's range is summed on a communication thread as
// soon as the last micro-batch's backward has finished that layer, overlapping with the backward
// of the layers below; the rest (embedding, final norm, head) after the backward. On the CUDA
// backend with NCCL (Communicator::QueuesOnDevice) a posted range's sum is queued at once on the
// communicator's own stream, after the backward work queued so far, so it runs on the GPU while
// the layers below are differentiated; Finish queues the rest and waits for them all.
//
// Every rank issues the same collectives in the same order (layer ranges deepest first, then the
// rest), so the sums pair up across ranks and every rank ends with the same bits.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "kernels/comm/communicator.h"

namespace parity::kernels {

class GradientSync {
 public:
  // Sums `n` floats at `grads` over `comm`; `overlap` starts the communication thread.
  GradientSync(Communicator& comm, float* grads, int64_t n, bool overlap);
  ~GradientSync();  // joins the thread (after Finish, or abandoning what is queued)
  GradientSync(const GradientSync&) = delete;
  GradientSync& operator=(const GradientSync&) = delete;

  bool overlapping() const { return thread_.joinable() || queued_; }
  // [offset, offset + count) is final: sum it now (on the thread) — Transformer's GradsReadyHook.
  void Post(int64_t offset, int64_t count);
  // Waits for the posted ranges, then sums every range not posted. The first error, if any.
  absl::Status Finish();

 private:
  // The range in buckets: summed now, or in queued mode queued on the device.
  absl::Status Sum(int64_t offset, int64_t count);
  void Loop();

  Communicator& comm_;
  float* const grads_;
  const int64_t n_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<int64_t, int64_t>> queue_;  // guarded by mu_
  std::vector<std::pair<int64_t, int64_t>> done_;  // posted ranges; guarded by mu_
  int pending_ = 0;                                // queued or being summed; guarded by mu_
  bool stop_ = false;                              // guarded by mu_
  absl::Status status_;                            // first error; guarded by mu_
  std::thread thread_;
  const bool queued_;  // the communicator queues sums on the device (NCCL): no thread
};

}  // namespace parity::kernels
