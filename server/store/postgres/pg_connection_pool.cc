#include "server/store/postgres/pg_connection_pool.h"

#include <pqxx/pqxx>
#include <utility>

#include "absl/status/status.h"
#include "server/store/postgres/pg_support.h"

namespace parity::server {

PgConnectionPool::PgConnectionPool(std::string database_url, int size,
                                   std::function<void(pqxx::connection&)> prepare)
    : database_url_(std::move(database_url)), size_(size), prepare_(std::move(prepare)) {}

PgConnectionPool::~PgConnectionPool() = default;

PgConnectionPool::Handle::Handle(PgConnectionPool& pool,
                                 std::unique_ptr<pqxx::connection> connection)
    : pool_(&pool), connection_(std::move(connection)) {}

PgConnectionPool::Handle::~Handle() {
  if (connection_ != nullptr) pool_->Release(std::move(connection_));
}

absl::StatusOr<PgConnectionPool::Handle> PgConnectionPool::Acquire(absl::Duration timeout) {
  bool must_open = false;
  {
    absl::MutexLock lock(&mu_);
    auto available = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
      return !idle_.empty() || open_ < size_;
    };
    if (!mu_.AwaitWithTimeout(absl::Condition(&available), timeout)) {
      return absl::UnavailableError("no free database connection");
    }
    if (!idle_.empty()) {
      std::unique_ptr<pqxx::connection> connection = std::move(idle_.back());
      idle_.pop_back();
      return Handle(*this, std::move(connection));
    }
    ++open_;
    must_open = true;
  }
  // Open outside the lock: connecting takes milliseconds and other threads may reuse idle ones.
  if (must_open) {
    try {
      auto connection = std::make_unique<pqxx::connection>(database_url_);
      prepare_(*connection);
      return Handle(*this, std::move(connection));
    } catch (const std::exception& e) {
      absl::MutexLock lock(&mu_);
      --open_;
      return pg::DatabaseFailure(absl::StatusCode::kUnavailable, "cannot connect to the database",
                                 e.what());
    }
  }
  return absl::InternalError("unreachable");
}

void PgConnectionPool::Release(std::unique_ptr<pqxx::connection> connection) {
  absl::MutexLock lock(&mu_);
  if (connection->is_open()) {
    idle_.push_back(std::move(connection));
  } else {
    --open_;  // dropped; the next Acquire opens a fresh one
  }
}

}  // namespace parity::server
