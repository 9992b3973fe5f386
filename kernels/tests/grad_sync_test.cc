// GradientSync's queued mode (the NCCL path, which no CPU machine can run) against a fake
// communicator that queues sums and applies them only when waited for, as a GPU stream would:
// a posted range is queued while the backward goes on, Finish queues the rest in ascending order
// and in buckets, waits once, and every float ends summed exactly once; a failed queue stops the
// rest and is what Finish returns. The host modes (local, Gloo's thread) are covered end to end
// by data_parallel_test.cc.
#include "kernels/train/grad_sync.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace parity::kernels {
namespace {

// Two ranks with equal gradients: a sum doubles. Queued sums apply at WaitQueued only, so a
// range summed twice, or not at all, shows in the values.
class QueuingFake final : public Communicator {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 2; }
  std::string_view Name() const override { return "queuing-fake"; }
  absl::Status AllReduceSum(float*, int64_t) override {
    return absl::InternalError("a queuing communicator's sums must be queued, not run at once");
  }
  absl::Status AllReduceSumHost(double*, int64_t) override { return absl::OkStatus(); }
  absl::Status Broadcast(void*, size_t, int) override { return absl::OkStatus(); }
  absl::Status BroadcastHost(void*, size_t, int) override { return absl::OkStatus(); }
  absl::Status Barrier() override { return absl::OkStatus(); }

  bool QueuesOnDevice() const override { return true; }
  absl::Status QueueAllReduceSum(float* data, int64_t count) override {
    if (fail_after_ >= 0 && static_cast<int>(queued_.size()) >= fail_after_) {
      return absl::UnavailableError("peer died");
    }
    queued_.emplace_back(data, count);
    return absl::OkStatus();
  }
  absl::Status WaitQueued() override {
    ++waits_;
    for (auto& [data, count] : queued_) {
      for (int64_t i = 0; i < count; ++i) data[i] *= 2;
    }
    applied_ += queued_.size();
    queued_.clear();
    return absl::OkStatus();
  }

  std::vector<std::pair<float*, int64_t>> queued_;
  size_t applied_ = 0;
  int waits_ = 0;
  int fail_after_ = -1;  // queue calls that succeed before one fails; -1: none fails
};

TEST(GradientSyncTest, QueuedModeQueuesPostedRangesAtOnceAndTheRestAtFinishThenWaitsOnce) {
  std::vector<float> grads(100, 1.0f);
  QueuingFake comm;
  GradientSync sync(comm, grads.data(), static_cast<int64_t>(grads.size()), /*overlap=*/true);
  ASSERT_TRUE(sync.overlapping()) << "a queuing communicator overlaps without a thread";
  sync.Post(60, 30);  // the deepest layer first, as the backward finishes it
  ASSERT_EQ(comm.queued_.size(), 1u) << "a posted range is queued while the backward goes on";
  EXPECT_EQ(comm.queued_[0].first, grads.data() + 60);
  EXPECT_EQ(comm.queued_[0].second, 30);
  sync.Post(20, 40);
  EXPECT_EQ(comm.waits_, 0) << "nothing is waited for before Finish";
  ASSERT_TRUE(sync.Finish().ok());
  EXPECT_EQ(comm.waits_, 1) << "one wait for every queued sum";
  EXPECT_EQ(comm.applied_, 4u) << "two posted ranges, then [0,20) and [90,100)";
  for (size_t i = 0; i < grads.size(); ++i) {
    ASSERT_EQ(grads[i], 2.0f) << "float " << i << " must be summed exactly once";
  }
}

TEST(GradientSyncTest, QueuedModeWithNothingPostedSumsEverythingAtFinish) {
  std::vector<float> grads(10, 3.0f);
  QueuingFake comm;
  GradientSync sync(comm, grads.data(), static_cast<int64_t>(grads.size()), /*overlap=*/true);
  ASSERT_TRUE(sync.Finish().ok());
  EXPECT_EQ(comm.applied_, 1u);
  for (float g : grads) ASSERT_EQ(g, 6.0f);
}

TEST(GradientSyncTest, AFailedQueueStopsTheRestAndFinishReturnsIt) {
  std::vector<float> grads(100, 1.0f);
  QueuingFake comm;
  comm.fail_after_ = 1;
  GradientSync sync(comm, grads.data(), static_cast<int64_t>(grads.size()), /*overlap=*/true);
  sync.Post(50, 50);
  sync.Post(10, 40);  // fails: the gang is broken
  sync.Post(0, 10);   // dropped, never queued
  const absl::Status finished = sync.Finish();
  EXPECT_EQ(finished.code(), absl::StatusCode::kUnavailable) << finished;
  EXPECT_EQ(comm.queued_.size(), 1u) << "nothing is queued after the failure";
  EXPECT_EQ(comm.waits_, 0) << "a broken gang's sums are not waited for";
}

}  // namespace
}  // namespace parity::kernels
