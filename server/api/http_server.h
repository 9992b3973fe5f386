// HttpServer: the scheduler's web port — the dashboard's single-page app and its files
// (compiled in by web/), the JSON API of DashboardApi under /api/v1, and /metrics when a
// metrics hook is given. Owned by SchedulerServer, started after the gRPC server and stopped
// before it. The transport is MicrohttpdServer (libmicrohttpd: request deadline, connection
// caps, body limits; see microhttpd_server.h for why); this file routes and authorizes.
//
//   GET /, /sweeps/ID, /runs/ID   index.html (the app routes on the client)
//   GET /assets/NAME              app.js, styles.css, chart.umd.js, favicon.svg
//   GET /api/v1/...               see server/api/dashboard_api.h
//   GET /metrics                  Prometheus text format (only with a metrics hook)
//   GET /healthz                  "ok"
//   GET|POST /login, POST /logout the sign-in page: a token in, a session cookie out
//
// Every route is authorized by AccessControl first (its rules name them "GET /api/v1", ...):
// a bearer token in `Authorization: Bearer …` (API clients, Prometheus) or the session cookie
// the login page sets (browsers; BrowserSessions: the cookie is a random session id, never the
// token, and each request re-authenticates the session's token). No token: the pages redirect
// to /login, the API and /metrics answer 401; a token whose role may not: 403.
//
// Cross-site requests: POST /login and POST /logout need an Origin header naming this server
// (the Host the browser addressed); anything else — another site, "null", or none — is 403.
// GET /login?token=… (the sign-in link the local stack prints, as Jupyter's) is refused when
// the browser says it came from another site (Sec-Fetch-Site). Every response carries
// X-Frame-Options: DENY, a Content-Security-Policy that allows only this origin's scripts,
// styles, images and fetches, Referrer-Policy: same-origin and X-Content-Type-Options: nosniff.
//
// Bodies: POST /login takes at most 4 KiB, POST /logout 1 KiB, every other route none (413).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "server/api/access_control.h"
#include "server/api/browser_sessions.h"
#include "server/api/dashboard_api.h"
#include "server/api/microhttpd_server.h"

namespace parity::server {

struct HttpServerOptions {
  // "host:port"; port 0 = pick a free one (see port()).
  std::string listen;
  // The body of GET /metrics (Prometheus text format 0.0.4); empty function = no /metrics.
  std::function<std::string()> metrics_text;
  // PEM certificate chain and key: HTTPS when set (the cookie is then Secure too).
  std::string tls_cert_file;
  std::string tls_key_file;
  HttpLimits limits;
  BrowserSessionsOptions sessions;
  // How long a JSON API reply is given to whoever asks for the same document (reply_cache.h).
  ReplyCacheOptions api_replies;
};

// The largest body each route takes.
inline constexpr size_t kMaxLoginBody = 4096;
inline constexpr size_t kMaxLogoutBody = 1024;

class HttpServer {
 public:
  // Binds and starts serving. UNAVAILABLE when the address cannot be bound, INVALID_ARGUMENT
  // when it is not host:port or the TLS files are unusable. `sweeps`, `reads` and `access`
  // must outlive the server.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(HttpServerOptions options,
                                                           SweepsService& sweeps, ReadModels& reads,
                                                           AccessControl& access);
  ~HttpServer();

  int port() const { return transport_->port(); }
  // Connections the transport cut for overrunning the request or response deadline.
  uint64_t deadline_cuts() { return transport_->deadline_cuts(); }
  // Closes every connection and joins the server's threads. Idempotent.
  void Stop();

  // The answer to one whole request (no socket: the routing, authorization and headers).
  HttpResponse Handle(const HttpRequest& request);

 private:
  HttpServer(HttpServerOptions options, SweepsService& sweeps, ReadModels& reads,
             AccessControl& access);
  // The access check before routing; set when it answers the request itself (401/403/302).
  std::optional<HttpResponse> Refuse(const HttpRequest& request, const std::string& rule);
  HttpResponse Route(const HttpRequest& request);
  // Lands on `next` (a page of this site; else /) once signed in.
  HttpResponse SignIn(const HttpRequest& request, const std::string& token,
                      const std::string& next);
  HttpResponse SignOut(const HttpRequest& request);
  std::string SessionCookie(const std::string& session_id) const;

  const HttpServerOptions options_;
  AccessControl& access_;
  DashboardApi api_;
  RealClock clock_;
  BrowserSessions sessions_;
  std::string index_html_;  // index.html with <base href="/">, built once
  std::unique_ptr<MicrohttpdServer> transport_;
};

}  // namespace parity::server
