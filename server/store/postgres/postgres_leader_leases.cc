#include "server/store/postgres/postgres_leader_leases.h"

#include "absl/strings/str_cat.h"
#include "server/store/postgres/pg_connection_pool.h"
#include "server/store/postgres/pg_statements.h"
#include "server/store/postgres/pg_support.h"

namespace parity::server {
namespace {

// One row of leader_lease_acquire(…) or of the table read by Current.
LeaderLease LeaseFromRow(const std::string& name, const pqxx::row& row) {
  LeaderLease lease;
  lease.name = name;
  lease.leader_id = row["holder"].c_str();
  lease.epoch = row["term"].as<int64_t>();
  lease.expires = pg::TimeFromMicros(row["expires_us"].as<int64_t>());
  lease.remaining = absl::Seconds(row["remaining"].as<double>());
  return lease;
}

}  // namespace

PostgresLeaderLeases::PostgresLeaderLeases(PostgresLeaderLeasesOptions options)
    : options_(std::move(options)),
      pool_(std::make_unique<PgConnectionPool>(
          options_.database_url, 2, [timeout = options_.statement_timeout](pqxx::connection& c) {
            pqxx::nontransaction tx(c);
            const std::string ms =
                absl::StrCat(std::max<int64_t>(absl::ToInt64Milliseconds(timeout), 1));
            tx.exec_params(pg::Statement("set_session_statement_timeout"), ms);
            tx.exec_params(pg::Statement("set_session_lock_timeout"), ms);
          })) {}

PostgresLeaderLeases::~PostgresLeaderLeases() = default;

absl::StatusOr<LeaderLease> PostgresLeaderLeases::AcquireOrRenew(const std::string& name,
                                                                 const std::string& leader_id,
                                                                 absl::Duration ttl) {
  if (name.empty() || leader_id.empty() || ttl <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "leadership: a name, a leader id and a positive TTL are needed (--leader-ttl)");
  }
  return pg::WithSingleStatement(
      *pool_, [&](pqxx::nontransaction& tx) -> absl::StatusOr<LeaderLease> {
        const pqxx::result rows = tx.exec_params(pg::Statement("leader_lease_acquire"), name,
                                                 leader_id, absl::ToDoubleSeconds(ttl));
        if (rows.empty()) return absl::InternalError("leader_lease_acquire returned no row");
        LeaderLease lease = LeaseFromRow(name, rows[0]);
        lease.held = lease.leader_id == leader_id;
        return lease;
      });
}

absl::StatusOr<bool> PostgresLeaderLeases::Resign(const std::string& name,
                                                  const std::string& leader_id, int64_t epoch) {
  return pg::WithSingleStatement(*pool_, [&](pqxx::nontransaction& tx) -> absl::StatusOr<bool> {
    return tx.exec_params(pg::Statement("leader_lease_resign"), name, leader_id, epoch)[0][0]
        .as<bool>();
  });
}

absl::StatusOr<LeaderLease> PostgresLeaderLeases::Current(const std::string& name) {
  return pg::WithSingleStatement(
      *pool_, [&](pqxx::nontransaction& tx) -> absl::StatusOr<LeaderLease> {
        const pqxx::result rows = tx.exec_params(pg::Statement("leader_lease_current"), name);
        if (rows.empty()) {
          LeaderLease never;
          never.name = name;
          return never;
        }
        return LeaseFromRow(name, rows[0]);
      });
}

}  // namespace parity::server
