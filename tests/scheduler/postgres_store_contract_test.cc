// The store contract on PostgresRunStore, over a fresh throwaway database per test. PostgreSQL
// reads its own clock, so letting time pass is sleeping.
#include <memory>

#include "absl/time/clock.h"
#include "server/store/postgres/postgres_run_store.h"
#include "tests/scheduler/access_contract_test.h"
#include "tests/scheduler/gang_contract_test.h"
#include "tests/scheduler/gang_read_models_contract_test.h"
#include "tests/scheduler/lease_retry_contract_test.h"
#include "tests/scheduler/outage_contract_test.h"
#include "tests/scheduler/read_models_contract_test.h"
#include "tests/scheduler/run_history_contract_test.h"
#include "tests/scheduler/store_contract_test.h"
#include "tests/support/postgres_environment.h"

namespace parity::server::testing {
namespace {

class PostgresHarness {
 public:
  void SetUp() {
    PARITY_REQUIRE_POSTGRES();
    const std::string url = parity::testing::PostgresEnvironment::FreshDatabase();
    ASSERT_FALSE(url.empty()) << "a fresh database";
    store_ = std::make_unique<PostgresRunStore>(PostgresRunStoreOptions{url, 2});
  }
  SweepCatalog& catalog() { return *store_; }
  RunQueue& queue() { return *store_; }
  ReadModels& reads() { return *store_; }
  TelemetryRetention& retention() { return *store_; }
  AccessTokens& tokens() { return *store_; }
  GangQueue& gangs() { return *store_; }
  void LetTimePass(absl::Duration duration) { absl::SleepFor(duration); }
  absl::Time Now() const { return absl::Now(); }

 private:
  std::unique_ptr<PostgresRunStore> store_;
};

INSTANTIATE_TYPED_TEST_SUITE_P(Postgres, StoreContractTest, PostgresHarness);
INSTANTIATE_TYPED_TEST_SUITE_P(Postgres, AccessContractTest, PostgresHarness);
INSTANTIATE_TYPED_TEST_SUITE_P(Postgres, ReadModelsContractTest, PostgresHarness);
INSTANTIATE_TYPED_TEST_SUITE_P(Postgres, OutageContractTest, PostgresHarness);
INSTANTIATE_TYPED_TEST_SUITE_P(Postgres, RunHistoryContractTest, PostgresHarness);
INSTANTIATE_TYPED_TEST_SUITE_P(Postgres, LeaseRetryContractTest, PostgresHarness);
INSTANTIATE_TYPED_TEST_SUITE_P(Postgres, GangContractTest, PostgresHarness);
INSTANTIATE_TYPED_TEST_SUITE_P(Postgres, GangReadModelsContractTest, PostgresHarness);

}  // namespace
}  // namespace parity::server::testing
