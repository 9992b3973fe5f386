// The store contracts (every interface, read models included) on MemoryRunStore: no PostgreSQL,
// and time moves only when a test says so.
#include "server/store/memory/memory_run_store.h"
#include "tests/scheduler/access_contract_test.h"
#include "tests/scheduler/gang_contract_test.h"
#include "tests/scheduler/gang_read_models_contract_test.h"
#include "tests/scheduler/lease_retry_contract_test.h"
#include "tests/scheduler/outage_contract_test.h"
#include "tests/scheduler/read_models_contract_test.h"
#include "tests/scheduler/run_history_contract_test.h"
#include "tests/scheduler/store_contract_test.h"

namespace parity::server::testing {
namespace {

class MemoryHarness {
 public:
  void SetUp() {}
  SweepCatalog& catalog() { return store_; }
  RunQueue& queue() { return store_; }
  ReadModels& reads() { return store_; }
  TelemetryRetention& retention() { return store_; }
  AccessTokens& tokens() { return store_; }
  GangQueue& gangs() { return store_; }
  void LetTimePass(absl::Duration duration) { now_ += duration; }
  absl::Time Now() const { return now_; }

 private:
  absl::Time now_ = absl::FromUnixSeconds(1'800'000'000);
  MemoryRunStore store_{[this] { return now_; }};
};

INSTANTIATE_TYPED_TEST_SUITE_P(Memory, StoreContractTest, MemoryHarness);
INSTANTIATE_TYPED_TEST_SUITE_P(Memory, AccessContractTest, MemoryHarness);
INSTANTIATE_TYPED_TEST_SUITE_P(Memory, ReadModelsContractTest, MemoryHarness);
INSTANTIATE_TYPED_TEST_SUITE_P(Memory, OutageContractTest, MemoryHarness);
INSTANTIATE_TYPED_TEST_SUITE_P(Memory, RunHistoryContractTest, MemoryHarness);
INSTANTIATE_TYPED_TEST_SUITE_P(Memory, LeaseRetryContractTest, MemoryHarness);
INSTANTIATE_TYPED_TEST_SUITE_P(Memory, GangContractTest, MemoryHarness);
INSTANTIATE_TYPED_TEST_SUITE_P(Memory, GangReadModelsContractTest, MemoryHarness);

}  // namespace
}  // namespace parity::server::testing
