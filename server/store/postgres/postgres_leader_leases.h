// PostgresLeaderLeases: LeaderLeases on PostgreSQL (the leader_leases table of migration 0018,
// the functions server/sql/leader_lease_acquire.sql and leader_lease_resign.sql). Times are the
// database's own (now()), so the replicas' clocks never meet. It keeps its own small connection
// pool, apart from the store's, so that a queue busy with leases never delays a renewal; every
// statement is cancelled after `statement_timeout` (the Elector passes ttl / 3), so a renewal
// that cannot finish in time fails instead of hanging past the holder's deadline.
// Resign sends NOTIFY parity_leadership (payload: the name): a PgListener on that channel
// (kLeadershipChannel) wakes the other replicas' electors.
#pragma once

#include <memory>
#include <string>

#include "server/store/leader_leases.h"

namespace parity::server {

class PgConnectionPool;

inline constexpr char kLeadershipChannel[] = "parity_leadership";

struct PostgresLeaderLeasesOptions {
  std::string database_url;
  absl::Duration statement_timeout = absl::Seconds(3);
};

class PostgresLeaderLeases final : public LeaderLeases {
 public:
  explicit PostgresLeaderLeases(PostgresLeaderLeasesOptions options);
  ~PostgresLeaderLeases() override;

  absl::StatusOr<LeaderLease> AcquireOrRenew(const std::string& name, const std::string& leader_id,
                                             absl::Duration ttl) override;
  absl::StatusOr<bool> Resign(const std::string& name, const std::string& leader_id,
                              int64_t epoch) override;
  absl::StatusOr<LeaderLease> Current(const std::string& name) override;

 private:
  const PostgresLeaderLeasesOptions options_;
  std::unique_ptr<PgConnectionPool> pool_;  // behind a pointer: no libpqxx in this header
};

}  // namespace parity::server
