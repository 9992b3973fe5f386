// PostgresEnvironment: one throwaway cluster shared by a whole test binary (a gtest global
// environment, registered automatically when this library is linked and FreshDatabase() is
// used), with a template database migrated by the scheduler's migrations. Each test takes a
// fresh database copied from the template (CREATE DATABASE ... TEMPLATE: milliseconds).
//
//   TEST(Foo, Bar) {
//     PARITY_REQUIRE_POSTGRES();                        // skips when PostgreSQL is missing
//     std::string url = parity::testing::PostgresEnvironment::FreshDatabase();
//     ...
//   }
#pragma once

#include <cstdlib>
#include <string>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "tests/support/postgres_cluster.h"

namespace parity::testing {

class PostgresEnvironment : public ::testing::Environment {
 public:
  void SetUp() override;
  void TearDown() override;

  // OK when the cluster and the migrated template are ready; why not otherwise.
  static absl::Status Status();
  // Creates a new migrated database and returns its connection string. Fails the test (and
  // returns "") when PostgreSQL is not available.
  static std::string FreshDatabase();
  // An empty (unmigrated) database, for migration tests.
  static std::string EmptyDatabase();
  // The cluster (null when it failed to start).
  static PostgresCluster* Cluster();
};

}  // namespace parity::testing

// Ends the current test when no PostgreSQL cluster could be started: a failure by default (a
// suite that silently skips proves nothing), a skip when PARITY_SKIP_WITHOUT_POSTGRES is set.
#define PARITY_REQUIRE_POSTGRES()                                                    \
  do {                                                                               \
    if (!::parity::testing::PostgresEnvironment::Status().ok()) {                    \
      if (std::getenv("PARITY_SKIP_WITHOUT_POSTGRES") != nullptr) {                  \
        GTEST_SKIP() << "PostgreSQL unavailable: "                                   \
                     << ::parity::testing::PostgresEnvironment::Status().ToString(); \
      }                                                                              \
      FAIL() << "PostgreSQL unavailable: "                                           \
             << ::parity::testing::PostgresEnvironment::Status().ToString();         \
    }                                                                                \
  } while (0)
