// The LeaderLeases contract on MemoryLeaderLeases + MemoryRunStore: time moves only when a test
// says so.
#include "server/store/memory/memory_leader_leases.h"

#include "server/store/memory/memory_run_store.h"
#include "tests/scheduler/leader_leases_contract_test.h"

namespace parity::server::testing {
namespace {

class MemoryLeasesHarness {
 public:
  void SetUp() { store_.SetLeaderLeases(&leases_); }
  LeaderLeases& leases() { return leases_; }
  SweepCatalog& catalog() { return store_; }
  RunQueue& queue() { return store_; }
  TelemetryRetention& retention() { return store_; }
  void LetTimePass(absl::Duration duration) { now_ += duration; }

 private:
  absl::Time now_ = absl::FromUnixSeconds(1'800'000'000);
  MemoryLeaderLeases leases_{[this] { return now_; }};
  MemoryRunStore store_{[this] { return now_; }};
};

INSTANTIATE_TYPED_TEST_SUITE_P(Memory, LeaderLeasesContractTest, MemoryLeasesHarness);

}  // namespace
}  // namespace parity::server::testing
