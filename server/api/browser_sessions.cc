#include "server/api/browser_sessions.h"

#include <algorithm>

#include "server/scheduling/secrets.h"

namespace parity::server {

BrowserSessions::BrowserSessions(const Clock& clock, BrowserSessionsOptions options)
    : clock_(clock), options_(options) {}

std::string BrowserSessions::Open(absl::string_view token) {
  const std::string id = RandomSecret("");
  const absl::Time now = clock_.Now();
  absl::MutexLock lock(&mu_);
  if (sessions_.size() >= options_.max_sessions) {
    auto oldest = std::min_element(sessions_.begin(), sessions_.end(), [](auto& a, auto& b) {
      return a.second.last_used < b.second.last_used;
    });
    sessions_.erase(oldest);
  }
  sessions_[Sha256(id)] = Session{std::string(token), now, now};
  return id;
}

std::optional<std::string> BrowserSessions::TokenOf(absl::string_view session_id) {
  if (session_id.empty() || session_id.size() > 128) return std::nullopt;
  const std::string key = Sha256(session_id);
  const absl::Time now = clock_.Now();
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(key);
  if (it == sessions_.end()) return std::nullopt;
  Session& session = it->second;
  if (now - session.last_used > options_.idle || now - session.opened > options_.lifetime) {
    sessions_.erase(it);
    return std::nullopt;
  }
  session.last_used = now;
  return session.token;
}

void BrowserSessions::Close(absl::string_view session_id) {
  if (session_id.empty() || session_id.size() > 128) return;
  const std::string key = Sha256(session_id);
  absl::MutexLock lock(&mu_);
  sessions_.erase(key);
}

size_t BrowserSessions::size() {
  absl::MutexLock lock(&mu_);
  return sessions_.size();
}

}  // namespace parity::server
