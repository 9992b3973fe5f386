#include "server/api/http_server.h"

#include <httplib.h>

#include <exception>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
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

HttpServer::HttpServer(HttpServerOptions options, Scheduler& scheduler, RunStore& store)
    : options_(std::move(options)),
      api_(scheduler, store),
      index_html_(web::IndexHtmlWith("<base href=\"/\">")),
      server_(std::make_unique<httplib::Server>()) {}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(HttpServerOptions options,
                                                              Scheduler& scheduler,
                                                              RunStore& store) {
  PARITY_ASSIGN_OR_RETURN(const HostPort address, ParseListen(options.listen));
  std::unique_ptr<HttpServer> server(new HttpServer(std::move(options), scheduler, store));
  if (server->index_html_.empty()) {
    return absl::InternalError("the dashboard's index.html is not embedded in this binary");
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

void HttpServer::InstallRoutes() {
  httplib::Server& http = *server_;
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
