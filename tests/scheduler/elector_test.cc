// The Elector (server/leadership/elector.h) over both stores, in real time (TTL 900 ms): two
// candidates elect one; a leader cut off from the store steps down at its own deadline, before
// the other takes over within about one TTL; a resigning leader is replaced at once; a deposed
// leader's fenced upkeep write is refused; electors started and stopped at random never lead two
// at a time and never reuse a term.
#include "server/leadership/elector.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "server/store/memory/memory_leader_leases.h"
#include "server/store/memory/memory_run_store.h"
#include "server/store/postgres/pg_listener.h"
#include "server/store/postgres/postgres_leader_leases.h"
#include "server/store/postgres/postgres_run_store.h"
#include "tests/support/postgres_environment.h"

namespace parity::server::testing {
namespace {

constexpr absl::Duration kTtl = absl::Milliseconds(900);

// Wakes every registered elector, as a resignation does.
class Wakers {
 public:
  void Add(Elector* elector) {
    absl::MutexLock lock(&mu_);
    electors_.insert(elector);
  }
  void Remove(Elector* elector) {
    absl::MutexLock lock(&mu_);
    electors_.erase(elector);
  }
  void WakeAll() {
    absl::MutexLock lock(&mu_);
    for (Elector* elector : electors_) elector->Wake();
  }

 private:
  absl::Mutex mu_;
  std::set<Elector*> electors_ ABSL_GUARDED_BY(mu_);
};

class MemoryElection {
 public:
  void SetUp() {
    store_.SetLeaderLeases(&leases_);
    leases_.OnResign([this](const std::string&) { wakers_.WakeAll(); });
  }
  LeaderLeases& leases() { return leases_; }
  RunQueue& queue() { return store_; }
  Wakers& wakers() { return wakers_; }

 private:
  Wakers wakers_;
  MemoryLeaderLeases leases_;
  MemoryRunStore store_;
};

class PostgresElection {
 public:
  void SetUp() {
    PARITY_REQUIRE_POSTGRES();
    const std::string url = parity::testing::PostgresEnvironment::FreshDatabase();
    ASSERT_FALSE(url.empty());
    leases_ = std::make_unique<PostgresLeaderLeases>(PostgresLeaderLeasesOptions{url});
    store_ = std::make_unique<PostgresRunStore>(PostgresRunStoreOptions{url, 2});
    listener_ = std::make_unique<PgListener>(
        url, [this] { wakers_.WakeAll(); }, kLeadershipChannel);
    for (int i = 0; i < 200 && !listener_->listening(); ++i) absl::SleepFor(absl::Milliseconds(10));
    ASSERT_TRUE(listener_->listening());
  }
  LeaderLeases& leases() { return *leases_; }
  RunQueue& queue() { return *store_; }
  Wakers& wakers() { return wakers_; }

 private:
  Wakers wakers_;
  std::unique_ptr<PostgresLeaderLeases> leases_;
  std::unique_ptr<PostgresRunStore> store_;
  std::unique_ptr<PgListener> listener_;
};

// LeaderLeases that can be cut off: every call then fails UNAVAILABLE, as for a replica whose
// database went away (or that died: its renewals never arrive).
class CuttableLeases final : public LeaderLeases {
 public:
  explicit CuttableLeases(LeaderLeases& inner) : inner_(inner) {}
  void Cut() { cut_ = true; }
  absl::StatusOr<LeaderLease> AcquireOrRenew(const std::string& name, const std::string& id,
                                             absl::Duration ttl) override {
    if (cut_) return absl::UnavailableError("cut off");
    return inner_.AcquireOrRenew(name, id, ttl);
  }
  absl::StatusOr<bool> Resign(const std::string& name, const std::string& id,
                              int64_t epoch) override {
    if (cut_) return absl::UnavailableError("cut off");
    return inner_.Resign(name, id, epoch);
  }
  absl::StatusOr<LeaderLease> Current(const std::string& name) override {
    return inner_.Current(name);
  }

 private:
  LeaderLeases& inner_;
  std::atomic<bool> cut_{false};
};

// Records when (steady clock) each term was gained and lost.
class Recorder final : public LeadershipObserver {
 public:
  using Time = std::chrono::steady_clock::time_point;
  void OnLeadershipGained(const LeaderFence& fence) override {
    absl::MutexLock lock(&mu_);
    gained_[fence.epoch] = std::chrono::steady_clock::now();
  }
  void OnLeadershipLost(const LeaderFence& fence, absl::string_view) override {
    absl::MutexLock lock(&mu_);
    lost_[fence.epoch] = std::chrono::steady_clock::now();
  }
  std::optional<Time> Gained(int64_t epoch) {
    absl::MutexLock lock(&mu_);
    auto it = gained_.find(epoch);
    return it == gained_.end() ? std::nullopt : std::optional<Time>(it->second);
  }
  std::optional<Time> Lost(int64_t epoch) {
    absl::MutexLock lock(&mu_);
    auto it = lost_.find(epoch);
    return it == lost_.end() ? std::nullopt : std::optional<Time>(it->second);
  }
  std::vector<int64_t> Terms() {
    absl::MutexLock lock(&mu_);
    std::vector<int64_t> terms;
    for (const auto& [epoch, at] : gained_) terms.push_back(epoch);
    return terms;
  }

 private:
  absl::Mutex mu_;
  std::map<int64_t, Time> gained_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, Time> lost_ ABSL_GUARDED_BY(mu_);
};

template <typename Election>
class ElectorTest : public ::testing::Test {
 protected:
  void SetUp() override { election_.SetUp(); }
  void TearDown() override {
    for (auto& elector : electors_) {
      election_.wakers().Remove(elector.get());
      elector->Stop();
    }
  }

  Elector& NewElector(const std::string& id, LeaderLeases* leases = nullptr,
                      LeadershipObserver* observer = nullptr) {
    electors_.push_back(std::make_unique<Elector>(
        leases != nullptr ? *leases : election_.leases(),
        ElectorOptions{.name = "upkeep", .leader_id = id, .ttl = kTtl, .margin = {}}, observer));
    election_.wakers().Add(electors_.back().get());
    return *electors_.back();
  }

  // Waits up to `limit` for `predicate`; how long it took, or nullopt.
  template <typename Predicate>
  static std::optional<absl::Duration> WaitFor(Predicate predicate, absl::Duration limit) {
    const absl::Time start = absl::Now();
    while (absl::Now() - start < limit) {
      if (predicate()) return absl::Now() - start;
      absl::SleepFor(absl::Milliseconds(2));
    }
    return std::nullopt;
  }

  // Outlive the electors that use them (TearDown stops those first).
  CuttableLeases& NewCuttable() {
    cuttables_.push_back(std::make_unique<CuttableLeases>(election_.leases()));
    return *cuttables_.back();
  }
  Recorder& NewRecorder() {
    recorders_.push_back(std::make_unique<Recorder>());
    return *recorders_.back();
  }

  Election election_;
  std::vector<std::unique_ptr<CuttableLeases>> cuttables_;
  std::vector<std::unique_ptr<Recorder>> recorders_;
  std::vector<std::unique_ptr<Elector>> electors_;
};

using Elections = ::testing::Types<MemoryElection, PostgresElection>;
class ElectionNames {
 public:
  template <typename T>
  static std::string GetName(int) {
    return std::is_same_v<T, MemoryElection> ? "Memory" : "Postgres";
  }
};
TYPED_TEST_SUITE(ElectorTest, Elections, ElectionNames);

TYPED_TEST(ElectorTest, TwoCandidatesElectOne) {
  Elector& a = this->NewElector("replica-a");
  Elector& b = this->NewElector("replica-b");
  a.Start();
  b.Start();
  EXPECT_TRUE(a.is_leader()) << "the first candidate leads after its first attempt";
  EXPECT_FALSE(b.is_leader());
  // Several renewals later nothing has changed.
  for (int i = 0; i < 30; ++i) {
    absl::SleepFor(kTtl / 10);
    ASSERT_TRUE(a.is_leader()) << "after " << i * 90 << " ms";
    ASSERT_FALSE(b.is_leader());
  }
  EXPECT_EQ(a.fence()->epoch, 1);
}

TYPED_TEST(ElectorTest, CutOffLeaderStepsDownBeforeTheOtherTakesOverWithinItsTtl) {
  CuttableLeases& cuttable = this->NewCuttable();
  Recorder& a_log = this->NewRecorder();
  Recorder& b_log = this->NewRecorder();
  Elector& a = this->NewElector("replica-a", &cuttable, &a_log);
  a.Start();
  ASSERT_TRUE(a.is_leader());
  Elector& b = this->NewElector("replica-b", nullptr, &b_log);
  b.Start();
  const std::optional<LeaderFence> a_term = a.fence();
  ASSERT_TRUE(a_term.has_value());
  absl::SleepFor(kTtl / 2);  // a has renewed at least once
  const auto cut_at = std::chrono::steady_clock::now();
  cuttable.Cut();
  const std::optional<absl::Duration> takeover =
      this->WaitFor([&] { return b.is_leader(); }, 3 * kTtl);
  ASSERT_TRUE(takeover.has_value()) << "no takeover within 3 TTLs";
  std::printf("takeover after the leader was cut off: %lld ms (TTL %lld ms)\n",
              static_cast<long long>(absl::ToInt64Milliseconds(*takeover)),
              static_cast<long long>(absl::ToInt64Milliseconds(kTtl)));
  // The lease was last renewed at most ttl/3 before the cut; a candidate retries when it runs out.
  EXPECT_LE(*takeover, kTtl + absl::Milliseconds(300));
  EXPECT_FALSE(a.is_leader());
  const LeaderFence b_term = *b.fence();
  EXPECT_GT(b_term.epoch, a_term->epoch);
  // a gave up (by its own clock) before b gained.
  ASSERT_TRUE(this->WaitFor([&] { return a_log.Lost(a_term->epoch).has_value(); }, kTtl));
  // The observer hears of a change just after is_leader() says so (Elector::Report runs outside
  // its lock): wait for it rather than race it.
  ASSERT_TRUE(this->WaitFor([&] { return b_log.Gained(b_term.epoch).has_value(); }, kTtl));
  EXPECT_LE(*a_log.Lost(a_term->epoch), *b_log.Gained(b_term.epoch));
  EXPECT_LT(*a_log.Lost(a_term->epoch) - cut_at, absl::ToChronoMilliseconds(kTtl));
}

TYPED_TEST(ElectorTest, StoppedLeaderResignsAndIsReplacedAtOnce) {
  Elector& a = this->NewElector("replica-a");
  Elector& b = this->NewElector("replica-b");
  a.Start();
  b.Start();
  ASSERT_TRUE(a.is_leader());
  absl::SleepFor(absl::Milliseconds(50));  // b has made its attempt and sleeps ~ttl/3
  a.Stop();
  const std::optional<absl::Duration> takeover =
      this->WaitFor([&] { return b.is_leader(); }, 2 * kTtl);
  ASSERT_TRUE(takeover.has_value());
  std::printf("takeover after a resignation: %lld ms\n",
              static_cast<long long>(absl::ToInt64Milliseconds(*takeover)));
  EXPECT_LT(*takeover, kTtl / 4) << "the resignation woke b; it did not wait for its next try";
  EXPECT_EQ(b.fence()->epoch, 2);
}

TYPED_TEST(ElectorTest, DeposedLeadersFencedWriteIsRefused) {
  CuttableLeases& cuttable = this->NewCuttable();
  Elector& a = this->NewElector("replica-a", &cuttable);
  a.Start();
  const std::optional<LeaderFence> old_term = a.fence();
  ASSERT_TRUE(old_term.has_value());
  EXPECT_TRUE(this->election_.queue().ReapExpiredLeasesFenced(10, *old_term).ok());
  Elector& b = this->NewElector("replica-b");
  b.Start();
  cuttable.Cut();  // a's renewals stop arriving; it will not hear that it was deposed
  ASSERT_TRUE(this->WaitFor([&] { return b.is_leader(); }, 3 * kTtl));
  absl::StatusOr<ReapResult> refused =
      this->election_.queue().ReapExpiredLeasesFenced(10, *old_term);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition) << refused.status();
  EXPECT_TRUE(this->election_.queue().ReapExpiredLeasesFenced(10, *b.fence()).ok());
}

TYPED_TEST(ElectorTest, StartStopStressNeverTwoLeadersNorARepeatedTerm) {
  constexpr int kSlots = 6;
  std::vector<std::unique_ptr<Elector>> slots(kSlots);
  absl::Mutex mu;  // guards slots against the sampler
  Recorder& log = this->NewRecorder();
  std::atomic<bool> done{false};
  std::atomic<int> samples{0}, both{0};
  std::thread sampler([&] {
    while (!done) {
      int leaders = 0;
      {
        absl::MutexLock lock(&mu);
        for (const auto& elector : slots) leaders += elector != nullptr && elector->is_leader();
      }
      if (leaders > 1) ++both;
      ++samples;
      absl::SleepFor(absl::Milliseconds(1));
    }
  });
  std::mt19937 random(7);
  int generation = 0;
  const absl::Time end = absl::Now() + absl::Seconds(4);
  while (absl::Now() < end) {
    const int slot = static_cast<int>(random() % kSlots);
    std::unique_ptr<Elector> old;
    {
      absl::MutexLock lock(&mu);
      old = std::move(slots[slot]);
    }
    if (old != nullptr) {
      this->election_.wakers().Remove(old.get());
      old->Stop();  // resigns when it led
    } else {
      auto elector = std::make_unique<Elector>(
          this->election_.leases(),
          ElectorOptions{.name = "upkeep",
                         .leader_id = "replica-" + std::to_string(++generation),
                         .ttl = kTtl,
                         .margin = {}},
          &log);
      this->election_.wakers().Add(elector.get());
      elector->Start();
      absl::MutexLock lock(&mu);
      slots[slot] = std::move(elector);
    }
    absl::SleepFor(absl::Milliseconds(random() % 120));
  }
  // Everyone but one goes; the survivor leads within a TTL and with a term above all before.
  {
    absl::MutexLock lock(&mu);
    for (auto& elector : slots) {
      if (elector != nullptr) this->election_.wakers().Remove(elector.get());
    }
  }
  for (auto& elector : slots) {
    if (elector != nullptr) elector->Stop();
  }
  done = true;
  sampler.join();
  EXPECT_EQ(both.load(), 0) << "of " << samples.load() << " samples";
  const std::vector<int64_t> terms = log.Terms();  // a map's keys: each term gained once
  ASSERT_FALSE(terms.empty());
  Elector& last = this->NewElector("replica-last", nullptr, &log);
  last.Start();
  ASSERT_TRUE(this->WaitFor([&] { return last.is_leader(); }, 2 * kTtl));
  EXPECT_GT(last.fence()->epoch, terms.back());
  std::printf("%d electors, %zu terms, %d samples\n", generation, terms.size(), samples.load());
}

}  // namespace
}  // namespace parity::server::testing
