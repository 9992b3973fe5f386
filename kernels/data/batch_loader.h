// The training batches of a run, optionally prepared one micro-batch ahead on a loader thread
// (double buffering): while the device computes on batch k, the loader decodes batch k+1 from the
// memory-mapped shards — faulting in its pages, the only part that may wait on a disk — and asks
// the kernel to read ahead the pages of batch k+2. The windows are exactly TokenCorpus::
// FillTraining's for the same cursor in both modes; prefetching changes when they are read, never
// which.
//
// Threading: Next() and wait_seconds() are called by one thread (the trainer's); the loader thread
// is internal. The corpus must outlive the loader.
#pragma once

#include <cstdint>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "kernels/data/token_corpus.h"

namespace parity::kernels {

enum class Prefetch { kOff, kOn };

class BatchLoader {
 public:
  // `count` global training windows from `cursor`: one micro-batch.
  struct Window {
    int64_t cursor = 0;
    int64_t count = 0;
    bool operator==(const Window&) const = default;
  };

  // Batches of at most `max_batch` windows (the largest micro-batch's sequences).
  BatchLoader(const TokenCorpus& corpus, int64_t max_batch, Prefetch prefetch);
  ~BatchLoader();
  BatchLoader(const BatchLoader&) = delete;
  BatchLoader& operator=(const BatchLoader&) = delete;

  // Fills the first window.count·S elements of inputs/targets (each holding max_batch·S) with
  // global windows [cursor, cursor + count) and returns the bytes of text the targets cover
  // (TokenCorpus::FillTraining's result). With prefetching the vectors are swapped with the
  // loader's buffer (same sizes), and `next` is started before returning; a window that is not the
  // one prepared (the first call, after a resume) is filled here. `next` defaults to the window
  // after, of the same count; a data-parallel rank reads a slice of each step, so its next batch
  // lies further on, and an uneven micro-batch has another count. InternalError for a count
  // outside [1, max_batch].
  absl::StatusOr<int64_t> Next(Window window, std::vector<int32_t>& inputs,
                               std::vector<int32_t>& targets, Window next = {-1, 0});

  // Seconds Next() spent waiting for data so far: the loader's share of step time.
  double wait_seconds() const { return wait_seconds_; }

 private:
  void Loop();

  const TokenCorpus& corpus_;
  const int64_t max_batch_;
  double wait_seconds_ = 0;  // trainer thread only
  absl::Mutex mu_;
  // Cursors −1 = none: the window the loader is to fill, is filling, and holds in its buffers.
  Window requested_ ABSL_GUARDED_BY(mu_) = {-1, 0};
  Window filling_ ABSL_GUARDED_BY(mu_) = {-1, 0};
  Window ready_ ABSL_GUARDED_BY(mu_) = {-1, 0};
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  // Owned by the loader thread while filling_ ≥ 0, by the trainer otherwise.
  std::vector<int32_t> inputs_, targets_;
  absl::StatusOr<int64_t> bytes_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;  // not started when prefetch is off
};

}  // namespace parity::kernels
