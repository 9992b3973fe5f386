// The LeaderLeases contract on PostgresLeaderLeases + PostgresRunStore over one fresh database
// per test. PostgreSQL reads its own clock, so letting time pass is sleeping.
#include "server/store/postgres/postgres_leader_leases.h"

#include <memory>

#include "absl/time/clock.h"
#include "server/store/postgres/postgres_run_store.h"
#include "tests/scheduler/leader_leases_contract_test.h"
#include "tests/support/postgres_environment.h"

namespace parity::server::testing {
namespace {

class PostgresLeasesHarness {
 public:
  void SetUp() {
    PARITY_REQUIRE_POSTGRES();
    const std::string url = parity::testing::PostgresEnvironment::FreshDatabase();
    ASSERT_FALSE(url.empty()) << "a fresh database";
    leases_ = std::make_unique<PostgresLeaderLeases>(PostgresLeaderLeasesOptions{url});
    store_ = std::make_unique<PostgresRunStore>(PostgresRunStoreOptions{url, 2});
  }
  LeaderLeases& leases() { return *leases_; }
  SweepCatalog& catalog() { return *store_; }
  RunQueue& queue() { return *store_; }
  TelemetryRetention& retention() { return *store_; }
  void LetTimePass(absl::Duration duration) { absl::SleepFor(duration); }

 private:
  std::unique_ptr<PostgresLeaderLeases> leases_;
  std::unique_ptr<PostgresRunStore> store_;
};

INSTANTIATE_TYPED_TEST_SUITE_P(Postgres, LeaderLeasesContractTest, PostgresLeasesHarness);

}  // namespace
}  // namespace parity::server::testing
