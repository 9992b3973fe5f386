// The gang's watch (kernels/comm/gang_watch.h) over a real rendezvous store on loopback, around
// fake backends: one that an Interrupt wakes (NCCL's polling loop) and one that nothing wakes
// (Gloo's queued send after its peer died). A rank that leaves without finishing fails the
// others' collectives promptly, naming it; a rank that cannot be woken is declared wedged after
// the grace; a rank that finished alarms nobody.
#include "kernels/comm/gang_watch.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <future>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

#include "absl/time/clock.h"

namespace parity::kernels {
namespace {

const KvIdentity kGang{.run_id = "watch", .epoch = 2, .token = "00112233445566778899aabbccddeeff"};

// A backend whose all-reduce blocks while `block` is set: until released, or until interrupted
// when it `wakes`.
class FakeBackend final : public Communicator {
 public:
  FakeBackend(int rank, int size, bool wakes) : rank_(rank), size_(size), wakes_(wakes) {}
  int rank() const override { return rank_; }
  int world_size() const override { return size_; }
  std::string_view Name() const override { return "fake"; }
  absl::Status AllReduceSum(float*, int64_t) override {
    std::unique_lock<std::mutex> lock(mu_);
    entered_ = true;
    changed_.notify_all();
    changed_.wait(lock, [&] { return !block_ || released_ || (wakes_ && !why_.empty()); });
    if (!released_ && !why_.empty()) return absl::UnavailableError("fake: " + why_);
    return absl::OkStatus();
  }
  absl::Status AllReduceSumHost(double*, int64_t) override { return absl::OkStatus(); }
  absl::Status Broadcast(void*, size_t, int) override { return absl::OkStatus(); }
  absl::Status BroadcastHost(void*, size_t, int) override { return absl::OkStatus(); }
  absl::Status Barrier() override { return absl::OkStatus(); }
  void Interrupt(const std::string& why) override {
    std::lock_guard<std::mutex> lock(mu_);
    why_ = why;
    changed_.notify_all();
  }

  void Block() {
    std::lock_guard<std::mutex> lock(mu_);
    block_ = true;
  }
  void AwaitEntered() {
    std::unique_lock<std::mutex> lock(mu_);
    changed_.wait(lock, [&] { return entered_; });
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    released_ = true;
    changed_.notify_all();
  }
  std::string interrupted() {
    std::lock_guard<std::mutex> lock(mu_);
    return why_;
  }

 private:
  const int rank_, size_;
  const bool wakes_;
  std::mutex mu_;
  std::condition_variable changed_;
  bool block_ = false, released_ = false, entered_ = false;
  std::string why_;
};

struct Rank {
  FakeBackend* backend = nullptr;  // owned by comm
  std::unique_ptr<Communicator> comm;
};

// A gang of `size` watched fake backends; rank 0 hosts the store.
class GangWatchTest : public ::testing::Test {
 protected:
  void Form(int size, bool wakes, absl::Duration grace = absl::Seconds(5)) {
    KvLimits limits;
    limits.ranks = size;
    auto server = KvServer::Start("127.0.0.1", 0, kGang, limits);
    ASSERT_TRUE(server.ok()) << server.status();
    // Every rank watches before the mesh is up (and rank 0's store is sealed), as in a gang.
    std::vector<std::unique_ptr<GangWatch>> watches;
    for (int r = 0; r < size; ++r) {
      auto client = KvClient::Connect((*server)->address(), kGang, absl::Seconds(5));
      ASSERT_TRUE(client.ok()) << client.status();
      auto watch = GangWatch::Start(*std::move(client), r);
      ASSERT_TRUE(watch.ok()) << watch.status();
      watches.push_back(*std::move(watch));
    }
    for (int r = 0; r < size; ++r) {
      auto backend = std::make_unique<FakeBackend>(r, size, wakes);
      Rank rank{.backend = backend.get(), .comm = nullptr};
      rank.comm = WatchGang(
          std::move(backend), std::move(watches[r]), r == 0 ? *std::move(server) : nullptr,
          [this, r](const absl::Status& s) {
            std::lock_guard<std::mutex> lock(mu_);
            wedged_[r] = s;
          },
          grace);
      ranks_.push_back(std::move(rank));
    }
  }
  std::optional<absl::Status> Wedged(int r) {
    std::lock_guard<std::mutex> lock(mu_);
    const auto it = wedged_.find(r);
    if (it == wedged_.end()) return std::nullopt;
    return it->second;
  }
  // Starts rank r's all-reduce (blocking) on a thread and returns once it is inside.
  std::future<absl::Status>& BlockedAllReduce(int r) {
    ranks_[r].backend->Block();
    pending_.push_back(std::async(std::launch::async, [c = ranks_[r].comm.get()] {
      float x = 0;
      return c->AllReduceSum(&x, 1);
    }));
    ranks_[r].backend->AwaitEntered();
    return pending_.back();
  }
  // A failed expectation must not leave a collective blocked forever: release every backend
  // still there before the threads are joined.
  void TearDown() override {
    for (Rank& r : ranks_) {
      if (r.comm != nullptr) r.backend->Release();
    }
    pending_.clear();
  }

  std::vector<Rank> ranks_;
  std::list<std::future<absl::Status>> pending_;
  std::mutex mu_;
  std::map<int, absl::Status> wedged_;
};

double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

TEST_F(GangWatchTest, ARankLeavingWithoutFinishingFailsTheOthersCollectivesNamingIt) {
  Form(3, /*wakes=*/true);
  std::future<absl::Status>& blocked = BlockedAllReduce(0);
  const auto t0 = std::chrono::steady_clock::now();
  ranks_[1].comm.reset();  // rank 1's process is gone without MarkFinished
  ASSERT_EQ(blocked.wait_for(std::chrono::seconds(5)), std::future_status::ready)
      << "rank 0's collective is woken within seconds, not at the collective timeout";
  const absl::Status s = blocked.get();
  EXPECT_LT(SecondsSince(t0), 3);
  EXPECT_TRUE(absl::IsUnavailable(s)) << s;
  EXPECT_NE(s.message().find("rank 1 left the gang"), std::string::npos) << s;
  // Rank 2 was not in a collective: its next one fails at once, naming the rank too.
  absl::Status later;
  for (int i = 0; i < 100 && later.ok(); ++i) {
    later = ranks_[2].comm->Barrier();
    if (later.ok()) absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_TRUE(absl::IsUnavailable(later)) << later;
  EXPECT_NE(later.message().find("not started: the gang broke"), std::string::npos) << later;
  EXPECT_NE(later.message().find("rank 1 left the gang"), std::string::npos) << later;
  EXPECT_FALSE(Wedged(0).has_value()) << "a woken backend is not wedged";
}

TEST_F(GangWatchTest, ACollectiveThatCannotBeWokenIsDeclaredWedgedAfterTheGrace) {
  Form(2, /*wakes=*/false, absl::Milliseconds(300));
  std::future<absl::Status>& blocked = BlockedAllReduce(0);
  const auto t0 = std::chrono::steady_clock::now();
  ranks_[1].comm.reset();
  std::optional<absl::Status> wedged;
  while (!(wedged = Wedged(0)).has_value() && SecondsSince(t0) < 5) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  ASSERT_TRUE(wedged.has_value()) << "on_wedged is called when the grace has passed";
  EXPECT_GE(SecondsSince(t0), 0.3) << "not before the grace";
  EXPECT_TRUE(absl::IsUnavailable(*wedged)) << *wedged;
  EXPECT_NE(wedged->message().find("still blocked"), std::string::npos) << *wedged;
  EXPECT_NE(wedged->message().find("rank 1 left the gang"), std::string::npos) << *wedged;
  EXPECT_FALSE(ranks_[0].backend->interrupted().empty()) << "the backend was asked first";
  ranks_[0].backend->Release();  // what parity-train cannot do: it exits instead
  EXPECT_TRUE(blocked.get().ok());
}

TEST_F(GangWatchTest, ARankThatFinishedLeavesWithoutAlarmingTheOthers) {
  Form(3, /*wakes=*/true);
  ranks_[1].comm->MarkFinished();
  ranks_[1].comm.reset();
  absl::SleepFor(absl::Milliseconds(300));
  float x = 0;
  EXPECT_TRUE(ranks_[0].comm->AllReduceSum(&x, 1).ok());
  EXPECT_TRUE(ranks_[2].comm->Barrier().ok());
  EXPECT_TRUE(ranks_[0].backend->interrupted().empty());
  // Rank 0 finishes and closes the store: rank 2, still finishing, hears "finished".
  ranks_[0].comm->MarkFinished();
  ranks_[0].comm.reset();
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_TRUE(ranks_[2].comm->Barrier().ok());
  EXPECT_TRUE(ranks_[2].backend->interrupted().empty());
}

TEST_F(GangWatchTest, RankZeroLeavingBreaksTheGangForTheRest) {
  Form(2, /*wakes=*/true);
  std::future<absl::Status>& blocked = BlockedAllReduce(1);
  ranks_[0].comm.reset();  // rank 0 (and with it the store) gone without MarkFinished
  ASSERT_EQ(blocked.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  const absl::Status s = blocked.get();
  EXPECT_TRUE(absl::IsUnavailable(s)) << s;
  EXPECT_NE(s.message().find("rank 0 left the gang"), std::string::npos) << s;
}

}  // namespace
}  // namespace parity::kernels
