// What the scheduler and dashboard fuzz targets run against: MemoryRunStore (server/store/memory,
// the whole RunStore, held to the same contract suites as PostgreSQL) and a Scheduler over it,
// seeded with one small planned sweep in every state a page can show.
//
// Inputs name the seeded objects with placeholders (ExpandPlaceholders): "@sweep", "@run" (a
// SUCCEEDED run with metrics), "@run2" (a RUNNING run with metrics, lease epoch 1), "@pending"
// (a PENDING run) and "@worker". The ids are random per store, so corpora stay valid across
// processes only through these names.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "google/protobuf/message.h"
#include "server/scheduling/clock.h"
#include "server/scheduling/work_signal.h"
#include "server/store/memory/memory_run_store.h"
#include "tests/scheduler/scheduler_under_test.h"

namespace parity::fuzz {

// A store and a Scheduler (core::PlanSweep as its planner, a FakeClock, LeaseRun never waiting)
// with the seeded sweep. Made once per process (a Scheduler starts threads, which ASan makes
// slow); Reset() gives the next input the same state afresh (the plan is computed once).
class FuzzWorld {
 public:
  FuzzWorld();
  ~FuzzWorld();

  // A new store seeded as at construction; no call may be in flight.
  void Reset();

  server::testing::SchedulerUnderTest& scheduler() { return *scheduler_; }
  // The lease secret of @run2's lease (epoch 1): a write that leaves lease_secret empty is sent
  // with it, so that inputs reach past the holder check; one that sets another is refused there.
  const std::string& seeded_lease_secret() const { return seeded_lease_secret_; }
  template <typename Request>
  Request WithSeededSecret(const Request& request) const {
    Request copy = request;
    if (copy.lease_secret().empty()) copy.set_lease_secret(seeded_lease_secret_);
    return copy;
  }
  server::MemoryRunStore& store() { return *store_; }
  const server::FakeClock& clock() const { return clock_; }

  // Replaces the placeholders above in `text`.
  std::string ExpandPlaceholders(std::string text) const;
  // The same in every string field of `message`, nested messages and repeated fields included.
  void ExpandPlaceholders(google::protobuf::Message& message) const;

 private:
  server::FakeClock clock_;
  server::WorkSignal signal_;
  std::unique_ptr<server::MemoryRunStore> store_;
  std::unique_ptr<server::testing::SchedulerUnderTest> scheduler_;
  void Seed();

  std::vector<std::pair<std::string, std::string>> placeholders_;  // longest name first
  std::string seeded_lease_secret_;
};

// Silences protobuf's and spdlog's logging (a refused non-UTF-8 string, a refused success): at
// thousands of inputs a second it is only noise. Called from LLVMFuzzerInitialize.
void QuietLogs();

// The small sweep the world is seeded with (YAML, two MoE points, one dense baseline, 6 runs).
extern const char kSeedSweepYaml[];

}  // namespace parity::fuzz
