// LeaseLongPolls without a database: a parked LeaseRun goes back to the lease queue when the
// work signal moves on (including a move during its last try) or when its retry time comes;
// the workers a gang placement names are retried at once (and only they); a cancelled one is
// answered empty; stopping answers every parked call. Time is a FakeClock:
// a retry time is reached by Advance(), never by sleeping.
#include "server/scheduling/lease_long_polls.h"

#include <algorithm>
#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "server/scheduling/clock.h"

namespace parity::server {
namespace {

// What happened to the parked calls: retried (handed back) or answered, by worker id.
class Outcomes {
 public:
  void Retried(std::unique_ptr<PendingLease> lease) {
    absl::MutexLock lock(&mu_);
    retried_.push_back(lease->request.worker_id);
    kept_.push_back(std::move(lease));  // a retry owns the call; the test just keeps it
  }
  void Answered(const std::string& worker, bool has_lease) {
    absl::MutexLock lock(&mu_);
    answered_.push_back(worker);
    if (has_lease) ++answered_with_lease_;
  }
  // Waits (at most `timeout`, so a broken build fails rather than hangs) for `worker` to show up in
  // the retried (or answered) list.
  bool WaitRetried(const std::string& worker, absl::Duration timeout) {
    return WaitFor(retried_, worker, timeout);
  }
  bool WaitAnswered(const std::string& worker, absl::Duration timeout) {
    return WaitFor(answered_, worker, timeout);
  }
  std::vector<std::string> retried() {
    absl::MutexLock lock(&mu_);
    return retried_;
  }
  std::vector<std::string> answered() {
    absl::MutexLock lock(&mu_);
    return answered_;
  }
  int answered_with_lease() {
    absl::MutexLock lock(&mu_);
    return answered_with_lease_;
  }

 private:
  bool WaitFor(const std::vector<std::string>& list, const std::string& worker,
               absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    auto present = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return std::find(list.begin(), list.end(), worker) != list.end();
    };
    return mu_.AwaitWithTimeout(absl::Condition(&present), timeout);
  }

  absl::Mutex mu_;
  std::vector<std::string> retried_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> answered_ ABSL_GUARDED_BY(mu_);
  int answered_with_lease_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::unique_ptr<PendingLease>> kept_ ABSL_GUARDED_BY(mu_);
};

class LeaseLongPollsTest : public ::testing::Test {
 protected:
  std::unique_ptr<PendingLease> Call(
      const std::string& worker, std::function<bool()> cancelled = [] { return false; }) {
    auto lease = std::make_unique<PendingLease>();
    lease->request.worker_id = worker;
    lease->start = clock_.Now();
    lease->deadline = absl::InfiniteFuture();
    lease->cancelled = std::move(cancelled);
    lease->done = [this, worker](absl::StatusOr<v1::LeaseRunResponse> response) {
      outcomes_.Answered(worker, response.ok() && response->has_lease());
    };
    return lease;
  }

  FakeClock clock_;
  WorkSignal signal_;
  Outcomes outcomes_;
  LeaseLongPolls polls_{signal_, clock_, [this](std::unique_ptr<PendingLease> lease) {
                          outcomes_.Retried(std::move(lease));
                        }};
};

TEST_F(LeaseLongPollsTest, ANotifyWakesAParkedCallBeforeItsRetryTime) {
  const absl::Time retry_at = clock_.Now() + absl::Hours(1);
  polls_.Park(Call("a"), signal_.generation(), retry_at);
  clock_.AwaitSleeperUntil(retry_at);
  EXPECT_TRUE(outcomes_.retried().empty()) << "expected the call to wait for work";
  signal_.Notify();
  EXPECT_TRUE(outcomes_.WaitRetried("a", absl::Seconds(10)))
      << "expected the wake-up to send the call back to the lease queue";
}

TEST_F(LeaseLongPollsTest, AParkedCallIsRetriedAtItsRetryTimeWithoutANotify) {
  const absl::Time retry_at = clock_.Now() + absl::Milliseconds(200);
  polls_.Park(Call("a"), signal_.generation(), retry_at);
  clock_.AwaitSleeperUntil(retry_at);
  clock_.Advance(absl::Milliseconds(199));
  EXPECT_TRUE(outcomes_.retried().empty()) << "expected no retry before its time";
  clock_.Advance(absl::Milliseconds(1));
  EXPECT_TRUE(outcomes_.WaitRetried("a", absl::Seconds(10)))
      << "expected the idle re-check to retry the call at its retry time";
}

TEST_F(LeaseLongPollsTest, EachParkedCallIsRetriedAtItsOwnTimeWhateverTheOrderParked) {
  const absl::Time start = clock_.Now();
  polls_.Park(Call("late"), signal_.generation(), start + absl::Milliseconds(400));
  polls_.Park(Call("soon"), signal_.generation(), start + absl::Milliseconds(100));
  polls_.Park(Call("later"), signal_.generation(), start + absl::Seconds(30));
  clock_.AwaitSleeperUntil(start + absl::Milliseconds(100));  // the call parked second is due first
  clock_.Advance(absl::Milliseconds(100));
  ASSERT_TRUE(outcomes_.WaitRetried("soon", absl::Seconds(10)))
      << "expected the call due first to be retried at its time";
  clock_.AwaitSleeperUntil(start + absl::Milliseconds(400));
  EXPECT_EQ(outcomes_.retried(), std::vector<std::string>{"soon"})
      << "expected the calls due later to still be waiting";
  clock_.Advance(absl::Milliseconds(299));
  EXPECT_EQ(outcomes_.retried(), std::vector<std::string>{"soon"})
      << "expected no retry of the call due at 400 ms before its time";
  clock_.Advance(absl::Milliseconds(1));
  ASSERT_TRUE(outcomes_.WaitRetried("late", absl::Seconds(10)));
  clock_.AwaitSleeperUntil(start + absl::Seconds(30));
  EXPECT_EQ(outcomes_.retried(), (std::vector<std::string>{"soon", "late"}))
      << "expected the call due in 30 s to still be waiting";
}

TEST_F(LeaseLongPollsTest, WakingWorkersRetriesTheirCallsOnlyAndOneThatParksLater) {
  polls_.Park(Call("placed"), signal_.generation(), clock_.Now() + absl::Hours(1));
  polls_.Park(Call("bystander"), signal_.generation(), clock_.Now() + absl::Hours(1));
  polls_.WakeWorkers({"placed", "mid-try"});  // mid-try: no call of it parked yet
  EXPECT_TRUE(outcomes_.WaitRetried("placed", absl::Seconds(10)))
      << "a gang placement's worker must collect its slots at once";
  polls_.Park(Call("mid-try"), signal_.generation(), clock_.Now() + absl::Hours(1));
  EXPECT_TRUE(outcomes_.WaitRetried("mid-try", absl::Seconds(10)))
      << "a woken worker's call that parks after the wake-up is due at once";
  polls_.Park(Call("mid-try"), signal_.generation(), clock_.Now() + absl::Hours(1));
  absl::SleepFor(absl::Milliseconds(50));
  std::vector<std::string> retried = outcomes_.retried();
  EXPECT_EQ(std::count(retried.begin(), retried.end(), "bystander"), 0)
      << "a placement wakes the workers it placed, not every parked call";
  EXPECT_EQ(std::count(retried.begin(), retried.end(), "mid-try"), 1) << "woken once";
}

TEST_F(LeaseLongPollsTest, AWakeUpDuringTheLastTryIsNotLost) {
  const uint64_t tried_at = signal_.generation();
  signal_.Notify();  // work appeared while the try was in the database
  polls_.Park(Call("a"), tried_at, clock_.Now() + absl::Hours(1));
  EXPECT_TRUE(outcomes_.WaitRetried("a", absl::Seconds(10)))
      << "expected a call that missed a wake-up during its try to be retried at once";
}

TEST_F(LeaseLongPollsTest, ACancelledCallIsAnsweredEmptyAtTheNextWakeUp) {
  std::atomic<bool> gone{false};
  polls_.Park(Call("a", [&] { return gone.load(); }), signal_.generation(),
              clock_.Now() + absl::Hours(1));
  polls_.Park(Call("b"), signal_.generation(), clock_.Now() + absl::Hours(1));
  gone = true;
  signal_.Notify();
  ASSERT_TRUE(outcomes_.WaitAnswered("a", absl::Seconds(10)));
  ASSERT_TRUE(outcomes_.WaitRetried("b", absl::Seconds(10)));
  EXPECT_EQ(outcomes_.retried(), std::vector<std::string>{"b"})
      << "expected only the call still wanted to be retried";
  EXPECT_EQ(outcomes_.answered_with_lease(), 0);
}

TEST_F(LeaseLongPollsTest, StopAnswersEveryParkedCallEmptyAndLaterCallsAtOnce) {
  for (const char* worker : {"a", "b", "c"}) {
    polls_.Park(Call(worker), signal_.generation(), clock_.Now() + absl::Hours(1));
  }
  polls_.Stop();
  EXPECT_EQ(outcomes_.answered().size(), 3u) << "expected Stop to answer all three parked calls";
  polls_.Park(Call("late"), signal_.generation(), clock_.Now() + absl::Hours(1));
  EXPECT_EQ(outcomes_.answered().size(), 4u) << "expected a call parked after Stop answered";
  EXPECT_TRUE(outcomes_.retried().empty());
  EXPECT_EQ(outcomes_.answered_with_lease(), 0);
}

}  // namespace
}  // namespace parity::server
