#include "server/store/postgres/pg_listener.h"

#include <pqxx/pqxx>

#include "absl/time/clock.h"
#include "spdlog/spdlog.h"

namespace parity::server {
namespace {

class Receiver final : public pqxx::notification_receiver {
 public:
  Receiver(pqxx::connection_base& connection, const std::string& channel,
           const std::function<void(const std::string&)>& on_notify)
      : pqxx::notification_receiver(connection, channel), on_notify_(on_notify) {}
  void operator()(const std::string& payload, int /*backend_pid*/) override { on_notify_(payload); }

 private:
  const std::function<void(const std::string&)>& on_notify_;
};

}  // namespace

PgListener::PgListener(std::string database_url, std::function<void()> on_notify,
                       std::string channel)
    : PgListener(
          std::move(database_url),
          [on_notify = std::move(on_notify)](const std::string& /*payload*/) { on_notify(); },
          std::move(channel)) {}

PgListener::PgListener(std::string database_url,
                       std::function<void(const std::string& payload)> on_notify,
                       std::string channel)
    : database_url_(std::move(database_url)),
      on_notify_(std::move(on_notify)),
      channel_(std::move(channel)),
      thread_([this] { Loop(); }) {}

PgListener::~PgListener() {
  stop_ = true;
  thread_.join();
}

void PgListener::Loop() {
  absl::Duration backoff = absl::Milliseconds(100);
  while (!stop_) {
    try {
      pqxx::connection connection(database_url_);
      Receiver receiver(connection, channel_, on_notify_);  // issues LISTEN
      connection.get_notifs();
      listening_ = true;
      backoff = absl::Milliseconds(100);
      // Something may have become pending while we were not listening.
      on_notify_("");
      while (!stop_) connection.await_notification(0, 200000);  // 200 ms, then check stop_
    } catch (const std::exception& e) {
      listening_ = false;
      if (stop_) break;
      spdlog::warn("event=listen_failed error=\"{}\" retry_in_ms={}", e.what(),
                   absl::ToInt64Milliseconds(backoff));
      absl::SleepFor(backoff);
      backoff = std::min(backoff * 2, absl::Seconds(5));
    }
  }
  listening_ = false;
}

}  // namespace parity::server
