// Gangs (issue #27) with the real binaries: a throwaway PostgreSQL, the real parity-scheduler,
// two parity-worker processes of one CPU thread each and the real parity-train. A run asking
// `resources.ranks: 2` is placed on both workers, rank 0's worker posts the rendezvous
// ("HOST:PORT#TOKEN") and the other's ranks start once released; the gang's final validation BPC
// equals a one-process run of the same spec within the engine's stated tolerance (1e-6,
// kernels/README.md "Data parallelism"), and its curve has every logged step exactly once. Then
// kill -9 of the follower's rank mid-run: the whole gang restarts under a new epoch from rank 0's
// checkpoint and completes with no hole or duplicate in its curve and the same final BPC. And
// both ranks on one worker of two threads; a 4-rank gang on four workers; and kill -9 of rank 2
// of 4, the whole gang restarted the same way.
#include <signal.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/e2e/gang_fixture.h"

namespace parity::e2e {
namespace {

namespace fs = std::filesystem;

constexpr double kGangTolerance = 1e-6;  // kernels/README.md, "Tolerance"

// The gang tests that train: the shared stack (gang_fixture.h) with the checks they share.
class GangE2ETest : public GangStackTest {
 protected:
  // The gang's token is relayed, never logged: no log of the scheduler, the workers or the
  // engines holds a relayed "HOST:PORT#TOKEN" or a rendezvous line's "token".
  void ExpectNoTokenInLogs() {
    const std::regex relayed("#[0-9a-f]{32}");
    for (const fs::directory_entry& e : fs::recursive_directory_iterator(root_)) {
      if (!e.is_regular_file() || e.path().extension() != ".log") continue;
      std::ifstream in(e.path());
      const std::string text((std::istreambuf_iterator<char>(in)),
                             std::istreambuf_iterator<char>());
      EXPECT_FALSE(std::regex_search(text, relayed)) << e.path() << " holds a relayed token";
      EXPECT_EQ(text.find("\"token\""), std::string::npos) << e.path() << " holds a token";
    }
  }

  // kill -9 of `rank` of a `ranks`-rank gang mid-run; the gang must restart and match.
  void KillOneRankAndExpectTheGangRestarted(int ranks, int rank, int grad_accum);
};

TEST_F(GangE2ETest, TwoRankGangOnTwoWorkersMatchesOneProcess) {
  const v1::Run gang =
      WaitForEnd(stack_->Submit(GangSweepYaml("gang", 2, "1e9")), absl::Minutes(6));
  ASSERT_EQ(gang.state(), v1::RUN_STATE_SUCCEEDED) << gang.failure().message();
  // Both workers ran a rank: rank 0's engine.log on one, a follower's on the other.
  EXPECT_EQ(WorkersWithRank(gang.run_id(), 2), 2);
  ExpectWholeCurve(gang);
  ExpectNoTokenInLogs();
  const v1::Run single =
      WaitForEnd(stack_->Submit(GangSweepYaml("single", 1, "1e9")), absl::Minutes(6));
  ASSERT_EQ(single.state(), v1::RUN_STATE_SUCCEEDED) << single.failure().message();
  EXPECT_EQ(gang.summary().steps(), single.summary().steps());
  EXPECT_NEAR(gang.summary().final_val_bpc(), single.summary().final_val_bpc(), kGangTolerance);
  EXPECT_GE(gang.summary().steps(), 5u);
  std::printf("%llu steps: gang final validation BPC %.9f, one process %.9f (|diff| %.2e)\n",
              static_cast<unsigned long long>(gang.summary().steps()),
              gang.summary().final_val_bpc(), single.summary().final_val_bpc(),
              std::fabs(gang.summary().final_val_bpc() - single.summary().final_val_bpc()));
}

// `kill -9` of one rank of a `ranks`-rank gang past a recorded checkpoint: the whole gang is
// restarted from its checkpoint (attempt 2, a new epoch) and ends with every step once and the
// undisturbed gang's final BPC. About 300 steps (a few seconds a rank), a checkpoint every 10.
void GangE2ETest::KillOneRankAndExpectTheGangRestarted(int ranks, int rank, int grad_accum) {
  const v1::Run undisturbed = WaitForEnd(
      stack_->Submit(GangSweepYaml("calm", ranks, "3e10", grad_accum)), absl::Minutes(6));
  ASSERT_EQ(undisturbed.state(), v1::RUN_STATE_SUCCEEDED) << undisturbed.failure().message();
  const std::string sweep = stack_->Submit(GangSweepYaml("killed", ranks, "3e10", grad_accum));
  std::string run_id;
  ASSERT_TRUE(WaitUntil(
      [&] {
        for (const v1::Run& r : stack_->Runs(sweep)) {
          run_id = r.run_id();
          // Past a recorded checkpoint, so the restart resumes rather than starts over.
          if (r.state() == v1::RUN_STATE_RUNNING && r.has_checkpoint() &&
              r.checkpoint().step() >= 20) {
            return true;
          }
        }
        return false;
      },
      absl::Minutes(3)));
  const pid_t pid = RankPid(run_id, rank);
  ASSERT_GT(pid, 0) << "rank " << rank << " of " << run_id << " not found";
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  const v1::Run run = WaitForEnd(sweep, absl::Minutes(6));
  ASSERT_EQ(run.state(), v1::RUN_STATE_SUCCEEDED) << run.failure().message();
  EXPECT_GE(run.attempt(), 2u) << "the gang was not restarted";
  // Restarted under a new epoch (the scheduler's record of the gang's attempts).
  EXPECT_NE(One(absl::StrCat("SELECT count(*) FROM events WHERE run_id = '", run_id,
                             "' AND to_state = 'PENDING'")),
            "0");
  ExpectWholeCurve(run);
  EXPECT_EQ(run.summary().steps(), undisturbed.summary().steps());
  // A given world size is bit-identical run to run and across a resume (kernels/README.md).
  EXPECT_NEAR(run.summary().final_val_bpc(), undisturbed.summary().final_val_bpc(), kGangTolerance);
  std::printf(
      "killed rank %d of %d at step >= 20: %llu steps, attempt %u, final BPC %.9f "
      "(undisturbed %.9f)\n",
      rank, ranks, static_cast<unsigned long long>(run.summary().steps()), run.attempt(),
      run.summary().final_val_bpc(), undisturbed.summary().final_val_bpc());
}

TEST_F(GangE2ETest, KillOfOneRankRestartsTheWholeGangFromItsCheckpoint) {
  KillOneRankAndExpectTheGangRestarted(/*ranks=*/2, /*rank=*/1, /*grad_accum=*/2);
}

// Both ranks on one worker of two threads (the scheduler prefers fewer hosts): rank 0's worker
// posts, checks its own rank 1 in, starts it once released, and the gang equals one process.
class GangOneWorkerE2ETest : public GangE2ETest {
 protected:
  int Workers() const override { return 1; }
  int ThreadsPerWorker() const override { return 2; }
};

TEST_F(GangOneWorkerE2ETest, BothRanksOnOneWorkerMatchOneProcess) {
  const v1::Run gang =
      WaitForEnd(stack_->Submit(GangSweepYaml("gang", 2, "1e9")), absl::Minutes(6));
  ASSERT_EQ(gang.state(), v1::RUN_STATE_SUCCEEDED) << gang.failure().message();
  EXPECT_TRUE(fs::exists(root_ / "work-0" / gang.run_id() / "engine-rank-1.log"))
      << "rank 1 did not run beside rank 0";
  ExpectWholeCurve(gang);
  const v1::Run single =
      WaitForEnd(stack_->Submit(GangSweepYaml("single", 1, "1e9")), absl::Minutes(6));
  ASSERT_EQ(single.state(), v1::RUN_STATE_SUCCEEDED) << single.failure().message();
  EXPECT_NEAR(gang.summary().final_val_bpc(), single.summary().final_val_bpc(), kGangTolerance);
}

// Four ranks on four workers of one thread each, one micro-batch each.
class GangFourWorkersE2ETest : public GangE2ETest {
 protected:
  int Workers() const override { return 4; }
};

TEST_F(GangFourWorkersE2ETest, FourRankGangOnFourWorkersMatchesOneProcess) {
  const v1::Run gang =
      WaitForEnd(stack_->Submit(GangSweepYaml("gang4", 4, "2e9", 4)), absl::Minutes(6));
  ASSERT_EQ(gang.state(), v1::RUN_STATE_SUCCEEDED) << gang.failure().message();
  EXPECT_EQ(WorkersWithRank(gang.run_id(), 4), 4);
  ExpectWholeCurve(gang);
  const v1::Run single =
      WaitForEnd(stack_->Submit(GangSweepYaml("single4", 1, "2e9", 4)), absl::Minutes(6));
  ASSERT_EQ(single.state(), v1::RUN_STATE_SUCCEEDED) << single.failure().message();
  EXPECT_EQ(gang.summary().steps(), single.summary().steps());
  EXPECT_NEAR(gang.summary().final_val_bpc(), single.summary().final_val_bpc(), kGangTolerance);
  std::printf("4 ranks, %llu steps: final validation BPC %.9f, one process %.9f\n",
              static_cast<unsigned long long>(gang.summary().steps()),
              gang.summary().final_val_bpc(), single.summary().final_val_bpc());
}

// The case: rank 2 of 4 killed; every rank stops and the gang restarts as a whole.
TEST_F(GangFourWorkersE2ETest, KillOfRankTwoOfFourRestartsTheWholeGangFromItsCheckpoint) {
  KillOneRankAndExpectTheGangRestarted(/*ranks=*/4, /*rank=*/2, /*grad_accum=*/4);
}

}  // namespace
}  // namespace parity::e2e
