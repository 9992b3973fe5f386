#include "tests/support/postgres_environment.h"

#include <atomic>

#include "absl/strings/str_cat.h"
#include "server/store/postgres/migrations.h"

namespace parity::testing {
namespace {

constexpr char kTemplate[] = "parity_template";

std::unique_ptr<PostgresCluster>& ClusterSlot() {
  static auto* cluster = new std::unique_ptr<PostgresCluster>();
  return *cluster;
}
absl::Status& StatusSlot() {
  static auto* status = new absl::Status(absl::UnavailableError("environment not set up"));
  return *status;
}
std::atomic<int> g_database_counter{0};

// Registered at load time: linking this file (FreshDatabase() pulls it in) is enough.
::testing::Environment* const g_environment =
    ::testing::AddGlobalTestEnvironment(new PostgresEnvironment());

}  // namespace

void PostgresEnvironment::SetUp() {
  absl::StatusOr<std::unique_ptr<PostgresCluster>> cluster = PostgresCluster::Start();
  if (!cluster.ok()) {
    StatusSlot() = cluster.status();
    return;
  }
  ClusterSlot() = std::move(*cluster);
  absl::Status status = ClusterSlot()->CreateDatabase(kTemplate);
  if (status.ok()) {
    absl::StatusOr<server::MigrationReport> report = server::ApplyMigrations(
        ClusterSlot()->ConnectionString(kTemplate), server::EmbeddedMigrations());
    status = report.status();
  }
  StatusSlot() = status;
}

void PostgresEnvironment::TearDown() { ClusterSlot().reset(); }

absl::Status PostgresEnvironment::Status() { return StatusSlot(); }

PostgresCluster* PostgresEnvironment::Cluster() { return ClusterSlot().get(); }

std::string PostgresEnvironment::FreshDatabase() {
  (void)g_environment;
  if (!StatusSlot().ok()) {
    ADD_FAILURE() << "PostgreSQL unavailable: " << StatusSlot();
    return "";
  }
  const std::string name = absl::StrCat("test_", getpid(), "_", g_database_counter++);
  absl::Status status = ClusterSlot()->CreateDatabase(name, kTemplate);
  if (!status.ok()) {
    ADD_FAILURE() << status;
    return "";
  }
  return ClusterSlot()->ConnectionString(name);
}

std::string PostgresEnvironment::EmptyDatabase() {
  if (!StatusSlot().ok()) {
    ADD_FAILURE() << "PostgreSQL unavailable: " << StatusSlot();
    return "";
  }
  const std::string name = absl::StrCat("empty_", getpid(), "_", g_database_counter++);
  absl::Status status = ClusterSlot()->CreateDatabase(name);
  if (!status.ok()) {
    ADD_FAILURE() << status;
    return "";
  }
  return ClusterSlot()->ConnectionString(name);
}

}  // namespace parity::testing
