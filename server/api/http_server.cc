#include "server/api/http_server.h"

#include <httplib.h>

#include <exception>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "core/status_macros.h"
#include "spdlog/spdlog.h"
#include "web/dashboard_documents.h"
#include "web/web_assets.h"

namespace parity::server {
namespace {

constexpr int kThreads = 8;
constexpr char kJson[] = "application/json";

struct HostPort {
  std::string host;
  int port = 0;
};

absl::StatusOr<HostPort> ParseListen(const std::string& listen) {
  const size_t colon = listen.rfind(':');
  int port = -1;
  if (colon == std::string::npos || !absl::SimpleAtoi(listen.substr(colon + 1), &port) ||
      port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("http listen address '", listen, "' is not host:port"));
  }
  std::string host = listen.substr(0, colon);
  // "[::]:8080": the brackets belong to the URL syntax, not to the address.
  host = std::string(absl::StripSuffix(absl::StripPrefix(host, "["), "]"));
  if (host.empty()) host = "0.0.0.0";
  return HostPort{host, port};
}

void SetError(httplib::Response& res, int status, std::string_view code, std::string_view message) {
  res.status = status;
  res.set_content(web::ErrorJson(status, code, message), kJson);
}

constexpr char kCookie[] = "parity_token";

// The rule (access_control.cc's kRules) of a request; anything unknown is a page (needs read).
std::string RuleOf(const httplib::Request& req) {
  const std::string& path = req.path;
  if (req.method == "POST" && (path == "/login" || path == "/logout")) {
    return absl::StrCat("POST ", path);
  }
  if (req.method != "GET" && req.method != "HEAD") return "GET /pages";
  if (absl::StartsWith(path, "/api/v1/")) return "GET /api/v1";
  if (absl::StartsWith(path, "/assets/")) return "GET /assets";
  if (path == "/metrics" || path == "/healthz" || path == "/login")
    return absl::StrCat("GET ", path);
  return "GET /pages";
}

std::string CookieToken(const httplib::Request& req) {
  const std::string cookies = req.get_header_value("Cookie");
  for (absl::string_view part : absl::StrSplit(cookies, ';')) {
    part = absl::StripAsciiWhitespace(part);
    if (absl::ConsumePrefix(&part, kCookie) && absl::ConsumePrefix(&part, "=")) {
      return std::string(part);
    }
  }
  return "";
}

// The token of a request: its Authorization header, else the login cookie.
std::string RequestToken(const httplib::Request& req) {
  const std::string header = req.get_header_value("Authorization");  // a copy: the view is into it
  const absl::string_view bearer = AccessControl::BearerToken(header);
  if (!bearer.empty()) return std::string(bearer);
  return CookieToken(req);
}

std::string HtmlEscape(absl::string_view text) {
  std::string out;
  for (const char c : text) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string LoginPage(absl::string_view message) {
  return absl::StrCat(
      "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<title>Parity: sign in</title><style>body{font:15px system-ui,sans-serif;margin:4em auto;"
      "max-width:32em;padding:0 1em}input{width:100%;padding:.5em;font:inherit;margin:.5em 0}"
      "p.error{color:#b00020}</style></head><body><h1>Parity</h1>",
      message.empty() ? "" : absl::StrCat("<p class=\"error\">", HtmlEscape(message), "</p>"),
      "<form method=\"post\" action=\"/login\"><label for=\"token\">Access token (a viewer's "
      "or better; <code>parity token create</code>)</label><input id=\"token\" name=\"token\" "
      "type=\"password\" autocomplete=\"off\" required autofocus><input type=\"submit\" "
      "value=\"Sign in\"></form></body></html>");
}

// No exception leaves a handler: cpp-httplib would answer 500 with no body and no log line.
template <typename Body>
httplib::Server::Handler Guarded(Body body) {
  return [body](const httplib::Request& req, httplib::Response& res) {
    try {
      body(req, res);
    } catch (const std::exception& e) {
      spdlog::error("event=http_handler_failed path=\"{}\" error=\"{}\"", req.path, e.what());
      SetError(res, 500, "INTERNAL", e.what());
    }
  };
}

}  // namespace

static std::unique_ptr<httplib::Server> MakeServer(const HttpServerOptions& options) {
  if (options.tls_cert_file.empty()) return std::make_unique<httplib::Server>();
  return std::make_unique<httplib::SSLServer>(options.tls_cert_file.c_str(),
                                              options.tls_key_file.c_str());
}

HttpServer::HttpServer(HttpServerOptions options, Scheduler& scheduler, RunStore& store,
                       AccessControl& access)
    : options_(std::move(options)),
      access_(access),
      api_(scheduler, store),
      index_html_(web::IndexHtmlWith("<base href=\"/\">")),
      server_(MakeServer(options_)) {}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(HttpServerOptions options,
                                                              Scheduler& scheduler, RunStore& store,
                                                              AccessControl& access) {
  PARITY_ASSIGN_OR_RETURN(const HostPort address, ParseListen(options.listen));
  std::unique_ptr<HttpServer> server(new HttpServer(std::move(options), scheduler, store, access));
  if (server->index_html_.empty()) {
    return absl::InternalError("the dashboard's index.html is not embedded in this binary");
  }
  if (!server->server_->is_valid()) {
    return absl::InvalidArgumentError(absl::StrCat("https: cannot load the certificate '",
                                                   server->options_.tls_cert_file, "' or key '",
                                                   server->options_.tls_key_file, "'"));
  }
  server->InstallRoutes();
  httplib::Server& http = *server->server_;
  try {
    if (address.port == 0) {
      server->port_ = http.bind_to_any_port(address.host);
    } else if (http.bind_to_port(address.host, address.port)) {
      server->port_ = address.port;
    } else {
      server->port_ = -1;
    }
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", server->options_.listen, " (http): ", e.what()));
  }
  if (server->port_ <= 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", server->options_.listen, " (http)"));
  }
  server->thread_ = std::thread([s = server.get()] {
    try {
      s->server_->listen_after_bind();
    } catch (const std::exception& e) {
      spdlog::error("event=http_server_failed error=\"{}\"", e.what());
    }
  });
  // httplib's stop() is a no-op until the loop runs; wait for it so that Stop() always works.
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  while (!http.is_running() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(1));
  spdlog::info("event=http_serving address={} port={}", server->options_.listen, server->port_);
  return server;
}

HttpServer::~HttpServer() { Stop(); }

void HttpServer::Stop() {
  if (server_->is_running() || thread_.joinable()) server_->stop();
  if (thread_.joinable()) thread_.join();
}

std::string HttpServer::LoginCookie(const std::string& token) const {
  return absl::StrCat(kCookie, "=", token, "; Path=/; HttpOnly; SameSite=Strict",
                      options_.tls_cert_file.empty() ? "" : "; Secure");
}

bool HttpServer::Refuse(const httplib::Request& req, httplib::Response& res) {
  const std::string rule = RuleOf(req);
  absl::StatusOr<Identity> who = access_.Authorize(RequestToken(req), rule);
  if (who.ok()) return false;
  res.set_header("Cache-Control", "no-store");
  if (rule == "GET /pages" && who.status().code() == absl::StatusCode::kUnauthenticated) {
    res.status = 302;  // a browser without a (valid) cookie: to the sign-in page
    res.set_header("Location", "/login");
    return true;
  }
  if (who.status().code() == absl::StatusCode::kUnauthenticated) {
    res.set_header("WWW-Authenticate", "Bearer realm=\"parity\"");
  }
  res.status = HttpStatusOf(who.status().code());
  res.set_content(web::ErrorJson(res.status, absl::StatusCodeToString(who.status().code()),
                                 std::string(who.status().message())),
                  kJson);
  return true;
}

void HttpServer::InstallRoutes() {
  httplib::Server& http = *server_;
  http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    try {
      return Refuse(req, res) ? httplib::Server::HandlerResponse::Handled
                              : httplib::Server::HandlerResponse::Unhandled;
    } catch (const std::exception& e) {
      SetError(res, 500, "INTERNAL", e.what());
      return httplib::Server::HandlerResponse::Handled;
    }
  });
  // Signing in: a valid token of a reading role becomes an HttpOnly cookie. From a link
  // (?token=, the local stack prints one) or the form; either way the answer redirects to / so
  // that the token leaves the address bar and the browser's history.
  const auto sign_in = [this](const std::string& token, httplib::Response& res) {
    absl::StatusOr<Identity> who = access_.Authorize(token, "GET /pages");
    res.set_header("Cache-Control", "no-store");
    if (!who.ok()) {
      res.status = HttpStatusOf(who.status().code());
      res.set_content(LoginPage(std::string(who.status().message())), "text/html; charset=utf-8");
      return;
    }
    res.status = 303;
    res.set_header("Set-Cookie", LoginCookie(token));
    res.set_header("Location", "/");
  };
  http.Get("/login", Guarded([sign_in](const httplib::Request& req, httplib::Response& res) {
             if (req.has_param("token")) return sign_in(req.get_param_value("token"), res);
             res.set_header("Cache-Control", "no-store");
             res.set_content(LoginPage(""), "text/html; charset=utf-8");
           }));
  http.Post("/login", Guarded([sign_in](const httplib::Request& req, httplib::Response& res) {
              sign_in(req.get_param_value("token"), res);
            }));
  http.Post("/logout", Guarded([](const httplib::Request&, httplib::Response& res) {
              res.status = 303;
              res.set_header(
                  "Set-Cookie",
                  absl::StrCat(kCookie, "=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict"));
              res.set_header("Location", "/login");
            }));
  http.new_task_queue = [] { return new httplib::ThreadPool(kThreads); };
  // Short keep-alive so Stop() is not held up by an idle browser connection.
  http.set_keep_alive_timeout(2);
  http.set_read_timeout(10, 0);
  http.set_write_timeout(30, 0);

  http.Get(R"(/api/v1/(.*))", Guarded([this](const httplib::Request& req, httplib::Response& res) {
             HttpReply reply = api_.Get(req.matches[1].str(), req.params);
             res.status = reply.status;
             res.set_header("Cache-Control", "no-store");
             res.set_content(std::move(reply.body), reply.content_type.c_str());
           }));
  http.Get("/metrics", Guarded([this](const httplib::Request&, httplib::Response& res) {
             if (!options_.metrics_text) {
               SetError(res, 404, "NOT_FOUND", "metrics are not enabled on this server");
               return;
             }
             res.set_content(options_.metrics_text(), "text/plain; version=0.0.4");
           }));
  http.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok\n", "text/plain");
  });
  http.Get(R"(/assets/([A-Za-z0-9._-]+))",
           Guarded([](const httplib::Request& req, httplib::Response& res) {
             const std::optional<web::EmbeddedAsset> asset =
                 web::FindAsset(absl::StrCat("assets/", req.matches[1].str()));
             if (!asset) {
               SetError(res, 404, "NOT_FOUND", absl::StrCat("no asset ", req.path));
               return;
             }
             // Revalidated on every load: a rebuilt scheduler serves a new app.js at once.
             res.set_header("Cache-Control", "no-cache");
             res.set_content(reinterpret_cast<const char*>(asset->data), asset->size,
                             asset->content_type);
           }));
  // The app's pages: one index.html, routed on the client.
  const auto index = Guarded([this](const httplib::Request&, httplib::Response& res) {
    res.set_header("Cache-Control", "no-cache");
    res.set_content(index_html_, "text/html; charset=utf-8");
  });
  http.Get("/", index);
  http.Get(R"(/sweeps/[^/]+/?)", index);
  http.Get(R"(/runs/[^/]+/?)", index);

  http.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;  // a handler's own error document
    SetError(res, res.status, res.status == 404 ? "NOT_FOUND" : "ERROR",
             absl::StrCat("no page or API route ", req.path));
  });
  http.set_exception_handler(
      [](const httplib::Request& req, httplib::Response& res, std::exception_ptr error) {
        std::string what = "unknown exception";
        try {
          if (error) std::rethrow_exception(error);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        spdlog::error("event=http_request_failed path=\"{}\" error=\"{}\"", req.path, what);
        SetError(res, 500, "INTERNAL", what);
      });
  http.set_logger([](const httplib::Request& req, const httplib::Response& res) {
    spdlog::debug("event=http_request method={} path=\"{}\" status={}", req.method, req.path,
                  res.status);
  });
}

}  // namespace parity::server
