// BrowserSessions: what a signed-in browser's cookie stands for. The cookie holds a random
// session id, never the token: stealing it gives no API access elsewhere (a session id is not a
// bearer token and the gRPC port does not know it), and signing out deletes the session.
//
// A session remembers the token it was opened with, in this process's memory only, so that
// every request re-authenticates that token through AccessControl: a revoked or expired token
// ends its sessions on their next request. Sessions end after `idle` without a request and
// after `lifetime` in all, and are kept in memory: a scheduler restart signs every browser out,
// and each replica behind a load balancer has its own (pin browsers to one, or sign in again).
// Sessions are looked up by the SHA-256 of their id, so no comparison or stored key is the id.
//
// Thread-safe: the HTTP server's threads call it concurrently.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/scheduling/clock.h"

namespace parity::server {

struct BrowserSessionsOptions {
  absl::Duration idle = absl::Hours(12);
  absl::Duration lifetime = absl::Hours(24 * 7);
  // Sessions held at once; opening one more ends the least recently used.
  size_t max_sessions = 10000;
};

class BrowserSessions {
 public:
  // `clock` must outlive this object.
  explicit BrowserSessions(const Clock& clock, BrowserSessionsOptions options = {});

  // A new session for `token` (already authenticated by the caller); returns its id, the
  // cookie's value (43 characters of web-safe base64, 256 random bits).
  std::string Open(absl::string_view token);
  // The token of a live session, marking it used; nullopt when the id is unknown, idle too
  // long or past its lifetime (an ended session is forgotten).
  std::optional<std::string> TokenOf(absl::string_view session_id);
  // Ends a session (sign-out, or its token was refused). Unknown ids are ignored.
  void Close(absl::string_view session_id);
  size_t size();

 private:
  struct Session {
    std::string token;
    absl::Time opened;
    absl::Time last_used;
  };
  const Clock& clock_;
  const BrowserSessionsOptions options_;
  absl::Mutex mu_;
  std::map<std::string, Session> sessions_ ABSL_GUARDED_BY(mu_);  // by SHA-256 of the id
};

}  // namespace parity::server
