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
  // Batches of `batch` windows (micro-batch sequences).
  BatchLoader(const TokenCorpus& corpus, int64_t batch, Prefetch prefetch);
  ~BatchLoader();
  BatchLoader(const BatchLoader&) = delete;
  BatchLoader& operator=(const BatchLoader&) = delete;

  // Fills inputs/targets [batch, S] with global windows [cursor, cursor + batch) and returns the
  // bytes of text the targets cover (TokenCorpus::FillTraining's result). With prefetching the
  // vectors are swapped with the loader's buffer (same sizes), and the batch at cursor + batch is
  // started before returning; a cursor that is not the one prepared (the first call, after a
  // resume) is filled here. `next` (≥ 0) names the cursor to prepare instead of cursor + batch: a
  // data-parallel rank reads a slice of each step, so its next batch lies further on.
  absl::StatusOr<int64_t> Next(int64_t cursor, std::vector<int32_t>& inputs,
                               std::vector<int32_t>& targets, int64_t next = -1);

  // Seconds Next() spent waiting for data so far: the loader's share of step time.
  double wait_seconds() const { return wait_seconds_; }

 private:
  void Loop();

  const TokenCorpus& corpus_;
  const int64_t batch_;
  double wait_seconds_ = 0;  // trainer thread only
  absl::Mutex mu_;
  int64_t requested_ ABSL_GUARDED_BY(mu_) = -1;  // cursor the loader is to fill; −1 = none
  int64_t filling_ ABSL_GUARDED_BY(mu_) = -1;    // cursor the loader is filling now
  int64_t ready_ ABSL_GUARDED_BY(mu_) = -1;      // cursor whose batch is in the buffers
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  // Owned by the loader thread while filling_ ≥ 0, by the trainer otherwise.
  std::vector<int32_t> inputs_, targets_;
  absl::StatusOr<int64_t> bytes_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;  // not started when prefetch is off
};

}  // namespace parity::kernels
