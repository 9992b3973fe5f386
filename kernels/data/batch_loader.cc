#include "kernels/data/batch_loader.h"

#include <chrono>
#include <utility>

namespace parity::kernels {

BatchLoader::BatchLoader(const TokenCorpus& corpus, int64_t batch, Prefetch prefetch)
    : corpus_(corpus), batch_(batch) {
  if (prefetch == Prefetch::kOff) return;
  inputs_.resize(batch * corpus.seq_len());
  targets_.resize(batch * corpus.seq_len());
  thread_ = std::thread([this] { Loop(); });
}

BatchLoader::~BatchLoader() {
  if (!thread_.joinable()) return;
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

void BatchLoader::Loop() {
  for (;;) {
    int64_t cursor = -1;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](BatchLoader* l)
               ABSL_EXCLUSIVE_LOCKS_REQUIRED(l->mu_) { return l->stop_ || l->requested_ >= 0; },
          this));
      if (stop_) return;
      cursor = filling_ = std::exchange(requested_, -1);
      ready_ = -1;
    }
    absl::StatusOr<int64_t> bytes =
        corpus_.FillTraining(cursor, batch_, inputs_.data(), targets_.data());
    corpus_.WillNeedTraining(cursor + batch_, batch_);  // the batch after: disk reads start now
    absl::MutexLock lock(&mu_);
    bytes_ = std::move(bytes);
    ready_ = cursor;
    filling_ = -1;
  }
}

absl::StatusOr<int64_t> BatchLoader::Next(int64_t cursor, std::vector<int32_t>& inputs,
                                          std::vector<int32_t>& targets, int64_t next) {
  const auto t0 = std::chrono::steady_clock::now();
  absl::StatusOr<int64_t> bytes;
  if (!thread_.joinable()) {
    bytes = corpus_.FillTraining(cursor, batch_, inputs.data(), targets.data());
  } else {
    absl::MutexLock lock(&mu_);
    // Wait for whatever the loader holds or is filling to settle (the buffers are then ours).
    mu_.Await(absl::Condition(
        +[](BatchLoader* l)
             ABSL_EXCLUSIVE_LOCKS_REQUIRED(l->mu_) { return l->filling_ < 0 && l->requested_ < 0; },
        this));
    if (ready_ == cursor) {
      std::swap(inputs, inputs_);
      std::swap(targets, targets_);
      bytes = std::move(bytes_);
    } else {
      bytes = corpus_.FillTraining(cursor, batch_, inputs.data(), targets.data());
    }
    ready_ = -1;
    requested_ = next >= 0 ? next : cursor + batch_;
  }
  wait_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return bytes;
}

}  // namespace parity::kernels
