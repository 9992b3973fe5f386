// AnalysisCache (server/scheduling/analysis_cache.h): one computation per key and version, kept
// until the version moves, shared by concurrent callers, errors never kept, bounded.
#include "server/scheduling/analysis_cache.h"

#include <atomic>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace parity::server {
namespace {

// An answer that says which computation made it.
v1::AnalyzeSweepResponse Made(int n) {
  v1::AnalyzeSweepResponse response;
  response.set_eval_set(std::to_string(n));
  return response;
}

TEST(AnalysisCacheTest, AKeyIsComputedOncePerVersion) {
  AnalysisCache cache(4);
  int computed = 0;
  auto compute = [&]() -> absl::StatusOr<v1::AnalyzeSweepResponse> { return Made(++computed); };
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<AnalysisCache::Answer> answer = cache.GetOrCompute("s/", 7, compute);
    ASSERT_TRUE(answer.ok()) << answer.status();
    EXPECT_EQ((*answer)->eval_set(), "1") << "call " << i << " should get the first computation";
  }
  absl::StatusOr<AnalysisCache::Answer> moved = cache.GetOrCompute("s/", 8, compute);
  ASSERT_TRUE(moved.ok());
  EXPECT_EQ((*moved)->eval_set(), "2") << "a new version is computed again";
  ASSERT_TRUE(cache.GetOrCompute("t/", 8, compute).ok());
  EXPECT_EQ(computed, 3) << "another key is its own";
}

TEST(AnalysisCacheTest, AnOlderVersionThanTheKeptOneIsComputedButNotKept) {
  AnalysisCache cache(4);
  int computed = 0;
  auto compute = [&]() -> absl::StatusOr<v1::AnalyzeSweepResponse> { return Made(++computed); };
  ASSERT_TRUE(cache.GetOrCompute("s/", 9, compute).ok());
  absl::StatusOr<AnalysisCache::Answer> older = cache.GetOrCompute("s/", 8, compute);
  ASSERT_TRUE(older.ok());
  EXPECT_EQ((*older)->eval_set(), "2");
  absl::StatusOr<AnalysisCache::Answer> newest = cache.GetOrCompute("s/", 9, compute);
  ASSERT_TRUE(newest.ok());
  EXPECT_EQ((*newest)->eval_set(), "1") << "the newer kept answer stays";
}

TEST(AnalysisCacheTest, ErrorsAreNotKept) {
  AnalysisCache cache(4);
  int calls = 0;
  auto failing = [&]() -> absl::StatusOr<v1::AnalyzeSweepResponse> {
    ++calls;
    return absl::UnavailableError("database down");
  };
  EXPECT_EQ(cache.GetOrCompute("s/", 1, failing).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(cache.GetOrCompute("s/", 1, failing).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(calls, 2) << "a failure is retried by the next caller";
  EXPECT_EQ(cache.size(), 0u);
}

TEST(AnalysisCacheTest, ConcurrentCallersOfOneVersionShareOneComputation) {
  AnalysisCache cache(4);
  std::atomic<int> computed = 0;
  absl::Notification release;
  auto slow = [&]() -> absl::StatusOr<v1::AnalyzeSweepResponse> {
    const int n = ++computed;
    release.WaitForNotification();
    return Made(n);
  };
  std::vector<std::thread> callers;
  std::atomic<int> answered_by_first = 0;
  for (int i = 0; i < 8; ++i) {
    callers.emplace_back([&] {
      absl::StatusOr<AnalysisCache::Answer> answer = cache.GetOrCompute("s/", 5, slow);
      if (answer.ok() && (*answer)->eval_set() == "1") ++answered_by_first;
    });
  }
  while (computed.load() == 0) std::this_thread::yield();
  absl::SleepFor(absl::Milliseconds(50));  // the others reach the wait
  release.Notify();
  for (std::thread& caller : callers) caller.join();
  EXPECT_EQ(computed.load(), 1) << "one computation for eight callers of one version";
  EXPECT_EQ(answered_by_first.load(), 8);
}

TEST(AnalysisCacheTest, TheLeastRecentlyUsedGoesPastTheCapacity) {
  AnalysisCache cache(2);
  int computed = 0;
  auto compute = [&]() -> absl::StatusOr<v1::AnalyzeSweepResponse> { return Made(++computed); };
  ASSERT_TRUE(cache.GetOrCompute("a/", 1, compute).ok());  // 1
  ASSERT_TRUE(cache.GetOrCompute("b/", 1, compute).ok());  // 2
  ASSERT_TRUE(cache.GetOrCompute("a/", 1, compute).ok());  // kept; a is now the most recent
  ASSERT_TRUE(cache.GetOrCompute("c/", 1, compute).ok());  // 3; b goes
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(computed, 3);
  absl::StatusOr<AnalysisCache::Answer> a = cache.GetOrCompute("a/", 1, compute);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ((*a)->eval_set(), "1") << "a was used recently and stays";
  absl::StatusOr<AnalysisCache::Answer> b = cache.GetOrCompute("b/", 1, compute);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ((*b)->eval_set(), "4") << "b was evicted and is computed again";
}

}  // namespace
}  // namespace parity::server
