#include "kernels/backend/thread_pool.h"

#include <algorithm>

namespace parity::kernels {

ThreadPool::ThreadPool(int threads) {
  for (int i = 1; i < std::max(1, threads); ++i) {
    workers_.emplace_back([this, i] { WorkerLoop(i); });
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

int ThreadPool::NumChunks(int64_t n, int64_t min_chunk) const {
  if (n <= 0) return 0;
  const int64_t by_size = std::max<int64_t>(1, n / std::max<int64_t>(1, min_chunk));
  return static_cast<int>(std::min<int64_t>({by_size, Size(), n}));
}

void ThreadPool::ParallelFor(int64_t n, int64_t min_chunk,
                             const std::function<void(int, int64_t, int64_t)>& fn) {
  const int chunks = NumChunks(n, min_chunk);
  if (chunks == 0) return;
  if (chunks == 1 || in_parallel_) {
    // Same chunking even when serial, so per-chunk partials keep their meaning.
    for (int c = 0; c < chunks; ++c) {
      int64_t b, e;
      ChunkRange(n, chunks, c, &b, &e);
      fn(c, b, e);
    }
    return;
  }
  in_parallel_ = true;
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = &fn;
    job_n_ = n;
    job_chunks_ = chunks;
    pending_ = chunks - 1;
    ++generation_;
  }
  work_cv_.notify_all();
  int64_t b, e;
  ChunkRange(n, chunks, 0, &b, &e);
  fn(0, b, e);
  {
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return pending_ == 0; });
    job_ = nullptr;
  }
  in_parallel_ = false;
}

void ThreadPool::WorkerLoop(int index) {
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(int, int64_t, int64_t)>* job;
    int64_t n;
    int chunks;
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(
          lock, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      job = job_;
      n = job_n_;
      chunks = job_chunks_;
    }
    if (index < chunks) {
      int64_t b, e;
      ChunkRange(n, chunks, index, &b, &e);
      (*job)(index, b, e);
      std::lock_guard<std::mutex> lock(mu_);
      if (--pending_ == 0) done_cv_.notify_one();
    }
  }
}

}  // namespace parity::kernels
