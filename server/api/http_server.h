// HttpServer: the scheduler's web port (cpp-httplib) — the dashboard's single-page app and its
// files (compiled in by web/), the JSON API of DashboardApi under /api/v1, and /metrics when a
// metrics hook is given. Owned by SchedulerServer, started after the gRPC server and stopped
// before it. Requests run on the server's own small thread pool; nothing here is shared with
// the gRPC threads except the thread-safe Scheduler and RunStore.
//
//   GET /, /sweeps/ID, /runs/ID   index.html (the app routes on the client)
//   GET /assets/NAME              app.js, styles.css, chart.umd.js, favicon.svg
//   GET /api/v1/...               see server/api/dashboard_api.h
//   GET /metrics                  Prometheus text format (only with a metrics hook)
//   GET /healthz                  "ok"
//   GET|POST /login, POST /logout the sign-in page: a token in, an HttpOnly cookie out
//
// Every route is authorized by AccessControl first (its rules name them "GET /api/v1", ...):
// a bearer token in `Authorization: Bearer …` (API clients, Prometheus) or the cookie the login
// page sets (browsers). No token: the pages redirect to /login, the API and /metrics answer 401;
// a token whose role may not: 403. GET /login?token=… signs in from a link, as Jupyter's does
// (the local stack prints one); the token is then dropped from the address bar by a redirect.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "server/api/access_control.h"
#include "server/api/dashboard_api.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace parity::server {

struct HttpServerOptions {
  // "host:port"; port 0 = pick a free one (see port()).
  std::string listen;
  // The body of GET /metrics (Prometheus text format 0.0.4); empty function = no /metrics.
  std::function<std::string()> metrics_text;
  // PEM certificate chain and key: HTTPS when set (the cookie is then Secure too).
  std::string tls_cert_file;
  std::string tls_key_file;
};

class HttpServer {
 public:
  // Binds and starts serving. UNAVAILABLE when the address cannot be bound, INVALID_ARGUMENT
  // when it is not host:port. `scheduler` and `store` must outlive the server.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(HttpServerOptions options,
                                                           Scheduler& scheduler, RunStore& store,
                                                           AccessControl& access);
  ~HttpServer();

  int port() const { return port_; }
  // Stops accepting, lets requests in flight finish, joins the listening thread. Idempotent.
  void Stop();

 private:
  HttpServer(HttpServerOptions options, Scheduler& scheduler, RunStore& store,
             AccessControl& access);
  void InstallRoutes();
  // The access check before routing; true when it answered the request itself (401/403/302).
  bool Refuse(const httplib::Request& req, httplib::Response& res);
  std::string LoginCookie(const std::string& token) const;

  const HttpServerOptions options_;
  AccessControl& access_;
  DashboardApi api_;
  std::string index_html_;  // index.html with <base href="/">, built once
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace parity::server
