// What a researcher's spec and a lease holder's report can make a worker do, through the real
// RunSupervisor and the fake engine process (issue #23): read a file outside --corpus-dir, resume
// the engine from a file outside the run's checkpoints, learn a worker's paths and file sizes
// from a failure, or hand the engine the worker's credentials. None of it gets through.
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/dataset_name.h"
#include "gtest/gtest.h"
#include "worker/run_supervisor.h"
#include "worker/tests/run_supervisor_fixture.h"

namespace parity::worker {
namespace {

namespace fs = std::filesystem;

using RunConfinementTest = RunSupervisorTest;

std::string ReadAll(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST_F(RunConfinementTest, ADatasetOutsideTheDataDirectoryNeverReachesTheEngine) {
  std::ofstream(root_ / "secret.txt") << "the worker's own file";
  fs::create_symlink(root_ / "secret.txt", root_ / "corpus" / "linked.txt");
  ASSERT_EQ(mkfifo((root_ / "corpus" / "pipe").c_str(), 0600), 0);
  struct Case {
    std::string corpus;
    std::string told;  // the whole failure message a viewer reads
  };
  const std::string not_a_name = absl::StrCat("is not a dataset name; ", core::kDatasetNameRemedy);
  for (const Case& c :
       {Case{"/etc/passwd", "data.corpus: '/etc/passwd' " + not_a_name},
        Case{"../../../../etc/passwd", "data.corpus: '../../../../etc/passwd' " + not_a_name},
        Case{"/dev/zero", "data.corpus: '/dev/zero' " + not_a_name},
        Case{"linked", "dataset 'linked' not found on worker worker-1"},
        Case{"pipe", "dataset 'pipe' not found on worker worker-1"},
        Case{"absent", "dataset 'absent' not found on worker worker-1"}}) {
    SCOPED_TRACE(c.corpus);
    fs::remove_all(root_ / "work");
    parity::v1::LeaseRunResponse lease = Lease(10);
    lease.mutable_run()->mutable_spec()->mutable_data()->set_corpus(c.corpus);
    EXPECT_EQ(RunToEnd(lease), RunOutcome::kFailed);
    EXPECT_FALSE(fs::exists(root_ / "work" / "run-1" / "engine.log")) << "no engine may start";
    absl::MutexLock l(&fake_.mu);
    ASSERT_EQ(fake_.completes.size(), 1u);
    const parity::v1::RunFailure& f = fake_.completes[0].failure();
    EXPECT_EQ(f.failure_class(), parity::v1::FAILURE_CLASS_USER_ERROR)
        << "a dataset that is not there is not retried";
    EXPECT_EQ(f.status().message(), c.told);
    fake_.completes.clear();
  }
}

TEST_F(RunConfinementTest, ADatasetOverTheWorkersLimitIsRefusedWithoutItsSize) {
  std::ofstream(root_ / "corpus" / "big.txt") << std::string(5000, 'b');
  options_.dataset_limits.max_bytes = 4096;
  parity::v1::LeaseRunResponse lease = Lease(10);
  lease.mutable_run()->mutable_spec()->mutable_data()->set_corpus("big");
  EXPECT_EQ(RunToEnd(lease), RunOutcome::kFailed);
  absl::MutexLock l(&fake_.mu);
  ASSERT_EQ(fake_.completes.size(), 1u);
  EXPECT_EQ(fake_.completes[0].failure().failure_class(), parity::v1::FAILURE_CLASS_USER_ERROR);
  EXPECT_EQ(fake_.completes[0].failure().status().message(),
            "dataset 'big' is over worker worker-1's size limit for datasets");
}

TEST_F(RunConfinementTest, TheEngineGetsTheResolvedFileAndTheLimit) {
  options_.dataset_limits.max_bytes = 123456;
  EXPECT_EQ(RunToEnd(Lease(5)), RunOutcome::kSucceeded);
  const std::string spec = ReadAll(root_ / "work" / "run-1" / "run-attempt1.json");
  EXPECT_NE(spec.find(absl::StrCat("\"corpus\": \"", fs::canonical(root_ / "corpus").string(),
                                   "/tiny.txt\"")),
            std::string::npos)
      << spec;
}

// A lease holder recorded ../../root/.ssh/id_rsa as the run's checkpoint, and the next worker ran
// the engine with --resume-from on it. Now the worker refuses every URI outside the run's prefix
// and fails the attempt before any engine starts.
TEST_F(RunConfinementTest, AResumeFromAUriOutsideTheRunsPrefixIsRefused) {
  std::ofstream(root_ / "secret.txt") << "0\n";  // readable by the fake engine as step 0
  fs::create_directories(root_ / "ckpt" / "run-2" / "epoch-1");
  std::ofstream(root_ / "ckpt" / "run-2" / "epoch-1" / "step-00000010.ckpt") << "10\n";
  fs::create_directories(root_ / "ckpt" / "run-1" / "recorded-3");
  fs::create_symlink(root_ / "secret.txt",
                     root_ / "ckpt" / "run-1" / "recorded-3" / "step-00000010.ckpt");
  for (const std::string& uri : std::vector<std::string>{
           "../../root/.ssh/id_rsa", (root_ / "secret.txt").string(),
           "run-2/epoch-1/step-00000010.ckpt", "run-1/../run-2/epoch-1/step-00000010.ckpt",
           "run-1/recorded-3/step-00000010.ckpt"}) {
    SCOPED_TRACE(uri);
    fs::remove_all(root_ / "work");
    parity::v1::Checkpoint recorded;
    recorded.set_step(10);
    recorded.set_uri(uri);
    EXPECT_EQ(RunToEnd(Lease(20, /*attempt=*/2, recorded)), RunOutcome::kFailed);
    EXPECT_FALSE(fs::exists(root_ / "work" / "run-1" / "engine.log")) << "no engine may start";
    absl::MutexLock l(&fake_.mu);
    ASSERT_EQ(fake_.completes.size(), 1u);
    const parity::v1::RunFailure& f = fake_.completes[0].failure();
    EXPECT_EQ(f.failure_class(), parity::v1::FAILURE_CLASS_INFRASTRUCTURE);
    EXPECT_NE(f.status().message().find("refused to resume"), std::string::npos)
        << f.status().message();
    EXPECT_TRUE(fake_.points.empty()) << "nothing was trained";
    fake_.completes.clear();
  }
}

// What the engine says (its error line, its log's tail) reaches every viewer of the run: without
// the worker's paths or the sizes of its files.
TEST_F(RunConfinementTest, EngineTextReachesTheFailureWithoutPathsOrSizes) {
  fs::create_directories(root_ / "ckpt" / "run-1" / "epoch-3");
  std::ofstream(root_ / "ckpt" / "run-1" / "epoch-3" / "step-00000010.ckpt") << "10\n";
  parity::v1::Checkpoint recorded;
  recorded.set_step(10);
  recorded.set_uri("run-1/epoch-3/step-00000010.ckpt");
  options_.engine_env.push_back({"FAKE_EXIT_CODE", "1"});
  options_.engine_env.push_back(
      {"FAKE_ERROR_MESSAGE", absl::StrCat("cannot read /etc/shadow (1234 bytes) nor ",
                                          fs::canonical(root_ / "corpus" / "tiny.txt").string())});
  EXPECT_EQ(RunToEnd(Lease(20, /*attempt=*/2, recorded)), RunOutcome::kFailed);
  absl::MutexLock l(&fake_.mu);
  ASSERT_EQ(fake_.completes.size(), 1u);
  const std::string& told = fake_.completes[0].failure().status().message();
  for (const std::string& secret :
       std::vector<std::string>{root_.string(), std::string("/etc/shadow"), std::string("1234"),
                                std::string(PARITY_FAKE_ENGINE)}) {
    EXPECT_EQ(told.find(secret), std::string::npos) << "'" << secret << "' in: " << told;
  }
  EXPECT_NE(told.find("cannot read <path> (<n> bytes) nor <dataset>"), std::string::npos) << told;
  EXPECT_NE(told.find("<checkpoint-dir>/run-1/epoch-3/step-00000010.ckpt"), std::string::npos)
      << "the log tail (the engine's resume line) keeps its meaning: " << told;
}

// The worker's token and TLS settings stay with the worker: the engine trains a researcher's spec.
TEST_F(RunConfinementTest, TheEngineInheritsNoCredentials) {
  const std::set<std::string> secrets = {"PARITY_TOKEN", "PARITY_TOKEN_FILE", "PARITY_TLS_CA",
                                         "PARITY_TLS_CLIENT_KEY", "PARITY_TLS_CLIENT_CERT"};
  for (const std::string& name : secrets) setenv(name.c_str(), "secret-value", 1);
  setenv("PARITY_SCHEDULER", "sched:50051", 1);  // not a secret: inherited as before
  const fs::path dump = root_ / "engine.env";
  options_.engine_env.push_back({"FAKE_ENV_DUMP_FILE", dump.string()});
  const RunOutcome outcome = RunToEnd(Lease(5));
  for (const std::string& name : secrets) unsetenv(name.c_str());
  unsetenv("PARITY_SCHEDULER");
  EXPECT_EQ(outcome, RunOutcome::kSucceeded);
  const std::string env = ReadAll(dump);
  ASSERT_NE(env.find("PARITY_RUN_ID=run-1"), std::string::npos) << "no environment dumped: " << env;
  EXPECT_NE(env.find("PARITY_SCHEDULER=sched:50051"), std::string::npos) << env;
  for (const std::string& name : secrets) {
    EXPECT_EQ(env.find(name + "="), std::string::npos) << name << " reached the engine:\n" << env;
  }
  EXPECT_EQ(env.find("secret-value"), std::string::npos) << env;
}

}  // namespace
}  // namespace parity::worker
