// The stack and the helpers the gang end-to-end tests share (gang_e2e_test.cc: gangs that train
// and restart; gang_faults_e2e_test.cc: a gang that cannot be placed, one that never forms, and
// stale ranks): a throwaway PostgreSQL, the real parity-scheduler, parity-worker processes of
// one CPU thread each (by default) and the real parity-train.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <memory>
#include <string>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "parity/v1/run.pb.h"
#include "tests/e2e/local_stack.h"

namespace parity::e2e {

// One loss-free MoE point (the router's loads are reduced over the ranks), `micro_batches`
// micro-batches per step (a gang's ranks share them), as a gang of `ranks`. The engine states its
// 1e-6 for short runs (about a dozen steps): fp32 rounding differences grow over a long run, so a
// comparison with one process uses a budget of that size.
std::string GangSweepYaml(const std::string& name, int ranks, const std::string& compute,
                          int micro_batches = 2);

// The pid of a process whose command line names `program`, `run_id` and `--rank R`, or -1.
pid_t RankPid(const std::string& run_id, int rank, const std::string& program = "parity-train");

class GangStackTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;
  // Workers started by SetUp (worker-0 … worker-N-1), and each one's --threads.
  virtual int Workers() const { return 2; }
  virtual int ThreadsPerWorker() const { return 1; }
  // A test's changes to the stack before it starts (scheduler flags, another engine).
  virtual void Configure(StackOptions& options) const { (void)options; }

  // The sweep's one run once it has ended (or as it is after `timeout`).
  v1::Run WaitForEnd(const std::string& sweep_id, absl::Duration timeout);
  // The first row of a query over the stack's database ("" when none).
  std::string One(const std::string& sql);
  // Every logged step from 1 to the last exactly once (log_every_steps is 1).
  void ExpectWholeCurve(const v1::Run& run);
  // How many workers ran a rank of `run_id` whose log is `log` (engine.log: the primary rank).
  int WorkersWithRank(const std::string& run_id, int workers,
                      const std::string& log = "engine.log") const;

  std::filesystem::path root_;
  std::unique_ptr<LocalStack> stack_;
};

}  // namespace parity::e2e
