// RequestCombiner without a database: every caller gets its own answer, batches respect their
// limits, callers that arrive together share a batch, and callbacks (SubmitAsync) are answered
// exactly once, may submit again, and are not dropped when the combiner goes away.
#include "server/scheduling/request_combiner.h"

#include <atomic>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
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

TEST(RequestCombinerTest, QueuedCallbacksAreAnsweredOnceEvenWhenTheCombinerGoesAway) {
  constexpr int kRequests = 100;
  std::vector<std::atomic<int>> answers(kRequests);
  std::vector<std::atomic<int>> calls(kRequests);
  {
    RequestCombiner<int, int> combiner(
        [](const std::vector<const int*>& batch) {
          absl::SleepFor(absl::Milliseconds(2));
          std::vector<int> out;
          for (const int* request : batch) out.push_back(*request * 10);
          return out;
        },
        /*max_batch=*/8, /*max_in_flight=*/1);
    for (int i = 0; i < kRequests; ++i) {
      auto request = std::make_unique<int>(i);
      const int& queued = *request;
      combiner.SubmitAsync(queued, [&, i, request = std::move(request)](int answer) {
        answers[i] = answer;
        ++calls[i];
      });
    }
  }  // most requests are still queued here: the destructor must answer them
  for (int i = 0; i < kRequests; ++i) {
    EXPECT_EQ(calls[i].load(), 1) << "expected request " << i << " to be answered exactly once";
    EXPECT_EQ(answers[i].load(), i * 10) << "expected request " << i << " to get its own answer";
  }
}

TEST(RequestCombinerTest, ACallbackMaySubmitAgain) {
  RequestCombiner<int, int> combiner(
      [](const std::vector<const int*>& batch) {
        std::vector<int> out;
        for (const int* request : batch) out.push_back(*request + 1);
        return out;
      },
      /*max_batch=*/4, /*max_in_flight=*/1);
  // A chain of 20 tries, each submitted from the previous one's callback (as a long poll that
  // found nothing goes back to the queue): a callback run under the combiner's lock would hang.
  std::atomic<int> reached{0};
  absl::Notification finished;
  int request = 0;
  std::function<void(int)> next = [&](int answer) {
    reached = answer;
    if (answer == 20) return finished.Notify();
    request = answer;
    combiner.SubmitAsync(request, [&](int a) { next(a); });
  };
  combiner.SubmitAsync(request, [&](int a) { next(a); });
  ASSERT_TRUE(finished.WaitForNotificationWithTimeout(absl::Seconds(30)))
      << "expected the chain to reach 20; it stopped at " << reached.load();
}

}  // namespace
}  // namespace parity::server
