// End to end: PostgreSQL + parity-scheduler + parity-worker processes + the engine. Each test gets
// its own cluster process (ctest runs tests one per process), database, scheduler port and
// scratch directory. Engine: parity-train when it is built (PARITY_E2E_ENGINE=fake forces the
// worker's fake engine, or a path picks another binary); without it the fake engine stands in,
// and the "same validation BPC as an uninterrupted run" check is then trivially about the fake.
#include <signal.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "core/spec_loader.h"
#include "datasets/verify/test_dataset.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/e2e/local_stack.h"
#if PARITY_HAVE_TEST_SUPPORT
#include "tests/support/postgres_environment.h"
#endif

namespace parity::e2e {
namespace {

namespace fs = std::filesystem;

std::string EnvOr(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::string(v) : fallback;
}

std::string EngineBinary() {
  std::string e = EnvOr("PARITY_E2E_ENGINE", "");
  if (e == "fake") return PARITY_FAKE_ENGINE;
  if (!e.empty()) return e;
  return std::string(PARITY_TRAIN_BIN).empty() ? PARITY_FAKE_ENGINE : PARITY_TRAIN_BIN;
}
bool FakeEngine() { return EngineBinary() == PARITY_FAKE_ENGINE; }

// The micro example cut down: MoE points × one budget × unique data, seed 0, plus baselines.
std::string SweepYaml(const std::string& name, int moe_points, bool baselines,
                      const std::string& compute, int seeds = 1) {
  std::string moe;
  const char* rates[] = {"0.25", "0.4", "0.6", "0.15"};
  for (int i = 0; i < moe_points; ++i)
    absl::StrAppend(&moe, "    - {target_activation_rate: ", rates[i], "}\n");
  return absl::StrCat(R"(name: )", name, R"(
moe:
  d_model: 64
  num_layers: 2
  num_heads: 4
  moe:
    layout: all-moe
    total_ffn_ratio: 16
    granularity: 4
    router:
      balance: aux_loss
dense:
  d_model: 128
  num_layers: 2
  num_heads: 8
  ffn_hidden: 384
training:
  rule: explicit
  learning_rate: 3e-3
  batch_tokens: 64
  sequence_length: 64
  schedule: cosine
  log_every_steps: 5
  eval_every_steps: 25
  eval_tokens: 2048
  checkpoint_every_steps: 25
  threads: 1
data:
  corpus: kjv
  validation_fraction: 0.01
grid:
  moe:
)",
                      moe, R"(  compute:
    - {name: C1, compute_flops: )",
                      compute, R"(}
  data:
    - {name: unique, reuse: unique}
  seeds: [)",
                      seeds == 2 ? "0, 1" : "0", R"(]
)",
                      baselines ? "baselines:\n  - {name: dense-1C, compute_multiple: 1}\n  - "
                                  "{name: dense-2C, compute_multiple: 2}\n"
                                : "",
                      "resources:\n  cpu_threads: 1\n");
}

class WorkerE2ETest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string sched = EnvOr("PARITY_E2E_SCHEDULER", PARITY_SCHEDULER_BIN);
    if (sched.empty() || !fs::exists(sched)) {
      GTEST_SKIP() << "parity-scheduler is not built (server/ missing from this build); "
                      "set PARITY_E2E_SCHEDULER to a binary to run the end-to-end tests";
    }
#if !PARITY_HAVE_TEST_SUPPORT
    GTEST_SKIP()
        << "tests/support (parity_test_support, the throwaway PostgreSQL) is not in this build";
#else
    PARITY_REQUIRE_POSTGRES();
    const std::string url = parity::testing::PostgresEnvironment::FreshDatabase();
    ASSERT_FALSE(url.empty());
    root_ = fs::path(::testing::TempDir()) /
            absl::StrCat("e2e_", ::testing::UnitTest::GetInstance()->current_test_info()->name(),
                         "_", getpid());
    fs::remove_all(root_);
    fs::create_directories(root_);
    StackOptions options{
        .scheduler_bin = sched, .worker_bin = PARITY_WORKER_BIN, .engine_bin = EngineBinary()};
    options.worker_env = {{"FAKE_STEP_MS", "20"}};
    absl::StatusOr<std::unique_ptr<LocalStack>> s = LocalStack::Start(options, url, root_.string());
    ASSERT_TRUE(s.ok()) << s.status();
    stack_ = std::move(*s);
    std::cerr << "e2e: engine " << EngineBinary() << ", scratch " << root_ << "\n";
#endif
  }

  void TearDown() override {
    if (HasFailure() && stack_) {
      std::cerr << "---- scheduler.log (tail)\n" << stack_->LogTail("scheduler.log");
      for (int i = 0; i < 3; ++i) {
        std::string t = stack_->LogTail(absl::StrCat("worker-", i, ".log"));
        if (!t.empty()) std::cerr << "---- worker-" << i << ".log (tail)\n" << t;
      }
    }
    stack_.reset();
  }

  // Submits; returns the sweep id.
  std::string Submit(const std::string& yaml) {
    absl::StatusOr<parity::v1::SweepSpec> spec =
        core::ParseSweepSpec(yaml, core::SpecFormat::kYaml);
    EXPECT_TRUE(spec.ok()) << spec.status();
    parity::v1::SubmitSweepRequest req;
    *req.mutable_spec() = *spec;
    req.set_owner("e2e");
    parity::v1::SubmitSweepResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    grpc::Status s = stack_->sweeps().SubmitSweep(&ctx, req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return resp.sweep().sweep_id();
  }

  std::vector<parity::v1::Run> Runs(const std::string& sweep_id) {
    parity::v1::ListRunsRequest req;
    req.set_sweep_id(sweep_id);
    req.set_page_size(500);
    parity::v1::ListRunsResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    if (!stack_->sweeps().ListRuns(&ctx, req, &resp).ok()) return {};
    return {resp.runs().begin(), resp.runs().end()};
  }

  parity::v1::SweepState SweepState(const std::string& sweep_id) {
    parity::v1::GetSweepRequest req;
    req.set_sweep_id(sweep_id);
    parity::v1::GetSweepResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    if (!stack_->sweeps().GetSweep(&ctx, req, &resp).ok())
      return parity::v1::SWEEP_STATE_UNSPECIFIED;
    return resp.sweep().state();
  }

  bool WaitSweepEnded(const std::string& sweep_id, absl::Duration timeout) {
    return WaitUntil(
        [&] {
          parity::v1::SweepState s = SweepState(sweep_id);
          return s != parity::v1::SWEEP_STATE_ACTIVE && s != parity::v1::SWEEP_STATE_UNSPECIFIED;
        },
        timeout);
  }

  // Waits until some run of the sweep is RUNNING with at least `min_step` reported.
  bool WaitRunning(const std::string& sweep_id, uint64_t min_step, absl::Duration timeout,
                   bool need_checkpoint = false) {
    return WaitUntil(
        [&] {
          for (const parity::v1::Run& r : Runs(sweep_id)) {
            if (r.state() == parity::v1::RUN_STATE_RUNNING && r.latest_step() >= min_step &&
                (!need_checkpoint || r.checkpoint().step() > 0)) {
              return true;
            }
          }
          return false;
        },
        timeout);
  }

  // Every (run, step) of the sweep's metrics: count per step must be 1, and a finished run's
  // steps must reach its summary's step count.
  void ExpectMetricsOncePerStep(const std::vector<parity::v1::Run>& runs) {
    for (const parity::v1::Run& r : runs) {
      absl::StatusOr<std::vector<std::string>> dup =
          stack_->Query(absl::StrCat("SELECT step FROM metrics WHERE run_id = '", r.run_id(),
                                     "' GROUP BY step HAVING count(*) > 1"));
      ASSERT_TRUE(dup.ok()) << dup.status();
      EXPECT_TRUE(dup->empty()) << "run " << r.run_id() << " has steps stored twice";
      absl::StatusOr<std::vector<std::string>> max = stack_->Query(absl::StrCat(
          "SELECT coalesce(max(step), 0) FROM metrics WHERE run_id = '", r.run_id(), "'"));
      ASSERT_TRUE(max.ok() && !max->empty());
      if (r.state() == parity::v1::RUN_STATE_SUCCEEDED) {
        EXPECT_EQ(std::stoull((*max)[0]), r.summary().steps())
            << "the last step's metrics must be stored";
      }
      // No hole: consecutive stored steps are at most one logging interval apart, from the first.
      const uint64_t every = std::max<uint64_t>(1, r.spec().training().log_every_steps());
      absl::StatusOr<std::vector<std::string>> holes = stack_->Query(absl::StrCat(
          "SELECT 'holes: ' || coalesce(string_agg(prev || '..' || step, ', '), 'none') FROM "
          "(SELECT step, coalesce(lag(step) OVER (ORDER BY step), 0) AS prev FROM metrics "
          "WHERE run_id = '",
          r.run_id(), "') g WHERE step - prev > ", every));
      ASSERT_TRUE(holes.ok() && !holes->empty()) << holes.status();
      EXPECT_EQ((*holes)[0], "holes: none")
          << "run " << r.run_id() << " (" << r.spec().name()
          << ") has holes in its curve (stored step..next stored step)";
    }
  }

  // A raw byte file has one evaluation set, "validation": through engine, worker, scheduler and
  // the results view, each run's per-set finals are that set alone with the primary's value, and
  // every stored point's per-set BPC agrees with its val_bpc. (Several named sets, from a
  // prepared dataset, are checked by PreparedDatasetE2ETest.)
  void ExpectOneEvaluationSet(const std::string& sweep) {
    grpc::ClientContext ctx;
    parity::v1::QueryResultsRequest query;
    query.mutable_filter()->set_sweep_id(sweep);
    parity::v1::QueryResultsResponse results;
    ASSERT_TRUE(stack_->sweeps().QueryResults(&ctx, query, &results).ok());
    ASSERT_FALSE(results.rows().empty());
    for (const parity::v1::ResultRow& row : results.rows()) {
      // The engine names its one set of a raw byte file "validation" and reports it on every
      // evaluation and in the summary, with the digest of the file it trained on.
      ASSERT_EQ(row.final_eval_bpc_size(), 1) << row.name() << ": expected the set 'validation'";
      EXPECT_EQ(row.final_eval_bpc().begin()->first, "validation") << row.name();
      EXPECT_DOUBLE_EQ(row.final_eval_bpc().at("validation"), row.final_val_bpc()) << row.name();
    }
    absl::StatusOr<std::vector<std::string>> disagreeing = stack_->Query(
        "SELECT count(*) FROM metrics m JOIN runs r USING (run_id) WHERE r.sweep_id = '" + sweep +
        "' AND m.eval_bpc IS NOT NULL AND (m.eval_bpc - 'validation' <> '{}'::jsonb OR "
        "(m.eval_bpc ->> 'validation')::float8 IS DISTINCT FROM m.val_bpc)");
    ASSERT_TRUE(disagreeing.ok()) << disagreeing.status();
    EXPECT_EQ(disagreeing->front(), "0") << "points whose per-set BPC is not their val_bpc alone";
    absl::StatusOr<std::vector<std::string>> missing = stack_->Query(
        "SELECT count(*) FROM metrics m JOIN runs r USING (run_id) WHERE r.sweep_id = '" + sweep +
        "' AND m.val_bpc IS NOT NULL AND m.eval_bpc IS NULL");
    ASSERT_TRUE(missing.ok()) << missing.status();
    EXPECT_EQ(missing->front(), "0") << "evaluation points without their per-set BPC";
  }

  // Waits up to 30 s for a live worker to report dataset `name` in a form `wanted` accepts.
  bool WaitForHolding(const std::string& name,
                      const std::function<bool(const parity::v1::DatasetHolding&)>& wanted) {
    return WaitUntil(
        [&] {
          parity::v1::ListWorkersRequest req;
          parity::v1::ListWorkersResponse resp;
          grpc::ClientContext ctx;
          ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
          if (!stack_->sweeps().ListWorkers(&ctx, req, &resp).ok()) return false;
          for (const parity::v1::Worker& w : resp.workers()) {
            for (const parity::v1::DatasetHolding& d : w.datasets()) {
              if (d.name() == name && wanted(d)) return true;
            }
          }
          return false;
        },
        absl::Seconds(30));
  }

  fs::path root_;
  std::unique_ptr<LocalStack> stack_;
};

TEST_F(WorkerE2ETest, SmallSweepCompletesOnTwoWorkers) {
  // The micro study's shape: 4 MoE points and dense 1C/2C, two seeds = 12 runs.
  const std::string sweep =
      Submit(SweepYaml("e2e-small", 4, /*baselines=*/true, "2e10", /*seeds=*/2));
  ASSERT_FALSE(sweep.empty());
  ASSERT_TRUE(stack_->StartWorker(0).ok());
  ASSERT_TRUE(stack_->StartWorker(1).ok());
  ASSERT_TRUE(WaitSweepEnded(sweep, absl::Minutes(6))) << "sweep did not finish";
  std::vector<parity::v1::Run> runs = Runs(sweep);
  ASSERT_EQ(runs.size(), 12u);
  for (const parity::v1::Run& r : runs) {
    EXPECT_EQ(r.state(), parity::v1::RUN_STATE_SUCCEEDED)
        << r.spec().name() << ": " << r.failure().message();
    EXPECT_GT(r.summary().final_val_bpc(), 0) << r.spec().name();
    EXPECT_GT(r.spec().accounting().params(), 0u) << r.spec().name() << ": accounting missing";
    EXPECT_EQ(r.summary().tokens(), r.spec().accounting().tokens())
        << r.spec().name() << ": the engine consumes exactly the planned D";
  }
  EXPECT_EQ(SweepState(sweep), parity::v1::SWEEP_STATE_SUCCEEDED);
  ExpectMetricsOncePerStep(runs);
  ExpectOneEvaluationSet(sweep);

  // Retention: a finished run keeps only the checkpoint of its result on the disk.
  const fs::path checkpoints = root_ / "checkpoints";
  for (const parity::v1::Run& r : runs) {
    std::vector<std::string> files;
    std::error_code ec;
    for (fs::recursive_directory_iterator it(checkpoints / r.run_id(), ec), end; !ec && it != end;
         it.increment(ec)) {
      if (it->is_regular_file()) files.push_back(it->path().string());
    }
    ASSERT_FALSE(r.checkpoint().uri().empty()) << r.spec().name() << ": no final checkpoint";
    EXPECT_TRUE(r.checkpoint().uri().starts_with(r.run_id() + "/"))
        << r.checkpoint().uri() << ": a URI relative to the store, in the run's prefix";
    EXPECT_EQ(files, std::vector<std::string>{(checkpoints / r.checkpoint().uri()).string()})
        << r.spec().name() << ": only the final checkpoint should be left";
  }

  // Deleting the sweep deletes its checkpoints at the workers' next retention pass (at start).
  grpc::ClientContext ctx;
  parity::v1::DeleteSweepRequest remove;
  remove.set_sweep_id(sweep);
  parity::v1::DeleteSweepResponse removed;
  ASSERT_TRUE(stack_->sweeps().DeleteSweep(&ctx, remove, &removed).ok());
  EXPECT_EQ(removed.deleted_runs(), 12u);
  stack_->StopWorker(0);
  ASSERT_TRUE(stack_->StartWorker(0).ok());
  const auto run_dirs_left = [&] {
    int left = 0;
    std::error_code ec;
    for (const parity::v1::Run& r : runs) left += fs::exists(checkpoints / r.run_id(), ec);
    return left;
  };
  EXPECT_TRUE(WaitUntil([&] { return run_dirs_left() == 0; }, absl::Seconds(30)))
      << run_dirs_left() << " run directories of the deleted sweep are left\n"
      << stack_->LogTail("worker-0.log");
}

// The whole file, or "<unreadable PATH>" so a comparison fails with the path in its message.
std::string ReadFileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "<unreadable " + path + ">";
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

TEST_F(WorkerE2ETest, KilledWorkerRunResumesFromItsCheckpoint) {
  const std::string compute = FakeEngine() ? "2e10" : "6e10";
  const std::string sweep = Submit(SweepYaml("e2e-kill", 1, /*baselines=*/false, compute));
  ASSERT_FALSE(sweep.empty());
  ASSERT_TRUE(stack_->StartWorker(0).ok());
  ASSERT_TRUE(WaitRunning(sweep, 1, absl::Minutes(3), /*need_checkpoint=*/true))
      << "no checkpoint reported";
  const uint64_t killed_at = Runs(sweep)[0].latest_step();
  stack_->KillWorker(0);  // kill -9 of the worker's group; its engine dies with it
  ASSERT_TRUE(stack_->StartWorker(1).ok());
  ASSERT_TRUE(WaitSweepEnded(sweep, absl::Minutes(6)));
  std::vector<parity::v1::Run> runs = Runs(sweep);
  ASSERT_EQ(runs.size(), 1u);
  const parity::v1::Run& resumed = runs[0];
  ASSERT_EQ(resumed.state(), parity::v1::RUN_STATE_SUCCEEDED) << resumed.failure().message();
  EXPECT_GE(resumed.attempt(), 2u) << "the run was leased again after the lease TTL";
  ExpectMetricsOncePerStep(runs);
  absl::StatusOr<std::vector<std::string>> second = stack_->Query(absl::StrCat(
      "SELECT min(step) FROM metrics WHERE run_id = '", resumed.run_id(), "' AND attempt >= 2"));
  ASSERT_TRUE(second.ok() && !second->empty());
  EXPECT_GT(std::stoull((*second)[0]), 1u)
      << "attempt 2 resumed from a checkpoint, not from step 1 (killed at " << killed_at << ")";

  // The same spec uninterrupted ends at exactly the same validation BPC (bit-identical resume).
  const std::string again = Submit(SweepYaml("e2e-kill-reference", 1, false, compute));
  ASSERT_TRUE(WaitSweepEnded(again, absl::Minutes(6)));
  std::vector<parity::v1::Run> ref = Runs(again);
  ASSERT_EQ(ref.size(), 1u);
  ASSERT_EQ(ref[0].state(), parity::v1::RUN_STATE_SUCCEEDED);
  EXPECT_EQ(ref[0].summary().final_val_bpc(), resumed.summary().final_val_bpc())
      << "resumed and uninterrupted runs of one spec must agree exactly";
  if (!FakeEngine()) {
    // And at exactly the same weights: the final checkpoints (weights, AdamW moments, data
    // cursor, RNG) are byte-identical.
    ASSERT_FALSE(ref[0].checkpoint().uri().empty());
    ASSERT_FALSE(resumed.checkpoint().uri().empty());
    const fs::path store = root_ / "checkpoints";
    EXPECT_EQ(ReadFileBytes((store / ref[0].checkpoint().uri()).string()),
              ReadFileBytes((store / resumed.checkpoint().uri()).string()))
        << "final checkpoints differ: " << ref[0].checkpoint().uri() << " vs "
        << resumed.checkpoint().uri();
  }
}

// An engine that exits 0 without its summary (the fake engine, told so) has produced nothing to
// plot: the run ends FAILED as INVALID_RESULT on its first attempt, not SUCCEEDED with zeros and
// not retried, and no result row carries a BPC.
TEST_F(WorkerE2ETest, AnEngineThatExitsZeroWithoutASummaryIsAnInvalidResult) {
#if PARITY_HAVE_TEST_SUPPORT
  stack_.reset();
  StackOptions options{.scheduler_bin = EnvOr("PARITY_E2E_SCHEDULER", PARITY_SCHEDULER_BIN),
                       .worker_bin = PARITY_WORKER_BIN,
                       .engine_bin = PARITY_FAKE_ENGINE};
  options.worker_env = {{"FAKE_STEP_MS", "5"}, {"FAKE_NO_SUMMARY", "1"}};
  fs::create_directories(root_ / "lying");
  absl::StatusOr<std::unique_ptr<LocalStack>> s = LocalStack::Start(
      options, parity::testing::PostgresEnvironment::FreshDatabase(), (root_ / "lying").string());
  ASSERT_TRUE(s.ok()) << s.status();
  stack_ = std::move(*s);
  const std::string sweep = Submit(SweepYaml("e2e-no-summary", 1, /*baselines=*/false, "2e10"));
  ASSERT_FALSE(sweep.empty());
  ASSERT_TRUE(stack_->StartWorker(0).ok());
  ASSERT_TRUE(WaitSweepEnded(sweep, absl::Minutes(3))) << "sweep did not end";
  for (const parity::v1::Run& r : Runs(sweep)) {
    EXPECT_EQ(r.state(), parity::v1::RUN_STATE_FAILED) << r.spec().name();
    EXPECT_EQ(r.failure_class(), parity::v1::FAILURE_CLASS_INVALID_RESULT) << r.spec().name();
    EXPECT_EQ(r.attempt(), 1u) << r.spec().name() << ": an invalid result must not be retried";
    EXPECT_FALSE(r.has_summary()) << r.spec().name();
  }
  absl::StatusOr<std::vector<std::string>> with_bpc =
      stack_->Query("SELECT count(*) FROM results WHERE final_val_bpc IS NOT NULL");
  ASSERT_TRUE(with_bpc.ok()) << with_bpc.status();
  EXPECT_EQ(*with_bpc, std::vector<std::string>{"0"});
#endif
}

// A dataset is a name the worker resolves in its --corpus-dir (issue #23). A path is refused at
// submission, naming the field and the remedy; nothing is stored.
TEST_F(WorkerE2ETest, ADatasetPathIsRefusedAtSubmission) {
  for (const std::string& corpus :
       std::vector<std::string>{"../../etc/passwd", "/etc/passwd", "/dev/zero"}) {
    absl::StatusOr<parity::v1::SweepSpec> spec = core::ParseSweepSpec(
        absl::StrReplaceAll(SweepYaml("e2e-path", 1, false, "2e10"),
                            {{"corpus: kjv", absl::StrCat("corpus: \"", corpus, "\"")}}),
        core::SpecFormat::kYaml);
    ASSERT_TRUE(spec.ok()) << spec.status();
    parity::v1::SubmitSweepRequest req;
    *req.mutable_spec() = *spec;
    parity::v1::SubmitSweepResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    const grpc::Status s = stack_->sweeps().SubmitSweep(&ctx, req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << corpus;
    EXPECT_NE(s.error_message().find("data.corpus"), std::string::npos) << s.error_message();
    EXPECT_NE(s.error_message().find("--corpus-dir"), std::string::npos) << s.error_message();
  }
  absl::StatusOr<std::vector<std::string>> runs = stack_->Query("SELECT count(*) FROM runs");
  ASSERT_TRUE(runs.ok()) << runs.status();
  EXPECT_EQ(*runs, std::vector<std::string>{"0"}) << "a refused sweep stores nothing";
}

// What validation cannot see: a name that is, on the worker, a link out of its --corpus-dir (to a
// file of the worker's, to a device) or nothing at all. The real worker refuses each before any
// engine starts; the run fails once, not retried, and its failure names no path and no size.
TEST_F(WorkerE2ETest, ADatasetThatIsNoPlainFileOnTheWorkerFailsWithoutTellingMore) {
  const fs::path corpus = root_ / "corpus";
  fs::create_symlink("/etc/passwd", corpus / "passwd.txt");
  fs::create_symlink("/dev/zero", corpus / "zero");
  std::map<std::string, std::string> sweeps;  // dataset name → sweep id
  for (const std::string& name : std::vector<std::string>{"passwd", "zero", "absent"}) {
    sweeps[name] =
        Submit(absl::StrReplaceAll(SweepYaml(absl::StrCat("e2e-dataset-", name), 1, false, "2e10"),
                                   {{"corpus: kjv", "corpus: " + name}}));
    ASSERT_FALSE(sweeps[name].empty());
  }
  ASSERT_TRUE(stack_->StartWorker(0).ok());
  for (const auto& [name, sweep] : sweeps) {
    ASSERT_TRUE(WaitSweepEnded(sweep, absl::Minutes(2))) << name << ": sweep did not end";
    for (const parity::v1::Run& r : Runs(sweep)) {
      EXPECT_EQ(r.state(), parity::v1::RUN_STATE_FAILED) << name;
      EXPECT_EQ(r.failure_class(), parity::v1::FAILURE_CLASS_USER_ERROR) << name;
      EXPECT_EQ(r.attempt(), 1u) << name << ": a dataset that is not there is not retried";
      const std::string told = r.failure().message();
      EXPECT_TRUE(told.starts_with(absl::StrCat("dataset '", name, "' not found on worker ")))
          << told;
      EXPECT_EQ(told.find('/'), std::string::npos) << "no path in: " << told;
      EXPECT_EQ(r.latest_step(), 0u) << name << ": nothing was trained";
    }
  }
  EXPECT_NE(ReadFileBytes((root_ / "worker-0.log").string()).find("symbolic link"),
            std::string::npos)
      << "the worker's log keeps the reason";
}

// Shell-quotes one argument.
std::string Quoted(const std::string& text) {
  std::string out = "'";
  for (const char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// With TLS on the scheduler's ports: the CLI makes a worker token and submits over TLS, a worker
// with that token (role worker) trains the sweep over TLS, the CLI reads it back; a plaintext
// CLI cannot reach the port at all.
TEST_F(WorkerE2ETest, TheCliAndAWorkerWithItsOwnTokenWorkOverTls) {
#if PARITY_HAVE_TEST_SUPPORT
  stack_.reset();
  StackOptions options{.scheduler_bin = EnvOr("PARITY_E2E_SCHEDULER", PARITY_SCHEDULER_BIN),
                       .worker_bin = PARITY_WORKER_BIN,
                       .engine_bin = EngineBinary()};
  options.worker_env = {{"FAKE_STEP_MS", "20"}};
  options.tls = true;
  fs::create_directories(root_ / "tls-stack");
  absl::StatusOr<std::unique_ptr<LocalStack>> s =
      LocalStack::Start(options, parity::testing::PostgresEnvironment::FreshDatabase(),
                        (root_ / "tls-stack").string());
  ASSERT_TRUE(s.ok()) << s.status();
  stack_ = std::move(*s);
  const std::string cli = PARITY_CLI_BIN;
  const std::string tls =
      absl::StrCat(" --scheduler ", stack_->address(), " --tls-ca ", Quoted(stack_->tls_ca_file()));
  const std::string admin = " --token-file " + Quoted(stack_->admin_token_file());
  const std::string root = stack_->root();
  const std::string worker_token = root + "/worker.token";
  ASSERT_EQ(
      std::system((Quoted(cli) + " token create --name e2e-worker --role worker" + tls + admin +
                   " --out " + Quoted(worker_token) + " 2> " + Quoted(root + "/cli.err"))
                      .c_str()),
      0)
      << ReadFileBytes(root + "/cli.err");
  const std::string spec_path = root + "/tls-sweep.yaml";
  std::ofstream(spec_path) << SweepYaml("e2e-tls", 1, /*baselines=*/false, "2e10");
  ASSERT_EQ(std::system((Quoted(cli) + " submit " + Quoted(spec_path) + tls + admin + " > " +
                         Quoted(root + "/submit.out") + " 2>&1")
                            .c_str()),
            0)
      << ReadFileBytes(root + "/submit.out");
  ASSERT_TRUE(stack_->StartWorker(0, worker_token).ok());
  absl::StatusOr<std::vector<std::string>> sweep_ids =
      stack_->Query("SELECT sweep_id FROM sweeps WHERE name = 'e2e-tls'");
  ASSERT_TRUE(sweep_ids.ok() && sweep_ids->size() == 1u);
  const std::string sweep = (*sweep_ids)[0];
  ASSERT_TRUE(WaitSweepEnded(sweep, absl::Minutes(3))) << "sweep did not finish over TLS";
  for (const parity::v1::Run& r : Runs(sweep)) {
    EXPECT_EQ(r.state(), parity::v1::RUN_STATE_SUCCEEDED) << r.spec().name();
  }
  EXPECT_EQ(std::system((Quoted(cli) + " status " + sweep + tls + admin + " > " +
                         Quoted(root + "/status.out") + " 2>&1")
                            .c_str()),
            0)
      << ReadFileBytes(root + "/status.out");
  EXPECT_NE(ReadFileBytes(root + "/status.out").find("SUCCEEDED"), std::string::npos);
  const int plaintext = std::system((Quoted(cli) + " status --timeout 3 --scheduler " +
                                     stack_->address() + admin + " > /dev/null 2>&1")
                                        .c_str());
  EXPECT_EQ(WEXITSTATUS(plaintext), 69) << "a plaintext CLI must not reach a TLS port";
#endif
}

TEST_F(WorkerE2ETest, CancelledSweepStopsWithinTwoHeartbeats) {
  const std::string sweep = Submit(SweepYaml("e2e-cancel", 2, /*baselines=*/false, "3e11"));
  ASSERT_FALSE(sweep.empty());
  ASSERT_TRUE(stack_->StartWorker(0).ok());
  ASSERT_TRUE(stack_->StartWorker(1).ok());
  ASSERT_TRUE(WaitUntil(
      [&] {
        int running = 0;
        for (const auto& r : Runs(sweep))
          running += r.state() == parity::v1::RUN_STATE_RUNNING && r.latest_step() > 0;
        return running == 2;
      },
      absl::Minutes(3)))
      << "both runs should be training";
  // Through the CLI, the sweep by name: it is CANCELLED at once, its training runs at their
  // workers' next heartbeat, which the CLI says; `parity watch` follows it until no run is live,
  // so that `parity delete` works right after it.
  const std::string cli = Quoted(PARITY_CLI_BIN);
  const std::string flags = absl::StrCat(" --scheduler ", stack_->address(), " --token-file ",
                                         Quoted(stack_->admin_token_file()));
  const std::string out = stack_->root() + "/cli.out";
  ASSERT_EQ(
      std::system((cli + " cancel e2e-cancel --reason e2e" + flags + " > " + Quoted(out) + " 2>&1")
                      .c_str()),
      0)
      << ReadFileBytes(out);
  const absl::Time cancelled = absl::Now();
  EXPECT_NE(ReadFileBytes(out).find("2 runs still training stop at their workers' next heartbeat"),
            std::string::npos)
      << "the CLI should say that the training runs stop later:\n"
      << ReadFileBytes(out);
  const int watched =
      std::system((cli + " watch " + sweep + flags + " > " + Quoted(out) + " 2>&1").c_str());
  EXPECT_EQ(WEXITSTATUS(watched), 4) << "a cancelled sweep's watch exits 4:\n"
                                     << ReadFileBytes(out);
  for (const parity::v1::Run& r : Runs(sweep)) {
    EXPECT_NE(r.state(), parity::v1::RUN_STATE_RUNNING)
        << r.spec().name() << " still running when `parity watch` returned:\n"
        << ReadFileBytes(out);
  }
  // Two heartbeats (500 ms each) for the workers to hear of it, then SIGTERM reaches the engine.
  ASSERT_TRUE(WaitUntil(
      [&] {
        for (const auto& r : Runs(sweep)) {
          if (r.state() != parity::v1::RUN_STATE_CANCELLED) return false;
        }
        return true;
      },
      absl::Seconds(2)))
      << "runs not CANCELLED within two heartbeats (500 ms each) plus a second of slack";
  // The engines stop: no metric step is written a little after that.
  absl::SleepFor(std::max(absl::ZeroDuration(), cancelled + absl::Seconds(3) - absl::Now()));
  const std::string q =
      "SELECT count(*) FROM metrics m JOIN runs r USING (run_id) WHERE r.sweep_id = '" + sweep +
      "'";
  absl::StatusOr<std::vector<std::string>> before = stack_->Query(q);
  absl::SleepFor(absl::Seconds(2));
  absl::StatusOr<std::vector<std::string>> after = stack_->Query(q);
  ASSERT_TRUE(before.ok() && after.ok()) << before.status() << after.status();
  EXPECT_EQ(*before, *after) << "metrics still arriving after the cancellation";
  // Two sweeps by name and by id prefix (here one sweep twice: every cell matches itself).
  EXPECT_EQ(std::system((cli + " compare e2e-cancel " + sweep.substr(0, 8) + flags + " > " +
                         Quoted(out) + " 2>&1")
                            .c_str()),
            0)
      << "compare takes a sweep's name and its id prefix:\n"
      << ReadFileBytes(out);
  EXPECT_EQ(std::system((cli + " delete " + sweep + flags + " > " + Quoted(out) + " 2>&1").c_str()),
            0)
      << "an ended sweep is deletable:\n"
      << ReadFileBytes(out);
}

TEST_F(WorkerE2ETest, SweepSurvivesASchedulerRestart) {
  const std::string sweep = Submit(SweepYaml("e2e-restart", 1, /*baselines=*/true, "1e11"));
  ASSERT_TRUE(stack_->StartWorker(0).ok());
  ASSERT_TRUE(stack_->StartWorker(1).ok());
  ASSERT_TRUE(WaitRunning(sweep, 1, absl::Minutes(3)));
  stack_->StopScheduler();
  absl::SleepFor(absl::Seconds(2));
  ASSERT_TRUE(stack_->StartScheduler().ok());
  ASSERT_TRUE(WaitSweepEnded(sweep, absl::Minutes(6)));
  std::vector<parity::v1::Run> runs = Runs(sweep);
  for (const auto& r : runs) {
    EXPECT_EQ(r.state(), parity::v1::RUN_STATE_SUCCEEDED)
        << r.spec().name() << ": " << r.failure().message();
  }
  ExpectMetricsOncePerStep(runs);
}

TEST_F(WorkerE2ETest, SweepSurvivesPostgresDownForTenSeconds) {
  const std::string sweep = Submit(SweepYaml("e2e-pgdown", 1, /*baselines=*/true, "1e11"));
  ASSERT_TRUE(stack_->StartWorker(0).ok());
  ASSERT_TRUE(stack_->StartWorker(1).ok());
  ASSERT_TRUE(WaitRunning(sweep, 1, absl::Minutes(3)));
  ASSERT_TRUE(stack_->StopPostgres().ok());
  absl::SleepFor(absl::Seconds(10));
  absl::Status started = stack_->StartPostgres();
  ASSERT_TRUE(started.ok()) << started;
  ASSERT_TRUE(WaitSweepEnded(sweep, absl::Minutes(6)));
  std::vector<parity::v1::Run> runs = Runs(sweep);
  for (const auto& r : runs) {
    EXPECT_EQ(r.state(), parity::v1::RUN_STATE_SUCCEEDED)
        << r.spec().name() << ": " << r.failure().message();
  }
  ExpectMetricsOncePerStep(runs);
}

// Every worker trains on the same data (issue #24). A worker reports the prepared dataset it
// verified at start; a sweep submitted without a digest is pinned to that copy, and its runs go
// only to workers that hold it. When the copy is then altered under a running worker (one byte
// of a shard, size kept), the worker verifies it again before training and refuses the run:
// FAILED as DATA_MISMATCH after exactly one attempt, no engine started, and a message naming the
// dataset, the worker, the shard and the remedy, but no path.
TEST_F(WorkerE2ETest, AWorkerWithATamperedShardRefusesTheRunWithItsClass) {
  const fs::path corpus = root_ / "corpus";
  absl::StatusOr<std::string> digest = datasets::testing::WriteTestDataset(corpus.string(), {});
  ASSERT_TRUE(digest.ok()) << digest.status();
  ASSERT_TRUE(stack_->StartWorker(0).ok());
  ASSERT_TRUE(WaitForHolding("tiny", [&](const parity::v1::DatasetHolding& d) {
    return d.digest() == *digest && d.train_tokens() == 128;
  })) << "the worker should report the dataset it verified";
  // Altered under the running worker (before its start, the copy would fail the start-up
  // verification: the worker would not report it and would never be handed the pinned run), the
  // copy it reported is checked again before the run.
  {
    std::fstream shard(corpus / "tiny" / "train-00001.tok",
                       std::ios::in | std::ios::out | std::ios::binary);
    shard.seekp(5);
    shard.put('\x42');
  }
  const std::string sweep =
      Submit(absl::StrReplaceAll(SweepYaml("e2e-tampered", 1, /*baselines=*/false, "2e10"),
                                 {{"corpus: kjv", "corpus: tiny"}}));
  ASSERT_FALSE(sweep.empty());
  ASSERT_TRUE(WaitSweepEnded(sweep, absl::Minutes(2))) << "sweep did not end";
  for (const parity::v1::Run& r : Runs(sweep)) {
    EXPECT_EQ(r.spec().data().dataset_digest(), *digest) << "pinned at submission";
    EXPECT_EQ(r.state(), parity::v1::RUN_STATE_FAILED);
    EXPECT_EQ(r.failure_class(), parity::v1::FAILURE_CLASS_DATA_MISMATCH) << r.failure().message();
    EXPECT_EQ(r.attempt(), 1u) << "a mismatched copy is not retried";
    EXPECT_EQ(r.latest_step(), 0u) << "nothing was trained";
    const std::string told = r.failure().message();
    EXPECT_TRUE(told.starts_with("dataset 'tiny' on worker ")) << told;
    EXPECT_NE(told.find("train-00001.tok differs from its manifest"), std::string::npos) << told;
    EXPECT_NE(told.find("re-copy the dataset"), std::string::npos) << told;
    EXPECT_EQ(told.find(root_.string()), std::string::npos) << "no path in: " << told;
  }
}

// Issue #24 end to end: text → `parity data tokenizer train` (a real SentencePiece BPE) →
// `parity data prepare` with a second evaluation set from other text → a worker that verifies
// and reports it → a sweep pinned to its digest → the real engine reading the shards by memory
// map → BPC per evaluation set on every evaluation, in the summary, the results view and the
// per-set analysis, with the digest each run trained on.
TEST_F(WorkerE2ETest, APreparedDatasetWithATokenizerReportsEveryEvaluationSet) {
  if (FakeEngine()) GTEST_SKIP() << "needs parity-train (the fake engine reads no dataset)";
  const fs::path text = root_ / "text";
  fs::create_directories(text / "train");
  const std::string prose = SyntheticCorpus(600 << 10);
  for (int i = 0; i < 60; ++i) {  // 60 documents: the document-level split holds some back
    std::ofstream(text / "train" / absl::StrCat("doc-", 10 + i, ".txt"))
        << prose.substr(static_cast<size_t>(i) * 10240, 10240);
  }
  std::string code;
  for (int i = 0; i < 4000; ++i) {
    absl::StrAppend(&code, "int f", i % 97, "(int x) { return x * ", i % 13, " + 1; }\n");
  }
  std::ofstream(text / "code.txt") << code;
  const std::string cli = Quoted(PARITY_CLI_BIN);
  const std::string log = Quoted((root_ / "data-cli.log").string());
  const auto run = [&](const std::string& args) {
    return std::system((cli + " " + args + " >> " + log + " 2>&1").c_str());
  };
  ASSERT_EQ(run("data tokenizer train " + Quoted((text / "train").string()) + " --out " +
                Quoted((root_ / "tok" / "bpe.model").string()) +
                " --vocab-size 320 --sample-bytes 2000000 -j 1"),
            0)
      << ReadFileBytes((root_ / "data-cli.log").string());
  ASSERT_EQ(run("data prepare " + Quoted((text / "train").string()) + " --out " +
                Quoted((root_ / "corpus").string()) + " --name mix --tokenizer " +
                Quoted((root_ / "tok" / "bpe.model").string()) + " --eval code=" +
                Quoted((text / "code.txt").string()) + " --validation-fraction 0.1 -j 1"),
            0)
      << ReadFileBytes((root_ / "data-cli.log").string());
  const std::string digest_out = (root_ / "digest.out").string();
  ASSERT_EQ(std::system((cli + " data digest " + Quoted((root_ / "corpus" / "mix").string()) +
                         " > " + Quoted(digest_out))
                            .c_str()),
            0);
  std::string digest = ReadFileBytes(digest_out);
  digest.erase(digest.find_last_not_of(" \n") + 1);
  ASSERT_EQ(digest.size(), 64u) << digest;

  ASSERT_TRUE(stack_->StartWorker(0).ok());
  ASSERT_TRUE(WaitForHolding("mix", [&](const parity::v1::DatasetHolding& d) {
    return d.digest() == digest && d.vocab_size() == 320;
  })) << "the worker should report the prepared dataset with its digest and vocabulary";
  const std::string sweep = Submit(absl::StrReplaceAll(
      SweepYaml("e2e-eval-sets", 1, /*baselines=*/true, "2e10"),
      {{"corpus: kjv", "corpus: mix"},
       {"moe:\n  d_model: 64", "moe:\n  vocab_size: 320\n  d_model: 64"},
       {"dense:\n  d_model: 128", "dense:\n  vocab_size: 320\n  d_model: 128"}}));
  ASSERT_FALSE(sweep.empty());
  ASSERT_TRUE(WaitSweepEnded(sweep, absl::Minutes(4))) << stack_->LogTail("worker-0");
  for (const parity::v1::Run& r : Runs(sweep)) {
    ASSERT_EQ(r.state(), parity::v1::RUN_STATE_SUCCEEDED)
        << r.spec().name() << ": " << r.failure().message();
    EXPECT_EQ(r.spec().data().dataset_digest(), digest) << "pinned at submission";
    EXPECT_EQ(r.summary().dataset_digest(), digest) << "what the engine read";
    ASSERT_EQ(r.summary().final_eval_bpc_size(), 2) << r.summary().DebugString();
    EXPECT_DOUBLE_EQ(r.summary().final_eval_bpc().at("validation"), r.summary().final_val_bpc());
    // Code this regular is far easier than prose once learned: different sets, different BPC.
    EXPECT_NE(r.summary().final_eval_bpc().at("code"), r.summary().final_val_bpc());
  }
  grpc::ClientContext ctx;
  parity::v1::QueryResultsRequest query;
  query.mutable_filter()->set_sweep_id(sweep);
  parity::v1::QueryResultsResponse results;
  ASSERT_TRUE(stack_->sweeps().QueryResults(&ctx, query, &results).ok());
  ASSERT_EQ(results.rows_size(), 3);
  for (const parity::v1::ResultRow& row : results.rows()) {
    EXPECT_EQ(row.dataset_digest(), digest) << row.name();
    EXPECT_TRUE(row.final_eval_bpc().contains("code")) << row.name();
    if (row.role() == parity::v1::RUN_ROLE_MOE) {
      EXPECT_TRUE(row.delta_eval_bpc_vs_dense().contains("code")) << "ΔBPC on 'code' vs dense 1C";
    }
  }
  absl::StatusOr<std::vector<std::string>> points = stack_->Query(
      "SELECT count(*) FROM metrics m JOIN runs r USING (run_id) WHERE r.sweep_id = '" + sweep +
      "' AND m.val_bpc IS NOT NULL AND NOT (m.eval_bpc ? 'validation' AND m.eval_bpc ? 'code')");
  ASSERT_TRUE(points.ok()) << points.status();
  EXPECT_EQ(points->front(), "0") << "evaluation points without both sets";
  grpc::ClientContext analyze_ctx;
  parity::v1::AnalyzeSweepRequest analyze;
  analyze.set_sweep_id(sweep);
  analyze.set_eval_set("code");
  parity::v1::AnalyzeSweepResponse analysis;
  const grpc::Status analyzed = stack_->sweeps().AnalyzeSweep(&analyze_ctx, analyze, &analysis);
  ASSERT_TRUE(analyzed.ok()) << analyzed.error_message();
  EXPECT_EQ(analysis.eval_set(), "code");
}

}  // namespace
}  // namespace parity::e2e
