// A fixed-size thread pool with one primitive, ParallelFor, that splits [0, n) into at most
// `Size()` contiguous chunks. The split depends only on n and the pool size, never on timing, so a
// reduction written as "one partial per chunk, summed in chunk order" is deterministic for a given
// thread count — the engine's reproducibility promise rests on this.
//
// Threading: ParallelFor must be called from one thread at a time (the training loop's thread);
// the calling thread runs chunk 0 itself. Nested ParallelFor calls run serially in the caller.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"

namespace parity::kernels {

class ThreadPool {
 public:
  // `threads` >= 1; 1 means everything runs on the caller.
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int Size() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(chunk, begin, end) for every non-empty chunk of [0, n); chunk < Size(). Blocks until
  // all chunks are done. Chunks smaller than `min_chunk` are merged (fewer, larger chunks).
  void ParallelFor(int64_t n, int64_t min_chunk,
                   const std::function<void(int chunk, int64_t begin, int64_t end)>& fn);

  // The chunk boundaries ParallelFor would use; exposed so callers can size per-chunk partials.
  int NumChunks(int64_t n, int64_t min_chunk) const;

 private:
  void WorkerLoop(int index);

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  // The job in flight; generation_ increments per job so each worker runs it once.
  const std::function<void(int, int64_t, int64_t)>* job_ ABSL_GUARDED_BY(mu_) = nullptr;
  int64_t job_n_ ABSL_GUARDED_BY(mu_) = 0;
  int job_chunks_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  int pending_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<bool> in_parallel_{false};  // true while a job runs: nested calls go serial
};

// Chunk c of n split into `chunks` nearly equal contiguous parts.
inline void ChunkRange(int64_t n, int chunks, int c, int64_t* begin, int64_t* end) {
  const int64_t base = n / chunks, rem = n % chunks;
  *begin = c * base + (c < rem ? c : rem);
  *end = *begin + base + (c < rem ? 1 : 0);
}

}  // namespace parity::kernels
