// ReplyCache (server/api/reply_cache.h): a JSON API reply kept for its TTL and given to every
// caller of the same document; failures never kept; concurrent callers share one computation;
// bounded by entries and bytes.
#include "server/api/reply_cache.h"

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace parity::server {
namespace {

struct Reply {
  int status = 200;
  std::string body;
};

class ReplyCacheTest : public ::testing::Test {
 protected:
  ReplyCache<Reply> Cache(ReplyCacheOptions options = {}) {
    return ReplyCache<Reply>(options, [this] { return now_; });
  }
  // A computation that says how many computations there have been.
  std::function<Reply()> Counting(int status = 200) {
    return [this, status] { return Reply{status, std::to_string(++computed_)}; };
  }

  absl::Time now_ = absl::UnixEpoch();
  int computed_ = 0;
};

TEST_F(ReplyCacheTest, AReplyIsGivenToEveryCallerUntilItsTtlEnds) {
  ReplyCache<Reply> cache = Cache({.ttl = absl::Seconds(1)});
  EXPECT_EQ(cache.GetOrCompute("a", Counting()).body, "1");
  now_ += absl::Milliseconds(999);
  EXPECT_EQ(cache.GetOrCompute("a", Counting()).body, "1") << "within the TTL: the kept reply";
  EXPECT_EQ(cache.GetOrCompute("b", Counting()).body, "2") << "another document is its own";
  now_ += absl::Milliseconds(1);
  EXPECT_EQ(cache.GetOrCompute("a", Counting()).body, "3") << "at the TTL: computed again";
}

TEST_F(ReplyCacheTest, FailuresAreNotKept) {
  ReplyCache<Reply> cache = Cache();
  EXPECT_EQ(cache.GetOrCompute("a", Counting(503)).status, 503);
  EXPECT_EQ(cache.GetOrCompute("a", Counting(503)).body, "2") << "the next caller tries again";
  EXPECT_EQ(cache.size(), 0u);
}

TEST_F(ReplyCacheTest, AZeroTtlKeepsNothing) {
  ReplyCache<Reply> cache = Cache({.ttl = absl::ZeroDuration()});
  cache.GetOrCompute("a", Counting());
  EXPECT_EQ(cache.GetOrCompute("a", Counting()).body, "2");
  EXPECT_EQ(cache.size(), 0u);
}

TEST_F(ReplyCacheTest, ConcurrentCallersOfOneDocumentShareOneComputation) {
  ReplyCache<Reply> cache = Cache();
  std::atomic<int> computed = 0;
  absl::Notification release;
  auto slow = [&] {
    const int n = ++computed;
    release.WaitForNotification();
    return Reply{200, std::to_string(n)};
  };
  std::atomic<int> first = 0;
  std::vector<std::thread> callers;
  for (int i = 0; i < 8; ++i) {
    callers.emplace_back([&] {
      if (cache.GetOrCompute("a", slow).body == "1") ++first;
    });
  }
  while (computed.load() == 0) std::this_thread::yield();
  absl::SleepFor(absl::Milliseconds(50));  // the others reach the wait
  release.Notify();
  for (std::thread& caller : callers) caller.join();
  EXPECT_EQ(computed.load(), 1) << "one computation for eight callers";
  EXPECT_EQ(first.load(), 8);
}

TEST_F(ReplyCacheTest, TheOldestGoFirstPastTheEntriesOrBytes) {
  ReplyCache<Reply> by_entries = Cache({.max_entries = 2});
  by_entries.GetOrCompute("a", Counting());  // 1
  by_entries.GetOrCompute("b", Counting());  // 2
  by_entries.GetOrCompute("c", Counting());  // 3: a goes
  EXPECT_EQ(by_entries.size(), 2u);
  EXPECT_EQ(by_entries.GetOrCompute("b", Counting()).body, "2");
  EXPECT_EQ(by_entries.GetOrCompute("a", Counting()).body, "4") << "a was evicted";

  ReplyCache<Reply> by_bytes = Cache({.max_bytes = 10});
  by_bytes.GetOrCompute("a", [] { return Reply{200, std::string(6, 'a')}; });
  by_bytes.GetOrCompute("b", [] { return Reply{200, std::string(6, 'b')}; });
  EXPECT_EQ(by_bytes.size(), 1u) << "12 bytes past a 10-byte bound: the older goes";
  by_bytes.GetOrCompute("c", [] { return Reply{200, std::string(11, 'c')}; });
  EXPECT_EQ(by_bytes.size(), 1u) << "a reply larger than the bound is not kept";
}

}  // namespace
}  // namespace parity::server
