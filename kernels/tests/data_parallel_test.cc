// Data-parallel training with real parity-train processes on loopback (Gloo, one BLAS thread
// each): a tiny dense and a tiny MoE run on 1, 2 and 4 ranks give one process's loss curve and
// final validation BPC within fp32 reduction-order tolerance; a 2-rank run resumed from rank 0's
// checkpoint equals the uninterrupted one bit for bit, and one process can resume it too; a rank
// that never arrives makes the others fail within the rendezvous timeout; a rank of another gang
// epoch is refused while the gang still forms; a rank killed mid-run fails the other promptly
// (no hang), and SIGTERM to one rank stops the whole gang with rank 0's checkpoint; bad gang
// flags are refused naming the flag.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

extern char** environ;

namespace parity::kernels {
namespace {

namespace fs = std::filesystem;

// The largest |Δ| of a per-step train BPC or the final validation BPC between a gang of 2 or 4
// ranks and one process. Measured on these tiny runs (BPC ≈ 7–8; kernels/README.md): dense 3.2e-8
// (2 ranks) and 2.7e-8 (4), loss-free MoE 1.6e-8 (2) and 2.1e-8 (4), the same in every
// repetition (the fp32 gradient summed per rank and then across ranks, instead of micro-batch by
// micro-batch, then 12 AdamW steps). The bound leaves 30× headroom for other CPUs' BLAS kernels.
// Step 1 (before any update) agrees to 1e-9.
constexpr double kCurveTolerance = 1e-6;

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<nlohmann::json> JsonLines(const fs::path& p) {
  std::vector<nlohmann::json> out;
  std::istringstream in(ReadFile(p));
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  }
  return out;
}

struct Proc {
  pid_t pid = -1;
  fs::path metrics, log;
};

class DataParallelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("parity_dp_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    corpus_ = (dir_ / "corpus.txt").string();
    std::ofstream out(corpus_, std::ios::binary);
    for (int i = 0; i < 300; ++i) {
      out << "Verse " << i << ": In the beginning God created the heaven and the earth. ";
    }
  }
  void TearDown() override {
    for (Proc& p : live_) {
      if (p.pid > 0) ::kill(p.pid, SIGKILL), ::waitpid(p.pid, nullptr, 0);
    }
    fs::remove_all(dir_);
  }

  // A 12-step run: 8 sequences of 16 tokens per step as 4 micro-batches of 2 (so 1, 2 and 4 ranks
  // divide it), evaluated at steps 6 and 12. MoE runs balance with the auxiliary loss, or with
  // loss-free biases (`loss_free`), whose updates come from the step's global expert loads.
  std::string Spec(bool moe, const std::string& name, bool loss_free = false, int steps = 12,
                   int micro_batch = 2) {
    nlohmann::json model = {{"architecture", moe ? "ARCHITECTURE_MOE" : "ARCHITECTURE_DENSE"},
                            {"dModel", 16},
                            {"numLayers", 2},
                            {"numHeads", 2},
                            {"numKvHeads", 1},
                            {"ffnHidden", 32},
                            {"tieEmbeddings", true}};
    if (moe) {
      model["moe"] = {{"layout", "MOE_LAYOUT_ONE_DENSE_SHARED_EXPERT"},
                      {"numExperts", 4},
                      {"topK", 2},
                      {"expertHidden", 8}};
      if (loss_free) {
        model["moe"]["router"] = {{"balance", "BALANCE_METHOD_LOSS_FREE"},
                                  {"biasUpdateRate", 0.01}};
      }
    }
    const nlohmann::json spec = {{"name", name},
                                 {"model", model},
                                 {"training",
                                  {{"learningRate", 0.003},
                                   {"batchTokens", 128},
                                   {"sequenceLength", 16},
                                   {"steps", steps},
                                   {"microBatchSequences", micro_batch},
                                   {"seed", 3},
                                   {"evalTokens", 96},
                                   {"evalEverySteps", 6},
                                   {"logEverySteps", 1},
                                   {"checkpointEverySteps", 4},
                                   {"threads", 1}}},
                                 {"data", {{"corpus", corpus_}, {"validationFraction", 0.1}}}};
    const std::string path = (dir_ / (name + ".json")).string();
    std::ofstream(path) << spec.dump();
    return path;
  }

  Proc Spawn(const std::string& tag, std::vector<std::string> args) {
    Proc p{.metrics = dir_ / (tag + ".jsonl"), .log = dir_ / (tag + ".log")};
    args.insert(args.begin(), PARITY_TRAIN_BIN);
    args.insert(args.end(), {"--metrics", p.metrics.string(), "--threads", "1"});
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, p.log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    ::setenv("OPENBLAS_NUM_THREADS", "1", 1);
    EXPECT_EQ(posix_spawn(&p.pid, argv[0], &fa, nullptr, argv.data(), environ), 0);
    posix_spawn_file_actions_destroy(&fa);
    live_.push_back(p);
    return p;
  }

  // Exit code, or -1 when it did not end within `limit` (then it is killed).
  int Wait(Proc& p, double limit = 120) {
    const auto t0 = std::chrono::steady_clock::now();
    int status = 0;
    for (;;) {
      const pid_t r = ::waitpid(p.pid, &status, WNOHANG);
      if (r == p.pid) break;
      if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > limit) {
        ::kill(p.pid, SIGKILL);
        ::waitpid(p.pid, &status, 0);
        status = -1;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    for (Proc& q : live_) {
      if (q.pid == p.pid) q.pid = -1;
    }
    return status == -1 || !WIFEXITED(status) ? -1 : WEXITSTATUS(status);
  }

  // Rank 0's rendezvous address, from its first line; its token goes into the environment the
  // next ranks are spawned with (PARITY_RENDEZVOUS_TOKEN, as a worker passes it).
  std::string RendezvousAddress(const Proc& rank0) {
    for (int i = 0; i < 1500; ++i) {
      for (const nlohmann::json& j : JsonLines(rank0.metrics)) {
        if (j["event"] == "rendezvous") {
          token_ = j.value("token", "");
          EXPECT_GE(token_.size(), 32u) << "a token of at least 128 bits";
          ::setenv("PARITY_RENDEZVOUS_TOKEN", token_.c_str(), 1);
          return j["address"];
        }
        if (j["event"] == "error") {
          ADD_FAILURE() << "rank 0 failed: " << ReadFile(rank0.log);
          return "";
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ADD_FAILURE() << "no rendezvous line: " << ReadFile(rank0.log);
    return "";
  }

  // Waits until rank 0 has logged `step` (its metrics lines).
  void WaitForStep(const Proc& rank0, int step) {
    for (int i = 0; i < 3000; ++i) {
      for (const nlohmann::json& j : JsonLines(rank0.metrics)) {
        if (j["event"] == "metrics" && j["step"] >= step) return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ADD_FAILURE() << "rank 0 never reached step " << step << ": " << ReadFile(rank0.log);
  }

  // Runs a gang of `world` ranks (world 0: one plain process, no gang flags) to the end; returns
  // rank 0's metric lines and expects every rank to exit `expect`.
  std::vector<nlohmann::json> RunGang(const std::string& spec, int world, const std::string& tag,
                                      std::vector<std::string> extra = {}, int expect = 0,
                                      int epoch = 1, const std::string& out_tag = "") {
    std::vector<std::string> common = {"--run", spec};
    common.insert(common.end(), extra.begin(), extra.end());
    auto args = [&](int rank) {
      std::vector<std::string> a = common;
      const std::string out = (out_tag.empty() ? tag : out_tag) + "-out" + std::to_string(rank);
      a.insert(a.end(), {"--out", (dir_ / out).string()});
      if (world == 0) return a;
      a.insert(a.end(), {"--rank", std::to_string(rank), "--world-size", std::to_string(world),
                         "--gang-epoch", std::to_string(epoch), "--rendezvous-timeout", "60"});
      return a;
    };
    std::vector<std::string> a0 = args(0);
    if (world > 0) a0.insert(a0.end(), {"--rendezvous-listen", "127.0.0.1"});
    std::vector<Proc> ranks = {Spawn(tag + "-r0", a0)};
    if (world > 1) {
      const std::string address = RendezvousAddress(ranks[0]);
      for (int r = 1; r < world; ++r) {
        std::vector<std::string> a = args(r);
        a.insert(a.end(), {"--rendezvous", address});
        ranks.push_back(Spawn(tag + "-r" + std::to_string(r), a));
      }
    }
    for (Proc& p : ranks) EXPECT_EQ(Wait(p), expect) << p.log << ":\n" << ReadFile(p.log);
    return JsonLines(ranks[0].metrics);
  }

  fs::path dir_;
  std::string corpus_;
  std::vector<Proc> live_;
  std::string token_;  // the last gang token read from a rendezvous line
};

struct Curve {
  std::vector<double> train_bpc;  // by step
  double val_bpc = 0;             // final
};

Curve CurveOf(const std::vector<nlohmann::json>& lines) {
  Curve c;
  for (const nlohmann::json& j : lines) {
    if (j["event"] == "metrics") c.train_bpc.push_back(j["train_bpc"]);
    if (j["event"] == "summary" && j.contains("final_val_bpc")) c.val_bpc = j["final_val_bpc"];
  }
  return c;
}

double MaxDiff(const Curve& a, const Curve& b) {
  EXPECT_EQ(a.train_bpc.size(), b.train_bpc.size());
  double d = std::abs(a.val_bpc - b.val_bpc);
  for (size_t i = 0; i < std::min(a.train_bpc.size(), b.train_bpc.size()); ++i) {
    d = std::max(d, std::abs(a.train_bpc[i] - b.train_bpc[i]));
  }
  return d;
}

void ExpectSameCurve(const Curve& one, const Curve& gang, int world) {
  ASSERT_EQ(one.train_bpc.size(), 12u);
  EXPECT_GT(one.val_bpc, 0);
  EXPECT_NEAR(one.train_bpc[0], gang.train_bpc[0], 1e-9) << world << " ranks, step 1";
  const double d = MaxDiff(one, gang);
  std::cout << "[ measured ] " << world << " ranks: max |Δ BPC| vs one process = " << d << "\n";
  EXPECT_LE(d, kCurveTolerance) << world << " ranks";
}

TEST_F(DataParallelTest, DenseCurveOnOneTwoAndFourRanksMatchesOneProcess) {
  const std::string spec = Spec(false, "dense");
  const std::vector<nlohmann::json> single = RunGang(spec, 0, "single");
  const Curve one = CurveOf(single);
  // A gang of one (the Gloo path with its store, one rank) is the plain process bit for bit, and
  // its summary says it really summed through Gloo (bench/gpu_check.sh checks "nccl" the same
  // way on a GPU); the plain process runs the no-op communicator and says nothing.
  const std::vector<nlohmann::json> solo_lines = RunGang(spec, 1, "solo");
  const Curve solo = CurveOf(solo_lines);
  EXPECT_EQ(MaxDiff(one, solo), 0.0);
  ASSERT_FALSE(solo_lines.empty());
  EXPECT_EQ(solo_lines.back()["event"], "summary");
  EXPECT_EQ(solo_lines.back().value("communicator", ""), "gloo");
  EXPECT_EQ(solo_lines.back().value("world_size", 0), 1);
  ASSERT_FALSE(single.empty());
  EXPECT_FALSE(single.back().contains("communicator"));
  ExpectSameCurve(one, CurveOf(RunGang(spec, 2, "two")), 2);
  ExpectSameCurve(one, CurveOf(RunGang(spec, 4, "four")), 4);
}

// A micro-batch cap that divides no share: one process cuts the step's 8 sequences 3 + 3 + 2, each
// of two ranks its 4 as 2 + 2 (core/micro_batches.h). The gradient is the step's token mean either
// way, so the curve matches within the same tolerance.
TEST_F(DataParallelTest, UnevenMicroBatchesOnOneAndTwoRanksDrawTheSameCurve) {
  const std::string spec = Spec(false, "uneven", false, 12, /*micro_batch=*/3);
  const Curve one = CurveOf(RunGang(spec, 0, "single"));
  const Curve even = CurveOf(RunGang(Spec(false, "even"), 0, "even"));
  EXPECT_NEAR(one.train_bpc[0], even.train_bpc[0], 1e-9) << "step 1: 3 + 3 + 2 against 2 × 4";
  EXPECT_LE(MaxDiff(one, even), kCurveTolerance) << "uneven against even micro-batches";
  ExpectSameCurve(one, CurveOf(RunGang(spec, 2, "two")), 2);
}

TEST_F(DataParallelTest, LossFreeMoeCurveAndExpertLoadsOnTwoAndFourRanksMatchOneProcess) {
  const std::string spec = Spec(true, "moe", /*loss_free=*/true);
  const std::vector<nlohmann::json> single = RunGang(spec, 0, "single");
  const std::vector<nlohmann::json> two = RunGang(spec, 2, "two");
  ExpectSameCurve(CurveOf(single), CurveOf(two), 2);
  ExpectSameCurve(CurveOf(single), CurveOf(RunGang(spec, 4, "four")), 4);
  // Step 1's expert loads are global counts: the same integers as one process's.
  EXPECT_EQ(single[0]["expert_load"], two[1]["expert_load"]) << "line 0 of a gang: rendezvous";
}

TEST_F(DataParallelTest, TwoRankResumeFromRankZerosCheckpointEqualsUninterruptedRun) {
  const std::string spec = Spec(true, "resume");
  const Curve straight = CurveOf(RunGang(spec, 2, "straight"));
  RunGang(spec, 2, "cut", {"--max-steps", "5"}, 3, 1);
  // Only rank 0 wrote checkpoints; the next attempt (a new epoch) resumes from them.
  EXPECT_TRUE(fs::exists(dir_ / "cut-out0" / "LATEST"));
  EXPECT_FALSE(fs::exists(dir_ / "cut-out1" / "LATEST"));
  const Curve resumed = CurveOf(RunGang(spec, 2, "resumed", {"--resume"}, 0, 2, "cut"));
  ASSERT_EQ(resumed.train_bpc.size(), 12u - 5u);
  for (size_t i = 0; i < resumed.train_bpc.size(); ++i) {
    EXPECT_EQ(resumed.train_bpc[i], straight.train_bpc[5 + i]) << "step " << 6 + i;
  }
  EXPECT_EQ(resumed.val_bpc, straight.val_bpc);
  // The checkpoint does not depend on the world size: one process resumes it too.
  const std::string ckpt = (dir_ / "cut-out0" / "step-00000008.ckpt").string();
  const Curve alone = CurveOf(RunGang(spec, 0, "alone", {"--resume-from", ckpt}));
  EXPECT_NEAR(alone.val_bpc, straight.val_bpc, kCurveTolerance);
}

TEST_F(DataParallelTest, ARankThatNeverArrivesFailsTheOthersWithinTheTimeout) {
  const std::string spec = Spec(false, "missing");  // ranks 2 and 3 of 4 never start
  const auto t0 = std::chrono::steady_clock::now();
  Proc r0 =
      Spawn("r0", {"--run", spec, "--out", (dir_ / "o0").string(), "--rank", "0", "--world-size",
                   "4", "--rendezvous-listen", "127.0.0.1", "--rendezvous-timeout", "3"});
  Proc r1 =
      Spawn("r1", {"--run", spec, "--out", (dir_ / "o1").string(), "--rank", "1", "--world-size",
                   "4", "--rendezvous", RendezvousAddress(r0), "--rendezvous-timeout", "3"});
  EXPECT_EQ(Wait(r0, 30), 7) << ReadFile(r0.log);
  EXPECT_EQ(Wait(r1, 30), 7) << ReadFile(r1.log);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 20);
  EXPECT_NE(ReadFile(r0.log).find("rendezvous-timeout"), std::string::npos) << ReadFile(r0.log);
  // Rank 1 either times out itself or sees rank 0's store go away first; either way it says so.
  EXPECT_NE(ReadFile(r1.log).find("rendezvous"), std::string::npos) << ReadFile(r1.log);
  bool error_line = false;
  for (const nlohmann::json& j : JsonLines(r0.metrics)) error_line |= j["event"] == "error";
  EXPECT_TRUE(error_line);
}

TEST_F(DataParallelTest, ARankOfAnotherEpochIsRefusedAndTheGangStillForms) {
  const std::string spec = Spec(false, "epoch");
  auto rank = [&](int r, int epoch, const std::string& tag, std::vector<std::string> more) {
    std::vector<std::string> a = {"--run",        spec,
                                  "--out",        (dir_ / tag).string(),
                                  "--rank",       std::to_string(r),
                                  "--world-size", "2",
                                  "--gang-epoch", std::to_string(epoch),
                                  "--max-steps",  "2"};
    a.insert(a.end(), more.begin(), more.end());
    return Spawn(tag, a);
  };
  Proc r0 = rank(0, 9, "r0", {"--rendezvous-listen", "127.0.0.1"});
  const std::string address = RendezvousAddress(r0);
  Proc stale = rank(1, 8, "stale", {"--rendezvous", address});
  EXPECT_EQ(Wait(stale, 30), 7);
  const std::string why = ReadFile(stale.log);
  EXPECT_NE(why.find("gang epoch 9"), std::string::npos) << why;
  EXPECT_NE(why.find("gang epoch 8"), std::string::npos) << why;
  Proc good = rank(1, 9, "good", {"--rendezvous", address});
  EXPECT_EQ(Wait(good), 3) << ReadFile(good.log);
  EXPECT_EQ(Wait(r0), 3) << ReadFile(r0.log);
}

TEST_F(DataParallelTest, ARankWithoutTheGangTokenIsRefusedAndNeverSeesIt) {
  const std::string spec = Spec(false, "token");
  auto rank = [&](int r, const std::string& tag, std::vector<std::string> more) {
    std::vector<std::string> a = {"--run",
                                  spec,
                                  "--out",
                                  (dir_ / tag).string(),
                                  "--rank",
                                  std::to_string(r),
                                  "--world-size",
                                  "2",
                                  "--gang-epoch",
                                  "3",
                                  "--max-steps",
                                  "2",
                                  "--rendezvous-timeout",
                                  "30"};
    a.insert(a.end(), more.begin(), more.end());
    return Spawn(tag, a);
  };
  Proc r0 = rank(0, "r0", {"--rendezvous-listen", "127.0.0.1"});
  const std::string address = RendezvousAddress(r0);
  const std::string token = token_;
  // Rank 0's stdout (a log file) carries the address but not the token.
  EXPECT_EQ(ReadFile(r0.log).find(token), std::string::npos);
  ::setenv("PARITY_RENDEZVOUS_TOKEN", std::string(32, '0').c_str(), 1);
  Proc wrong = rank(1, "wrong", {"--rendezvous", address});
  EXPECT_EQ(Wait(wrong, 30), 7);
  EXPECT_NE(ReadFile(wrong.log).find("gang token"), std::string::npos) << ReadFile(wrong.log);
  ::unsetenv("PARITY_RENDEZVOUS_TOKEN");
  Proc none = rank(1, "none", {"--rendezvous", address});
  EXPECT_EQ(Wait(none, 30), 2) << ReadFile(none.log);  // refused at start: names the variable
  EXPECT_NE(ReadFile(none.log).find("PARITY_RENDEZVOUS_TOKEN"), std::string::npos);
  ::setenv("PARITY_RENDEZVOUS_TOKEN", token.c_str(), 1);
  Proc good = rank(1, "good", {"--rendezvous", address});
  EXPECT_EQ(Wait(good), 3) << ReadFile(good.log);
  EXPECT_EQ(Wait(r0), 3) << ReadFile(r0.log);
  for (const Proc* p : {&wrong, &none, &good}) {
    EXPECT_EQ(ReadFile(p->log).find(token), std::string::npos) << "a rank's output names the token";
  }
}

TEST_F(DataParallelTest, ARankKilledMidRunFailsTheOtherPromptly) {
  const std::string spec = Spec(false, "killed", false, 100000);
  Proc r0 = Spawn("r0", {"--run", spec, "--out", (dir_ / "o0").string(), "--rank", "0",
                         "--world-size", "2", "--rendezvous-listen", "127.0.0.1"});
  Proc r1 = Spawn("r1", {"--run", spec, "--out", (dir_ / "o1").string(), "--rank", "1",
                         "--world-size", "2", "--rendezvous", RendezvousAddress(r0)});
  WaitForStep(r0, 3);
  ::kill(r1.pid, SIGKILL);
  Wait(r1, 30);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(Wait(r0, 60), 7) << ReadFile(r0.log);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 30);
  EXPECT_NE(ReadFile(r0.log).find("gloo"), std::string::npos) << ReadFile(r0.log);
  // The gang's watch names the rank that left (Gloo's own error names only a socket).
  EXPECT_NE(ReadFile(r0.log).find("rank 1 left the gang"), std::string::npos) << ReadFile(r0.log);
}

TEST_F(DataParallelTest, ASignalToOneRankStopsTheWholeGangWithACheckpoint) {
  const std::string spec = Spec(false, "signal", false, 100000);
  Proc r0 = Spawn("r0", {"--run", spec, "--out", (dir_ / "o0").string(), "--rank", "0",
                         "--world-size", "2", "--rendezvous-listen", "127.0.0.1"});
  Proc r1 = Spawn("r1", {"--run", spec, "--out", (dir_ / "o1").string(), "--rank", "1",
                         "--world-size", "2", "--rendezvous", RendezvousAddress(r0)});
  WaitForStep(r0, 3);
  ::kill(r1.pid, SIGTERM);
  EXPECT_EQ(Wait(r1, 60), 3) << ReadFile(r1.log);
  EXPECT_EQ(Wait(r0, 60), 3) << ReadFile(r0.log);
  EXPECT_TRUE(fs::exists(dir_ / "o0" / "LATEST"));
  const std::vector<nlohmann::json> lines = JsonLines(r0.metrics);
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines.back()["event"], "summary");
  EXPECT_EQ(lines.back()["status"], "stopped");
}

TEST_F(DataParallelTest, BadGangFlagsAreRefusedNamingTheFlag) {
  const std::string spec = Spec(false, "flags");
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--rank", "2", "--world-size", "2", "--rendezvous", "127.0.0.1:1"}, "--rank"},
      {{"--rank", "1", "--world-size", "2"}, "--rendezvous"},
      {{"--rank", "0", "--world-size", "2"}, "--rendezvous-listen"},
      {{"--rank", "0", "--world-size", "3", "--rendezvous-listen", "127.0.0.1"},
       "training.batch_tokens"},
      {{"--rank", "1", "--world-size", "2", "--rendezvous", "nohost"}, "--rendezvous"},
  };
  int i = 0;
  for (const auto& [flags, named] : cases) {
    std::vector<std::string> a = {"--run", spec, "--out", (dir_ / "o").string()};
    a.insert(a.end(), flags.begin(), flags.end());
    Proc p = Spawn("case" + std::to_string(i++), a);
    EXPECT_EQ(Wait(p, 30), 2) << ReadFile(p.log);
    EXPECT_NE(ReadFile(p.log).find(named), std::string::npos) << named << ": " << ReadFile(p.log);
  }
}

}  // namespace
}  // namespace parity::kernels
