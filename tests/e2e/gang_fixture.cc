#include "tests/e2e/gang_fixture.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <iterator>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/support/postgres_environment.h"

namespace parity::e2e {

namespace fs = std::filesystem;

std::string GangSweepYaml(const std::string& name, int ranks, const std::string& compute,
                          int micro_batches) {
  return absl::StrCat("name: ", name, R"(
moe:
  d_model: 64
  num_layers: 2
  num_heads: 4
  moe: {layout: all-moe, total_ffn_ratio: 16, granularity: 4, router: {balance: loss_free}}
dense: {d_model: 128, num_layers: 2, num_heads: 8, ffn_hidden: 384}
training:
  rule: explicit
  learning_rate: 3e-3
  batch_tokens: )",
                      64 * micro_batches, R"(
  sequence_length: 64
  micro_batch_sequences: 1
  schedule: cosine
  log_every_steps: 1
  eval_every_steps: 20
  eval_tokens: 2048
  checkpoint_every_steps: 10
  threads: 1
data: {corpus: kjv, validation_fraction: 0.01}
grid:
  moe:
    - {target_activation_rate: 0.25}
  compute:
    - {name: C1, compute_flops: )",
                      compute, R"(}
  data:
    - {name: unique, reuse: unique}
  seeds: [0]
resources:
  cpu_threads: 1
  ranks: )",
                      ranks, "\n");
}

namespace {

// A process's command line, args joined by spaces; "" when it is gone. Read with read(2): a
// process may exit mid-read (ESRCH), which an ifstream reports by throwing.
std::string CommandLine(const std::string& pid) {
  const int fd = ::open(absl::StrCat("/proc/", pid, "/cmdline").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  std::string cmdline;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) cmdline.append(buf, static_cast<size_t>(n));
  ::close(fd);
  std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
  return cmdline;
}

}  // namespace

pid_t RankPid(const std::string& run_id, int rank, const std::string& program) {
  std::error_code error;
  for (fs::directory_iterator it("/proc", error), end; !error && it != end; it.increment(error)) {
    const std::string name = it->path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string cmdline = CommandLine(name);
    if (cmdline.find(program) != std::string::npos && cmdline.find(run_id) != std::string::npos &&
        cmdline.find(absl::StrCat(" --rank ", rank, " ")) != std::string::npos) {
      return static_cast<pid_t>(std::stol(name));
    }
  }
  return -1;
}

void GangStackTest::SetUp() {
  if (std::string(PARITY_SCHEDULER_BIN).empty()) GTEST_SKIP() << "parity-scheduler not built";
  if (std::string(PARITY_TRAIN_BIN).empty()) GTEST_SKIP() << "parity-train not built";
  PARITY_REQUIRE_POSTGRES();
  const std::string url = parity::testing::PostgresEnvironment::FreshDatabase();
  ASSERT_FALSE(url.empty());
  root_ = fs::path(::testing::TempDir()) /
          absl::StrCat("gang_", ::testing::UnitTest::GetInstance()->current_test_info()->name(),
                       "_", getpid());
  fs::remove_all(root_);
  fs::create_directories(root_);
  StackOptions options{.scheduler_bin = PARITY_SCHEDULER_BIN,
                       .worker_bin = PARITY_WORKER_BIN,
                       .engine_bin = PARITY_TRAIN_BIN};
  // Rank 0's store listens on loopback: every worker is on this machine.
  options.worker_env = {{"PARITY_RENDEZVOUS_HOST", "127.0.0.1"}};
  options.worker_threads = std::to_string(ThreadsPerWorker());
  Configure(options);
  absl::StatusOr<std::unique_ptr<LocalStack>> s = LocalStack::Start(options, url, root_.string());
  ASSERT_TRUE(s.ok()) << s.status();
  stack_ = std::move(*s);
  for (int w = 0; w < Workers(); ++w) ASSERT_TRUE(stack_->StartWorker(w).ok());
}

void GangStackTest::TearDown() {
  if (HasFailure() && stack_) {
    for (const char* log :
         {"scheduler.log", "worker-0.log", "worker-1.log", "worker-2.log", "worker-3.log"}) {
      if (!fs::exists(root_ / log)) continue;
      std::cerr << "---- " << log << " (tail)\n" << stack_->LogTail(log);
    }
  }
  stack_.reset();
  if (!HasFailure()) fs::remove_all(root_);  // kept for a look when a test failed
}

v1::Run GangStackTest::WaitForEnd(const std::string& sweep_id, absl::Duration timeout) {
  v1::Run last;
  WaitUntil(
      [&] {
        std::vector<v1::Run> runs = stack_->Runs(sweep_id);
        if (runs.size() != 1) return false;
        last = runs[0];
        return last.state() == v1::RUN_STATE_SUCCEEDED || last.state() == v1::RUN_STATE_FAILED ||
               last.state() == v1::RUN_STATE_CANCELLED;
      },
      timeout);
  return last;
}

std::string GangStackTest::One(const std::string& sql) {
  absl::StatusOr<std::vector<std::string>> rows = stack_->Query(sql);
  EXPECT_TRUE(rows.ok()) << rows.status();
  return rows.ok() && !rows->empty() ? (*rows)[0] : "";
}

void GangStackTest::ExpectWholeCurve(const v1::Run& run) {
  const std::string id = run.run_id();
  EXPECT_EQ(One(absl::StrCat("SELECT count(*) FROM (SELECT step FROM metrics WHERE run_id = '", id,
                             "' GROUP BY step HAVING count(*) > 1) d")),
            "0")
      << "steps stored twice";
  EXPECT_EQ(One(absl::StrCat("SELECT count(DISTINCT step) || ' ' || coalesce(max(step), 0) "
                             "FROM metrics WHERE run_id = '",
                             id, "'")),
            absl::StrCat(run.summary().steps(), " ", run.summary().steps()))
      << "a hole in the curve";
}

int GangStackTest::WorkersWithRank(const std::string& run_id, int workers,
                                   const std::string& log) const {
  int with = 0;
  for (int w = 0; w < workers; ++w) {
    with += fs::exists(root_ / absl::StrCat("work-", w) / run_id / log) ? 1 : 0;
  }
  return with;
}

}  // namespace parity::e2e
