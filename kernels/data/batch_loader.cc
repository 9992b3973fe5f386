#include "kernels/data/batch_loader.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"

namespace parity::kernels {

BatchLoader::BatchLoader(const TokenCorpus& corpus, int64_t max_batch, Prefetch prefetch)
    : corpus_(corpus), max_batch_(max_batch) {
  if (prefetch == Prefetch::kOff) return;
  inputs_.resize(max_batch * corpus.seq_len());
  targets_.resize(max_batch * corpus.seq_len());
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
    Window window;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](BatchLoader* l) ABSL_EXCLUSIVE_LOCKS_REQUIRED(l->mu_) {
            return l->stop_ || l->requested_.cursor >= 0;
          },
          this));
      if (stop_) return;
      window = filling_ = std::exchange(requested_, Window{-1, 0});
      ready_ = {-1, 0};
    }
    absl::StatusOr<int64_t> bytes =
        corpus_.FillTraining(window.cursor, window.count, inputs_.data(), targets_.data());
    // The batch after: its disk reads start now.
    corpus_.WillNeedTraining(window.cursor + window.count, window.count);
    absl::MutexLock lock(&mu_);
    bytes_ = std::move(bytes);
    ready_ = window;
    filling_ = {-1, 0};
  }
}

absl::StatusOr<int64_t> BatchLoader::Next(Window window, std::vector<int32_t>& inputs,
                                          std::vector<int32_t>& targets, Window next) {
  const auto t0 = std::chrono::steady_clock::now();
  if (window.count <= 0 || window.count > max_batch_) {
    return absl::InternalError(absl::StrCat("BatchLoader::Next: ", window.count,
                                            " windows, outside [1, ", max_batch_, "]"));
  }
  if (next.cursor < 0) next = {window.cursor + window.count, window.count};
  next.count = std::min(next.count, max_batch_);
  absl::StatusOr<int64_t> bytes;
  if (!thread_.joinable()) {
    bytes = corpus_.FillTraining(window.cursor, window.count, inputs.data(), targets.data());
  } else {
    absl::MutexLock lock(&mu_);
    // Wait for whatever the loader holds or is filling to settle (the buffers are then ours).
    mu_.Await(absl::Condition(
        +[](BatchLoader* l) ABSL_EXCLUSIVE_LOCKS_REQUIRED(l->mu_) {
          return l->filling_.cursor < 0 && l->requested_.cursor < 0;
        },
        this));
    if (ready_ == window) {
      std::swap(inputs, inputs_);
      std::swap(targets, targets_);
      bytes = std::move(bytes_);
    } else {
      bytes = corpus_.FillTraining(window.cursor, window.count, inputs.data(), targets.data());
    }
    ready_ = {-1, 0};
    requested_ = next;
  }
  wait_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return bytes;
}

}  // namespace parity::kernels
