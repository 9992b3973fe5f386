// RequestCombiner without a database: every caller gets its own answer, batches respect their
// limits, and callers that arrive together share a batch.
#include "server/request_combiner.h"

#include <atomic>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace parity::server {
namespace {

TEST(RequestCombinerTest, ALoneCallerGoesStraightThroughInABatchOfOne) {
  std::vector<size_t> sizes;
  RequestCombiner<int, int> combiner(
      [&](const std::vector<const int*>& batch) {
        sizes.push_back(batch.size());
        return std::vector<int>{*batch[0] * 2};
      },
      /*max_batch=*/8, /*max_in_flight=*/1);
  EXPECT_EQ(combiner.Submit(21), 42);
  EXPECT_EQ(combiner.Submit(5), 10);
  EXPECT_EQ(sizes, (std::vector<size_t>{1, 1}));
}

TEST(RequestCombinerTest, ConcurrentCallersEachGetTheirOwnAnswerWithinTheLimits) {
  constexpr int kCallers = 32;
  constexpr int kCallsEach = 50;
  constexpr size_t kMaxBatch = 6;
  std::atomic<int> running{0}, most_running{0}, batches{0}, largest{0};
  RequestCombiner<int, int> combiner(
      [&](const std::vector<const int*>& batch) {
        const int now = ++running;
        int seen = most_running.load();
        while (now > seen && !most_running.compare_exchange_weak(seen, now)) {
        }
        ++batches;
        int big = largest.load();
        const int size = static_cast<int>(batch.size());
        while (size > big && !largest.compare_exchange_weak(big, size)) {
        }
        absl::SleepFor(absl::Microseconds(300));  // a statement's round trip
        std::vector<int> out;
        for (const int* request : batch) out.push_back(*request + 1);
        --running;
        return out;
      },
      kMaxBatch, /*max_in_flight=*/2);
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kCallers; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kCallsEach; ++i) {
        const int request = t * 1000 + i;
        if (combiner.Submit(request) != request + 1) ++wrong;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0) << "expected every caller to get the answer to its own request";
  EXPECT_LE(most_running.load(), 2) << "expected at most max_in_flight batches at once";
  EXPECT_LE(largest.load(), static_cast<int>(kMaxBatch));
  EXPECT_GT(largest.load(), 1) << "expected callers arriving together to share a batch";
  EXPECT_LT(batches.load(), kCallers * kCallsEach) << "expected fewer batches than calls";
}

}  // namespace
}  // namespace parity::server
