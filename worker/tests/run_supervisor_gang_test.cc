// RunSupervisor hosting a gang's ranks (gang_ranks.h) against FakeSchedulerClient and the fake
// engine: rank 0's worker posts "HOST:PORT#TOKEN" and starts its other local ranks only once
// released, with the token in their environment and never in argv; a refused heartbeat kills
// every local rank at once; a follower waits for the release, reports no metric or success, and
// reports its rank's failure.
#include <filesystem>
#include <fstream>
#include <sstream>

#include "worker/tests/run_supervisor_fixture.h"

namespace parity::worker {
namespace {

constexpr char kToken[] = "0123456789abcdef0123456789abcdef";  // the fake engine's

class RunSupervisorGangTest : public RunSupervisorTest {
 protected:
  parity::v1::LeaseRunResponse GangLease(uint64_t steps, std::vector<uint32_t> ranks) {
    parity::v1::LeaseRunResponse l = Lease(steps);
    l.set_lease_secret(ranks.front() == 0 ? "rank0-secret" : "follower-secret");
    parity::v1::GangLease* g = l.mutable_gang();
    g->set_world_size(2);
    g->set_gang_epoch(l.lease().lease_epoch());
    for (uint32_t r : ranks) g->add_ranks()->set_rank(r);
    return l;
  }
  RunOutcome RunGang(parity::v1::LeaseRunResponse lease, uint32_t threads) {
    RunSupervisor sup(fake_, options_, std::move(lease), DeviceGrant{.threads = threads});
    sup.Start();
    sup.Join();
    return sup.outcome();
  }
  // parity_fake_engine processes whose command line names this test's directory.
  int EnginesOfThisTest() const {
    int n = 0;
    for (const auto& e : std::filesystem::directory_iterator("/proc")) {
      std::ifstream in(e.path() / "cmdline", std::ios::binary);
      std::string cmd((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (cmd.find("parity_fake_engine") != std::string::npos &&
          cmd.find(root_.string()) != std::string::npos) {
        ++n;
      }
    }
    return n;
  }
  static std::string Read(const std::filesystem::path& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
};

TEST_F(RunSupervisorGangTest, RankZerosWorkerPostsThenStartsItsOtherRankWithTheTokenInItsEnv) {
  options_.rendezvous_host = "127.0.0.1";
  const std::string dump = (root_ / "env").string();
  options_.engine_env.emplace_back("FAKE_ENV_DUMP_FILE", dump);
  fake_.hold_check_ins = 2;  // released at the third check-in
  EXPECT_EQ(RunGang(GangLease(400, {0, 1}), 2), RunOutcome::kSucceeded);
  absl::MutexLock l(&fake_.mu);
  ASSERT_EQ(fake_.posts.size(), 1u);
  EXPECT_EQ(fake_.posts[0].address(), absl::StrCat("127.0.0.1:1#", kToken));
  EXPECT_EQ(fake_.posts[0].lease_epoch(), 7);
  EXPECT_EQ(fake_.posts[0].lease_secret(), "rank0-secret");
  ASSERT_GE(fake_.check_ins.size(), 3u);
  for (const auto& c : fake_.check_ins) EXPECT_EQ(c.rank(), 1u);
  ASSERT_EQ(fake_.completes.size(), 1u);
  EXPECT_TRUE(fake_.completes[0].has_success());
  EXPECT_EQ(fake_.points.size(), 400u);  // rank 0's lines only
  // Rank 1 got the token in its environment and one thread of the two.
  const std::string env1 = Read(dump + ".rank1");
  EXPECT_NE(env1.find(absl::StrCat("PARITY_RENDEZVOUS_TOKEN=", kToken)), std::string::npos) << env1;
  EXPECT_NE(env1.find("OMP_NUM_THREADS=1"), std::string::npos);
  EXPECT_EQ(Read(dump).find("PARITY_RENDEZVOUS_TOKEN"), std::string::npos)
      << "rank 0 draws its own";
  // Never on a command line (world-readable) nor in the worker's record of it.
  const std::string log = Read(root_ / "work" / "run-1" / "engine.log");
  EXPECT_EQ(log.find(kToken), std::string::npos);
}

TEST_F(RunSupervisorGangTest, ARefusedHeartbeatKillsEveryLocalRankAtOnce) {
  options_.rendezvous_host = "127.0.0.1";
  const std::string dump = (root_ / "env").string();
  options_.engine_env.emplace_back("FAKE_ENV_DUMP_FILE", dump);
  // Mid-run, once both ranks train (the release comes within about 2 s): the epoch moved.
  fake_.lose_lease_after_heartbeats = 40;
  const absl::Time t0 = absl::Now();
  EXPECT_EQ(RunGang(GangLease(100000, {0, 1}), 2), RunOutcome::kLeaseLost);
  EXPECT_TRUE(std::filesystem::exists(dump + ".rank1")) << "rank 1 never started";
  EXPECT_EQ(EnginesOfThisTest(), 0) << "a rank outlived its refused slot";
  absl::MutexLock l(&fake_.mu);
  ASSERT_LT(fake_.lost_at, absl::InfiniteFuture());
  // Both ranks were killed and reaped within two heartbeat intervals (100 ms) of the refusal.
  EXPECT_LT(absl::Now() - fake_.lost_at, absl::Milliseconds(200) + absl::Milliseconds(300))
      << absl::Now() - fake_.lost_at;
  EXPECT_LT(absl::Now() - t0, absl::Seconds(20));
  EXPECT_TRUE(fake_.completes.empty()) << "a lost slot reports nothing";
}

TEST_F(RunSupervisorGangTest, AFollowerWaitsForTheReleaseAndReportsNoMetricOrSuccess) {
  fake_.relay = absl::StrCat("127.0.0.1:4711#", kToken);
  fake_.hold_check_ins = 3;
  EXPECT_EQ(RunGang(GangLease(20, {1}), 1), RunOutcome::kSucceeded);
  absl::MutexLock l(&fake_.mu);
  EXPECT_GE(fake_.check_ins.size(), 4u);
  EXPECT_TRUE(fake_.posts.empty());
  EXPECT_FALSE(fake_.heartbeats.empty()) << "the slot heartbeats from the grant on";
  for (const auto& h : fake_.heartbeats) {
    EXPECT_EQ(h.lease_secret(), "follower-secret");
    EXPECT_FALSE(h.has_checkpoint());
  }
  EXPECT_EQ(fake_.metric_calls, 0);
  EXPECT_TRUE(fake_.completes.empty()) << "rank 0's worker reports the success";
  const std::string log = Read(root_ / "work" / "run-1" / "engine.log");
  EXPECT_EQ(log.find(kToken), std::string::npos);
}

TEST_F(RunSupervisorGangTest, AFollowersFailedRankIsReportedSoTheGangRestarts) {
  fake_.relay = absl::StrCat("127.0.0.1:4711#", kToken);
  options_.engine_env.emplace_back("FAKE_EXIT_CODE", "7");  // the gang broke
  EXPECT_EQ(RunGang(GangLease(20, {1}), 1), RunOutcome::kFailed);
  absl::MutexLock l(&fake_.mu);
  ASSERT_EQ(fake_.completes.size(), 1u);
  EXPECT_EQ(fake_.completes[0].failure().failure_class(), parity::v1::FAILURE_CLASS_INFRASTRUCTURE);
  EXPECT_EQ(fake_.completes[0].lease_secret(), "follower-secret");
}

TEST_F(RunSupervisorGangTest, AFollowerIsStoppedWhenItsCheckInIsRefused) {
  fake_.lost = true;  // the gang was failed before this worker checked in
  EXPECT_EQ(RunGang(GangLease(20, {1}), 1), RunOutcome::kLeaseLost);
  absl::MutexLock l(&fake_.mu);
  EXPECT_TRUE(fake_.completes.empty());
}

}  // namespace
}  // namespace parity::worker
