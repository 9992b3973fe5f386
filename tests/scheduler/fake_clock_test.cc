// FakeClock (server/scheduling/clock.h): waiters wake when Advance() reaches their deadline, and a
// waiter may sleep on a mutex local to its call, as a watch stream's poll does: the call must not
// return while an Advance still holds that mutex's address.
#include <atomic>
#include <cstring>
#include <new>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "server/scheduling/clock.h"

namespace parity::server::testing {
namespace {

constexpr bool kNever = false;

TEST(FakeClockTest, AWaiterWakesWhenTimeReachesItsDeadlineAndNotBefore) {
  FakeClock clock;
  const absl::Time deadline = clock.Now() + absl::Seconds(10);
  bool woke = false;
  std::thread sleeper([&] {
    absl::Mutex mu;
    absl::MutexLock lock(&mu);
    EXPECT_FALSE(clock.AwaitWithDeadline(mu, absl::Condition(&kNever), deadline));
    EXPECT_GE(clock.Now(), deadline);
    woke = true;
  });
  clock.AwaitSleeperUntil(deadline);
  clock.Advance(absl::Seconds(9));
  clock.AwaitSleeperUntil(deadline);  // still asleep
  clock.Advance(absl::Seconds(1));
  sleeper.join();
  EXPECT_TRUE(woke);
}

// A waiter may see the new time before Advance has locked its mutex, return, and its caller
// destroy the mutex: Advance must not lock it after that (with the old clock this hung or crashed
// within a few thousand waits). The mutex lives in a buffer scribbled over once the call returns,
// and time moves all the while.
TEST(FakeClockTest, AWaiterOnALocalMutexMayReturnWhileTimeAdvances) {
  FakeClock clock;
  std::atomic<bool> done{false};
  std::thread sleeper([&] {
    for (int i = 0; i < 5000; ++i) {
      alignas(absl::Mutex) unsigned char buffer[sizeof(absl::Mutex)];
      absl::Mutex* mu = new (buffer) absl::Mutex;
      mu->Lock();
      clock.AwaitWithDeadline(*mu, absl::Condition(&kNever), clock.Now() + absl::Nanoseconds(1));
      mu->Unlock();
      mu->~Mutex();
      std::memset(buffer, 0xff, sizeof(buffer));
      absl::SleepFor(absl::Microseconds(20));  // the scribble stays a while
    }
    done = true;
  });
  while (!done) clock.Advance(absl::Nanoseconds(1));
  sleeper.join();
}

}  // namespace
}  // namespace parity::server::testing
