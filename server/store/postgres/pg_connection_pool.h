// A small fixed-size pool of libpqxx connections, each with the store's statements prepared.
// Thread-safe: any thread may Acquire(); a connection is used by one thread at a time. A broken
// connection is dropped on return and reopened by the next Acquire(), so the pool heals after a
// database restart.
#pragma once

#include <functional>
#include <memory>
#include <pqxx/connection>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace parity::server {

class PgConnectionPool {
 public:
  // `prepare` runs once on every new connection (to prepare statements).
  PgConnectionPool(std::string database_url, int size,
                   std::function<void(pqxx::connection&)> prepare);
  ~PgConnectionPool();
  PgConnectionPool(const PgConnectionPool&) = delete;
  PgConnectionPool& operator=(const PgConnectionPool&) = delete;

  // A borrowed connection, returned to the pool when destroyed.
  class Handle {
   public:
    Handle(PgConnectionPool& pool, std::unique_ptr<pqxx::connection> connection);
    Handle(Handle&&) = default;
    ~Handle();
    pqxx::connection& operator*() const { return *connection_; }
    pqxx::connection* operator->() const { return connection_.get(); }

   private:
    PgConnectionPool* pool_;
    std::unique_ptr<pqxx::connection> connection_;
  };

  // Waits up to `timeout` for a free connection; UNAVAILABLE when none comes or the database
  // cannot be reached.
  absl::StatusOr<Handle> Acquire(absl::Duration timeout = absl::Seconds(10));

  const std::string& database_url() const { return database_url_; }

 private:
  void Release(std::unique_ptr<pqxx::connection> connection);

  const std::string database_url_;
  const int size_;
  const std::function<void(pqxx::connection&)> prepare_;
  absl::Mutex mu_;
  // Idle open connections; `open_` counts idle plus borrowed ones (≤ size_).
  std::vector<std::unique_ptr<pqxx::connection>> idle_ ABSL_GUARDED_BY(mu_);
  int open_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace parity::server
