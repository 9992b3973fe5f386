#include "server/store/postgres/pg_notifier.h"

#include <memory>
#include <pqxx/pqxx>
#include <utility>
#include <vector>

#include "server/store/postgres/pg_rows.h"
#include "server/store/postgres/pg_statements.h"
#include "spdlog/spdlog.h"

namespace parity::server {

PgNotifier::PgNotifier(std::string database_url, std::string channel, absl::Duration batch_interval)
    : database_url_(std::move(database_url)),
      channel_(std::move(channel)),
      batch_interval_(batch_interval),
      thread_([this] { Loop(); }) {}

PgNotifier::~PgNotifier() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

void PgNotifier::Publish(const std::string& payload) {
  absl::MutexLock lock(&mu_);
  pending_.insert(payload);
}

void PgNotifier::Loop() {
  std::unique_ptr<pqxx::connection> connection;
  while (true) {
    std::vector<std::string> batch;
    bool stopping = false;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]()
                       ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || !pending_.empty(); };
      mu_.Await(absl::Condition(&ready));
      // Let the batch gather (the interval is the most a notification waits here).
      mu_.AwaitWithTimeout(absl::Condition(&stop_), batch_interval_);
      batch.assign(pending_.begin(), pending_.end());
      pending_.clear();
      stopping = stop_;
    }
    if (!batch.empty()) {
      try {
        if (connection == nullptr) {
          connection = std::make_unique<pqxx::connection>(database_url_);
          pqxx::nontransaction setup(*connection);
          setup.exec(pg::Statement("set_session_asynchronous_commit"));
          setup.commit();
        }
        pqxx::nontransaction tx(*connection);
        tx.exec_params(pg::Statement("notify_batch"), channel_, pg::TextArrayLiteral(batch));
      } catch (const std::exception& e) {
        // Only wake-ups are lost: the feeds poll anyway. Reconnect at the next batch.
        connection.reset();
        spdlog::debug("event=notify_failed channel={} error=\"{}\"", channel_, e.what());
      }
    }
    if (stopping) return;
  }
}

}  // namespace parity::server
