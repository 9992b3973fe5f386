// Gangs (issue #27) that go wrong, with the real binaries: a throwaway PostgreSQL, the real
// parity-scheduler, parity-worker processes and parity-train (gang_fixture.h). The issue's
// "What must hold" cases not covered by gang_e2e_test.cc:
//   - a gang that cannot be placed whole is not started and holds nothing (no slot, no engine,
//     no lease), the workers go on taking ordinary runs, and it is placed and trains once the
//     fleet fits;
//   - a rank that never checks in: the gang is failed at its rendezvous deadline (slots freed,
//     every started rank stopped, the failure recorded as INFRASTRUCTURE, requeued as a
//     preemption: no attempt spent) and trains once every rank comes up;
//   - a stale rank of an old gang epoch is refused, with FAILED_PRECONDITION / LEASE_EPOCH, at
//     the rendezvous and on every write (heartbeat, metrics, completion) through real gRPC, while
//     the gang of the new epoch trains undisturbed; and a parity-train rank of the old epoch is
//     refused by a rendezvous store of the new one (given its address and token), which then
//     forms with a rank of its own epoch.
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "gtest/gtest.h"
#include "tests/e2e/gang_fixture.h"
#include "worker/child_process.h"

namespace parity::e2e {
namespace {

namespace fs = std::filesystem;

// --- A gang that cannot be placed whole ------------------------------------------------------

// Two workers of one thread. The reservation wait is 1 s, so the test also states the policy past
// it: a gang the live fleet could never host reserves no one (docs/architecture.md "Gangs").
class GangPlacementE2ETest : public GangStackTest {
 protected:
  void Configure(StackOptions& options) const override {
    options.scheduler_env = {{"PARITY_GANG_RESERVATION_AFTER", "1s"}};
  }
};

TEST_F(GangPlacementE2ETest, AGangThatCannotBePlacedWholeHoldsNothingUntilTheFleetFits) {
  const std::string gang_sweep = stack_->Submit(GangSweepYaml("gang4", 4, "1e9", 4));
  ASSERT_FALSE(gang_sweep.empty());
  absl::SleepFor(absl::Seconds(2));  // eligible past the reservation wait
  const v1::Run small =
      WaitForEnd(stack_->Submit(GangSweepYaml("small", 1, "1e9")), absl::Minutes(6));
  ASSERT_EQ(small.state(), v1::RUN_STATE_SUCCEEDED) << small.failure().message();
  const std::vector<v1::Run> runs = stack_->Runs(gang_sweep);
  ASSERT_EQ(runs.size(), 1u);
  const std::string id = runs[0].run_id();
  EXPECT_EQ(runs[0].state(), v1::RUN_STATE_PENDING);
  // Never placed: no slot, no rendezvous, no lease epoch, no state but PENDING, no engine.
  EXPECT_EQ(One(absl::StrCat("SELECT count(*) FROM gang_slots WHERE run_id = '", id, "'")), "0");
  EXPECT_EQ(One(absl::StrCat("SELECT count(*) FROM gang_rendezvous WHERE run_id = '", id, "'")),
            "0");
  EXPECT_EQ(One(absl::StrCat("SELECT lease_epoch || ' ' || coalesce(lease_owner::text, 'none') "
                             "FROM runs WHERE run_id = '",
                             id, "'")),
            "0 none");
  EXPECT_EQ(One(absl::StrCat("SELECT count(*) FROM events WHERE run_id = '", id,
                             "' AND to_state <> 'PENDING'")),
            "0");
  EXPECT_EQ(WorkersWithRank(id, 2), 0) << "a worker started a rank of an unplaced gang";
  for (int rank = 0; rank < 4; ++rank) EXPECT_EQ(RankPid(id, rank), -1) << "rank " << rank;
  // The small run was leased past the gang's reservation wait, and not reserved away from it.
  EXPECT_EQ(One(absl::StrCat("SELECT (min(e.created_at) - r.created_at > interval '1 second') "
                             "FROM events e, runs r WHERE e.run_id = '",
                             small.run_id(), "' AND e.to_state = 'LEASED' AND r.run_id = '", id,
                             "' GROUP BY r.created_at")),
            "t");
  // Both idle workers are candidates in the gang pool, and still no slot is written.
  EXPECT_TRUE(WaitUntil(
      [&] {
        return One("SELECT count(*) FROM gang_waiting_workers WHERE waiting_until > now()") == "2";
      },
      absl::Seconds(20)))
      << "the workers are not waiting for gangs";
  absl::SleepFor(absl::Seconds(2));
  EXPECT_EQ(One("SELECT count(*) FROM gang_slots"), "0");
  EXPECT_EQ(stack_->Runs(gang_sweep).at(0).state(), v1::RUN_STATE_PENDING);
  // Two more workers: the gang fits, is placed whole across all four and trains.
  ASSERT_TRUE(stack_->StartWorker(2).ok());
  ASSERT_TRUE(stack_->StartWorker(3).ok());
  const v1::Run gang = WaitForEnd(gang_sweep, absl::Minutes(6));
  ASSERT_EQ(gang.state(), v1::RUN_STATE_SUCCEEDED) << gang.failure().message();
  EXPECT_EQ(gang.attempt(), 1u);
  EXPECT_EQ(WorkersWithRank(id, 4), 4);
  ExpectWholeCurve(gang);
}

// --- A rank that never checks in ---------------------------------------------------------------

// The workers' engine is a script: rank 0 of the gang's first placement never gets ready (it
// never prints its rendezvous line, as an engine stuck in its start-up would), so rank 0 never
// checks in; every later start is the real parity-train. The rendezvous deadline is 8 s.
class GangRendezvousTimeoutE2ETest : public GangStackTest {
 protected:
  static constexpr const char* kStalled = "stalled-engine.sh";

  void Configure(StackOptions& options) const override {
    const fs::path script = root_ / kStalled;
    std::ofstream(script) << "#!/bin/sh\n"
                          << "case \" $* \" in\n"
                          << "  *\" --rank 0 \"*)\n"
                          << "    if mkdir \"$0.stalled\" 2>/dev/null; then\n"
                          << "      while :; do sleep 1; done\n"
                          << "    fi ;;\n"
                          << "esac\n"
                          << "exec '" << PARITY_TRAIN_BIN << "' \"$@\"\n";
    fs::permissions(script, fs::perms::owner_all);
    options.engine_bin = script.string();
    options.scheduler_env = {{"PARITY_GANG_RENDEZVOUS_TIMEOUT", "8s"}};
  }
};

TEST_F(GangRendezvousTimeoutE2ETest, ARankThatNeverChecksInFailsTheGangAtItsDeadline) {
  const std::string sweep = stack_->Submit(GangSweepYaml("stalled", 2, "1e9"));
  std::string id;
  pid_t stalled = -1;
  ASSERT_TRUE(WaitUntil(
      [&] {
        const std::vector<v1::Run> runs = stack_->Runs(sweep);
        if (runs.size() != 1) return false;
        id = runs[0].run_id();
        stalled = RankPid(id, 0, kStalled);
        return stalled > 0;
      },
      absl::Minutes(3)))
      << "rank 0's engine was never started";
  const std::string epoch =
      One(absl::StrCat("SELECT lease_epoch FROM runs WHERE run_id = '", id, "'"));
  // Waiting on rank 0 alone: rank 1's worker checks in (and starts nothing until the release).
  ASSERT_TRUE(WaitUntil(
      [&] {
        return One(absl::StrCat("SELECT string_agg(rank || ':' || (checked_in_at IS NOT NULL), ' '"
                                " ORDER BY rank) FROM gang_slots WHERE run_id = '",
                                id, "' AND lease_epoch = ", epoch)) == "0:false 1:true";
      },
      absl::Seconds(30)));
  EXPECT_EQ(RankPid(id, 1), -1) << "a follower's rank started before the release";
  const std::string timed_out = absl::StrCat(
      "SELECT count(*) FROM events WHERE run_id = '", id, "' AND lease_epoch = ", epoch,
      " AND from_state IN ('LEASED', 'RUNNING') AND to_state = 'PENDING' AND attempt = 1 AND "
      "reason = 'gang INFRASTRUCTURE: gang rendezvous timed out: ranks 0 never checked in'");
  ASSERT_TRUE(WaitUntil([&] { return One(timed_out) == "1"; }, absl::Seconds(60)))
      << "no rendezvous timeout recorded for epoch " << epoch;
  std::printf("rendezvous of epoch %s: placed to failed in %s s (deadline 8 s)\n", epoch.c_str(),
              One(absl::StrCat("SELECT round(extract(epoch FROM max(created_at) FILTER (WHERE "
                               "to_state = 'PENDING') - min(created_at))::numeric, 1) FROM events "
                               "WHERE run_id = '",
                               id, "' AND lease_epoch = ", epoch))
                  .c_str());
  // The epoch's slots and rendezvous are freed (a new placement holds a later epoch only).
  EXPECT_EQ(One(absl::StrCat("SELECT count(*) FROM gang_slots WHERE run_id = '", id,
                             "' AND lease_epoch <= ", epoch)),
            "0");
  EXPECT_EQ(One(absl::StrCat("SELECT count(*) FROM gang_rendezvous WHERE run_id = '", id,
                             "' AND lease_epoch <= ", epoch)),
            "0");
  // Rank 0's worker stops its engine within a couple of heartbeats of the refusal (500 ms each).
  const absl::Time failed = absl::Now();
  EXPECT_TRUE(
      WaitUntil([&] { return !fs::exists(absl::StrCat("/proc/", stalled)); }, absl::Seconds(15)))
      << "the stalled rank 0 (pid " << stalled << ") was not stopped";
  std::printf("rank 0's engine stopped %lld ms after the failure was seen\n",
              static_cast<long long>(absl::ToInt64Milliseconds(absl::Now() - failed)));
  // Both workers gave the epoch up as lost: rank 0's, and rank 1's (which stops waiting).
  EXPECT_TRUE(WaitUntil(
      [&] {
        int lost = 0;
        for (const char* log : {"worker-0.log", "worker-1.log"}) {
          std::ifstream in(root_ / log);
          const std::string text((std::istreambuf_iterator<char>(in)),
                                 std::istreambuf_iterator<char>());
          lost += text.find(absl::StrCat("run ", id, ": lease-lost")) != std::string::npos;
        }
        return lost == 2;
      },
      absl::Seconds(15)))
      << "a worker did not give up the failed epoch";
  // Requeued as a preemption: the attempt is not spent, the gang is placed again at once (the
  // first preemption has no backoff) and trains, rank 0 now the real engine.
  const v1::Run run = WaitForEnd(sweep, absl::Minutes(6));
  ASSERT_EQ(run.state(), v1::RUN_STATE_SUCCEEDED) << run.failure().message();
  EXPECT_EQ(run.attempt(), 1u);
  EXPECT_GE(run.preemptions(), 1u);
  EXPECT_GT(std::stoll(One(absl::StrCat("SELECT lease_epoch FROM runs WHERE run_id = '", id, "'"))),
            std::stoll(epoch) + 1)
      << "not placed again under a new epoch";
  EXPECT_EQ(WorkersWithRank(id, 2), 2);
  ExpectWholeCurve(run);
}

// --- A stale rank of an old epoch ---------------------------------------------------------------

// The FAILED_PRECONDITION / LEASE_EPOCH refusal (server/store/store_errors.h), or why not.
std::string Refusal(const grpc::Status& status) {
  if (status.ok()) return "accepted";
  google::rpc::Status details;
  google::rpc::PreconditionFailure failure;
  if (status.error_code() != grpc::StatusCode::FAILED_PRECONDITION ||
      !details.ParseFromString(status.error_details()) || details.details_size() != 1 ||
      !details.details(0).UnpackTo(&failure) || failure.violations_size() != 1) {
    return absl::StrCat("code ", status.error_code(), ": ", status.error_message());
  }
  return failure.violations(0).type();
}

// A gang rank's worker as the scheduler sees it: its id and what LeaseRun gave it.
struct TestWorker {
  std::string id;
  v1::LeaseRunResponse leased;
};

// No worker process at first: the test registers two workers of its own over the worker API,
// takes the gang's first epoch with them, fails it, and keeps their credentials.
class GangStaleEpochE2ETest : public GangStackTest {
 protected:
  int Workers() const override { return 0; }

  std::string Register(const std::string& name) {
    v1::RegisterWorkerRequest request;
    request.set_hostname(name);
    v1::Device* cpu = request.add_devices();
    cpu->set_kind(v1::DEVICE_KIND_CPU);
    cpu->set_threads(1);
    v1::RegisterWorkerResponse response;
    const grpc::Status status =
        stack_->worker_api().RegisterWorker(Deadline().get(), request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response.worker_id();
  }

  // Both test workers ask at once (a gang is placed over workers waiting together).
  void LeaseTogether(TestWorker& a, TestWorker& b) {
    auto lease = [this](TestWorker& w, grpc::Status& status) {
      v1::LeaseRunRequest request;
      request.set_worker_id(w.id);
      v1::Device* cpu = request.add_free_devices();
      cpu->set_kind(v1::DEVICE_KIND_CPU);
      cpu->set_threads(1);
      request.mutable_wait_time()->set_seconds(20);
      request.set_accepts_gangs(true);
      status = stack_->worker_api().LeaseRun(Deadline(40).get(), request, &w.leased);
    };
    grpc::Status sa, sb;
    std::thread ta([&] { lease(a, sa); });
    std::thread tb([&] { lease(b, sb); });
    ta.join();
    tb.join();
    EXPECT_TRUE(sa.ok()) << sa.error_message();
    EXPECT_TRUE(sb.ok()) << sb.error_message();
  }

  grpc::Status CheckIn(const TestWorker& w, int64_t epoch, v1::RendezvousResponse* out) {
    v1::CheckInRendezvousRequest request;
    request.set_run_id(w.leased.run().run_id());
    request.set_lease_epoch(epoch);
    request.set_worker_id(w.id);
    request.set_rank(w.leased.gang().ranks(0).rank());
    request.set_lease_secret(w.leased.lease_secret());
    return stack_->worker_api().CheckInRendezvous(Deadline().get(), request, out);
  }

  grpc::Status Post(const TestWorker& w, int64_t epoch, v1::RendezvousResponse* out) {
    v1::PostRendezvousRequest request;
    request.set_run_id(w.leased.run().run_id());
    request.set_lease_epoch(epoch);
    request.set_worker_id(w.id);
    request.set_address("127.0.0.1:1#0123456789abcdef0123456789abcdef");
    request.set_lease_secret(w.leased.lease_secret());
    return stack_->worker_api().PostRendezvous(Deadline().get(), request, out);
  }

  grpc::Status Heartbeat(const TestWorker& w, int64_t epoch) {
    v1::HeartbeatRequest request;
    request.set_worker_id(w.id);
    request.set_run_id(w.leased.run().run_id());
    request.set_lease_epoch(epoch);
    request.set_lease_secret(w.leased.lease_secret());
    v1::HeartbeatResponse response;
    return stack_->worker_api().Heartbeat(Deadline().get(), request, &response);
  }

  grpc::Status Metrics(const TestWorker& w, int64_t epoch) {
    v1::ReportMetricsRequest request;
    request.set_run_id(w.leased.run().run_id());
    request.set_lease_epoch(epoch);
    request.set_lease_secret(w.leased.lease_secret());
    v1::MetricPoint* point = request.add_points();
    point->set_step(1);
    point->set_train_bpc(99.0);  // no real curve has it: a stored stale point would show
    v1::ReportMetricsResponse response;
    return stack_->worker_api().ReportMetrics(Deadline().get(), request, &response);
  }

  grpc::Status Complete(const TestWorker& w, int64_t epoch, bool success) {
    v1::CompleteRunRequest request;
    request.set_run_id(w.leased.run().run_id());
    request.set_lease_epoch(epoch);
    request.set_lease_secret(w.leased.lease_secret());
    if (success) {
      request.mutable_success()->set_steps(1);
    } else {
      request.mutable_failure()->set_failure_class(v1::FAILURE_CLASS_INFRASTRUCTURE);
      request.mutable_failure()->mutable_status()->set_code(13);
      request.mutable_failure()->mutable_status()->set_message("rank 1 died (the test's worker)");
    }
    v1::CompleteRunResponse response;
    return stack_->worker_api().CompleteRun(Deadline().get(), request, &response);
  }
};

// The engine's side of the fence, with the run's own spec (`run_json`, as a worker wrote it):
// rank 0 of gang epoch `current` serves its rendezvous store; a rank 1 of epoch `stale`, given
// rank 0's address and token, is refused by the store and exits with the reason, and rank 0 is
// not formed by it; a rank 1 of epoch `current` then joins, and both train one step.
void ExpectAStaleRankRefusedByTheStore(const fs::path& dir, const std::string& run_json,
                                       int64_t current, int64_t stale) {
  fs::create_directories(dir);
  auto rank = [&](int r, int64_t epoch, const std::vector<std::string>& gang,
                  const std::string& token) {
    std::vector<std::string> argv = {
        PARITY_TRAIN_BIN,
        "--run",
        run_json,
        "--out",
        (dir / absl::StrCat("out-", r, "-", epoch)).string(),
        "--metrics",
        (dir / absl::StrCat("rank-", r, "-", epoch, ".jsonl")).string(),
        "--threads",
        "1",
        "--max-steps",
        "1",
        "--rank",
        absl::StrCat(r),
        "--world-size",
        "2",
        "--gang-epoch",
        absl::StrCat(epoch),
        "--rendezvous-timeout",
        "60"};
    argv.insert(argv.end(), gang.begin(), gang.end());
    std::vector<std::pair<std::string, std::string>> env;
    if (!token.empty()) env.emplace_back("PARITY_RENDEZVOUS_TOKEN", token);
    return worker::ChildProcess::Spawn(
        {.argv = argv,
         .env = env,
         .log_path = (dir / absl::StrCat("rank-", r, "-", epoch, ".log")).string(),
         .output_fd = 3});
  };
  auto lines = [&](int r, int64_t epoch) {
    std::ifstream in(dir / absl::StrCat("rank-", r, "-", epoch, ".jsonl"));
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  absl::StatusOr<std::unique_ptr<worker::ChildProcess>> rank0 =
      rank(0, current, {"--rendezvous-listen", "127.0.0.1"}, "");
  ASSERT_TRUE(rank0.ok()) << rank0.status();
  std::string address, token;
  const std::regex rendezvous(R"re("address":"([^"]+)".*"token":"([0-9a-f]+)")re");
  ASSERT_TRUE(WaitUntil(
      [&] {
        const std::string text = lines(0, current);
        std::smatch m;
        if (!std::regex_search(text, m, rendezvous)) return false;
        address = m[1].str();
        token = m[2].str();
        return true;
      },
      absl::Seconds(60)))
      << "rank 0 never reported its rendezvous store";
  absl::StatusOr<std::unique_ptr<worker::ChildProcess>> old =
      rank(1, stale, {"--rendezvous", address}, token);
  ASSERT_TRUE(old.ok()) << old.status();
  const std::optional<worker::ExitStatus> refused = (*old)->WaitFor(absl::Seconds(60));
  ASSERT_TRUE(refused.has_value()) << "the stale rank was not refused";
  EXPECT_FALSE(refused->success());
  EXPECT_NE(lines(1, stale).find(absl::StrCat("gang epoch ", current, "; the rank is of run")),
            std::string::npos)
      << lines(1, stale);
  EXPECT_FALSE((*rank0)->TryWait().has_value()) << "rank 0 gave up on a stale rank's visit";
  absl::StatusOr<std::unique_ptr<worker::ChildProcess>> fresh =
      rank(1, current, {"--rendezvous", address}, token);
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  const std::optional<worker::ExitStatus> joined = (*fresh)->WaitFor(absl::Seconds(120));
  const std::optional<worker::ExitStatus> led = (*rank0)->WaitFor(absl::Seconds(60));
  ASSERT_TRUE(joined.has_value() && led.has_value()) << "the gang of the current epoch hung";
  // --max-steps: one step, a checkpoint, exit 3 ("stopped at the step limit").
  EXPECT_EQ(joined->ToString(), led->ToString());
  EXPECT_EQ(led->code, 3) << led->ToString() << "\n" << lines(0, current);
  EXPECT_NE(lines(0, current).find("\"step\":1"), std::string::npos) << lines(0, current);
}

TEST_F(GangStaleEpochE2ETest, AStaleRankIsRefusedAtTheRendezvousAndOnEveryWrite) {
  const std::string sweep = stack_->Submit(GangSweepYaml("stale", 2, "3e10"));
  TestWorker a, b;
  a.id = Register("stale-a");
  b.id = Register("stale-b");
  LeaseTogether(a, b);
  ASSERT_TRUE(a.leased.has_gang() && b.leased.has_gang()) << "the gang was not placed on both";
  TestWorker& rank0 = a.leased.gang().ranks(0).rank() == 0 ? a : b;
  TestWorker& rank1 = &rank0 == &a ? b : a;
  ASSERT_EQ(rank1.leased.gang().ranks(0).rank(), 1u);
  const int64_t old_epoch = rank0.leased.gang().gang_epoch();
  ASSERT_EQ(rank1.leased.gang().gang_epoch(), old_epoch);
  const std::string id = rank0.leased.run().run_id();
  // Under the current epoch the same credentials are taken: the gang forms.
  v1::RendezvousResponse answer;
  ASSERT_EQ(Refusal(Heartbeat(rank0, old_epoch)), "accepted");
  ASSERT_EQ(Refusal(Heartbeat(rank1, old_epoch)), "accepted");
  ASSERT_EQ(Refusal(CheckIn(rank1, old_epoch, &answer)), "accepted");
  ASSERT_EQ(Refusal(Post(rank0, old_epoch, &answer)), "accepted");
  EXPECT_TRUE(answer.released());
  // Rank 1 dies: its worker reports the failure and the whole gang restarts under a new epoch.
  ASSERT_EQ(Refusal(Complete(rank1, old_epoch, /*success=*/false)), "accepted");
  EXPECT_EQ(One(absl::StrCat("SELECT state || ' ' || attempt || ' ' || (lease_epoch > ", old_epoch,
                             ") FROM runs WHERE run_id = '", id, "'")),
            "PENDING 2 true");
  EXPECT_EQ(One(absl::StrCat("SELECT count(*) FROM gang_slots WHERE run_id = '", id, "'")), "0");
  // Real workers take the gang again (after the retry's backoff) and train it.
  ASSERT_TRUE(stack_->StartWorker(0).ok());
  ASSERT_TRUE(stack_->StartWorker(1).ok());
  ASSERT_TRUE(WaitUntil(
      [&] {
        const std::vector<v1::Run> runs = stack_->Runs(sweep);
        return runs.size() == 1 && runs[0].state() == v1::RUN_STATE_RUNNING &&
               runs[0].latest_step() >= 1;
      },
      absl::Minutes(3)))
      << "the gang did not train again";
  const int64_t new_epoch =
      std::stoll(One(absl::StrCat("SELECT lease_epoch FROM runs WHERE run_id = '", id, "'")));
  ASSERT_GT(new_epoch, old_epoch + 1);
  // The old epoch's ranks, with their own secrets, are refused everywhere while it trains.
  EXPECT_EQ(Refusal(CheckIn(rank1, old_epoch, &answer)), "LEASE_EPOCH") << "CheckInRendezvous";
  EXPECT_EQ(Refusal(Post(rank0, old_epoch, &answer)), "LEASE_EPOCH") << "PostRendezvous";
  EXPECT_EQ(Refusal(Heartbeat(rank0, old_epoch)), "LEASE_EPOCH") << "Heartbeat of rank 0";
  EXPECT_EQ(Refusal(Heartbeat(rank1, old_epoch)), "LEASE_EPOCH") << "Heartbeat of rank 1";
  EXPECT_EQ(Refusal(Metrics(rank0, old_epoch)), "LEASE_EPOCH") << "ReportMetrics";
  EXPECT_EQ(Refusal(Complete(rank0, old_epoch, /*success=*/true)), "LEASE_EPOCH")
      << "CompleteRun (success)";
  EXPECT_EQ(Refusal(Complete(rank1, old_epoch, /*success=*/false)), "LEASE_EPOCH")
      << "CompleteRun (failure)";
  // The new epoch's gang is not disturbed: it ends once, whole, with no stale point stored.
  const v1::Run run = WaitForEnd(sweep, absl::Minutes(6));
  ASSERT_EQ(run.state(), v1::RUN_STATE_SUCCEEDED) << run.failure().message();
  EXPECT_EQ(run.attempt(), 2u);
  EXPECT_EQ(One(absl::StrCat("SELECT lease_epoch FROM runs WHERE run_id = '", id, "'")),
            absl::StrCat(new_epoch));
  EXPECT_EQ(One(absl::StrCat("SELECT count(*) FROM metrics WHERE run_id = '", id,
                             "' AND train_bpc = 99")),
            "0");
  ExpectWholeCurve(run);
  // And a rank process of the old epoch cannot join a gang's rendezvous store.
  std::string run_json;
  for (int w = 0; w < 2; ++w) {
    const fs::path json = root_ / absl::StrCat("work-", w) / id / "run-attempt2.json";
    if (fs::exists(json)) run_json = json.string();
  }
  ASSERT_FALSE(run_json.empty()) << "no worker kept the run's spec";
  ExpectAStaleRankRefusedByTheStore(root_ / "store", run_json, new_epoch, old_epoch);
}

}  // namespace
}  // namespace parity::e2e
