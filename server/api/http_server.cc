#include "server/api/http_server.h"

#include <fstream>
#include <optional>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "core/status_macros.h"
#include "spdlog/spdlog.h"
#include "web/dashboard_documents.h"
#include "web/web_assets.h"

namespace parity::server {
namespace {

constexpr char kJson[] = "application/json";
constexpr char kHtml[] = "text/html; charset=utf-8";
constexpr char kCookie[] = "parity_session";

// Only this origin's files, no inline script or style (web/ sets styles through the CSSOM), no
// framing; `base-uri 'self'` for index.html's <base href="/">.
constexpr char kContentSecurityPolicy[] =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; base-uri 'self'; form-action 'self'; "
    "frame-ancestors 'none'";

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

absl::StatusOr<std::string> ReadFile(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in || text.str().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("https: cannot read the ", what, " '", path, "'"));
  }
  return text.str();
}

HttpResponse Reply(int status, std::string content_type, std::string body) {
  HttpResponse response;
  response.status = status;
  response.content_type = std::move(content_type);
  response.body = std::move(body);
  return response;
}

void SecurityHeaders(HttpResponse& response) {
  response.headers.emplace_back("X-Frame-Options", "DENY");
  response.headers.emplace_back("Content-Security-Policy", kContentSecurityPolicy);
  // Not no-referrer: under it browsers send `Origin: null` on same-origin POSTs (Fetch's
  // "serializing a request origin"), and the sign-in form could not pass CheckOrigin. With
  // same-origin other sites still get no referrer at all.
  response.headers.emplace_back("Referrer-Policy", "same-origin");
  response.headers.emplace_back("X-Content-Type-Options", "nosniff");
}

HttpResponse ErrorResponse(int status, std::string_view code, std::string_view message) {
  HttpResponse response = Reply(status, kJson, web::ErrorJson(status, code, message));
  response.headers.emplace_back("Cache-Control", "no-store");
  return response;
}

// The rule (access_control.cc's kRules) of a request; anything unknown is a page (needs read).
std::string RuleOf(const HttpRequest& request) {
  const std::string& path = request.path;
  if (request.method == "POST" && (path == "/login" || path == "/logout")) {
    return absl::StrCat("POST ", path);
  }
  if (request.method != "GET" && request.method != "HEAD") return "GET /pages";
  if (absl::StartsWith(path, "/api/v1/")) return "GET /api/v1";
  if (absl::StartsWith(path, "/assets/")) return "GET /assets";
  if (path == "/metrics" || path == "/healthz" || path == "/login") {
    return absl::StrCat("GET ", path);
  }
  return "GET /pages";
}

size_t BodyLimitOf(const HttpRequest& request) {
  if (request.method == "POST" && request.path == "/login") return kMaxLoginBody;
  if (request.method == "POST" && request.path == "/logout") return kMaxLogoutBody;
  return 0;
}

std::string CookieSession(const HttpRequest& request) {
  for (absl::string_view part : absl::StrSplit(request.Header("cookie"), ';')) {
    part = absl::StripAsciiWhitespace(part);
    if (absl::ConsumePrefix(&part, kCookie) && absl::ConsumePrefix(&part, "=")) {
      return std::string(part);
    }
  }
  return "";
}

// "%41+b" → "A b" (application/x-www-form-urlencoded).
std::string FormDecode(absl::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    int hex = 0;
    if (text[i] == '+') {
      out += ' ';
    } else if (text[i] == '%' && i + 2 < text.size() &&
               absl::SimpleHexAtoi(text.substr(i + 1, 2), &hex)) {
      out += static_cast<char>(hex);
      i += 2;
    } else {
      out += text[i];
    }
  }
  return out;
}

std::string FormField(absl::string_view body, absl::string_view name) {
  for (absl::string_view pair : absl::StrSplit(body, '&')) {
    if (absl::ConsumePrefix(&pair, name) && absl::ConsumePrefix(&pair, "=")) {
      return FormDecode(pair);
    }
  }
  return "";
}

// A POST that changes the sign-in state must come from a page of this server: its Origin's
// host[:port] must be the Host the browser addressed (so a proxy in front keeps working when it
// passes Host through), and over TLS its scheme https. Browsers send Origin on every POST;
// a client without one has no use for a cookie (it sends its token as a bearer).
absl::Status CheckOrigin(const HttpRequest& request, bool tls) {
  const std::string& origin = request.Header("origin");
  const std::string& host = request.Header("host");
  if (origin.empty()) {
    return absl::PermissionDeniedError(absl::StrCat(
        request.method, " ", request.path,
        " needs an Origin header (browsers send one; scripts use Authorization: Bearer)"));
  }
  absl::string_view authority = origin;
  const bool https = absl::ConsumePrefix(&authority, "https://");
  if (!https && (tls || !absl::ConsumePrefix(&authority, "http://"))) {
    return absl::PermissionDeniedError(
        absl::StrCat("cross-site request refused: Origin '", origin, "' is not this server"));
  }
  if (host.empty() || !absl::EqualsIgnoreCase(authority, host)) {
    return absl::PermissionDeniedError(absl::StrCat("cross-site request refused: Origin '", origin,
                                                    "' is not this server (", host, ")"));
  }
  return absl::OkStatus();
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

// Where to go after signing in: a page of this site (a path of plain characters, not "//..."
// which a browser reads as another host), else "/". What a signed-out page was is kept in
// /login?next=..., so that a colleague's link to a sweep lands on that sweep.
std::string SafeNext(absl::string_view next) {
  constexpr absl::string_view kPlain =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~/";
  if (next.size() < 2 || next.size() > 512 || next[0] != '/' || next[1] == '/' ||
      next.find_first_not_of(kPlain) != absl::string_view::npos ||
      absl::StartsWith(next, "/login") || absl::StartsWith(next, "/logout")) {
    return "/";
  }
  return std::string(next);
}

std::string ParamOr(const HttpRequest& request, const std::string& name) {
  auto it = request.params.find(name);
  return it == request.params.end() ? "" : it->second;
}

// The sign-in page: no inline style or script (the CSP allows neither); styles.css has its look.
// It says where a token comes from, the local stack's included.
std::string LoginPage(absl::string_view message, absl::string_view next) {
  return absl::StrCat(
      "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<title>Parity: sign in</title><link rel=\"stylesheet\" href=\"/assets/styles.css\">"
      "</head><body class=\"login-page\"><main><h1>Parity</h1>",
      message.empty()
          ? ""
          : absl::StrCat("<p class=\"error\" role=\"alert\">", HtmlEscape(message), "</p>"),
      "<form method=\"post\" action=\"/login\"><label for=\"token\">Access token (a viewer's "
      "or better)</label><input id=\"token\" name=\"token\" "
      "type=\"password\" autocomplete=\"off\" required autofocus>"
      "<input type=\"hidden\" name=\"next\" value=\"",
      HtmlEscape(SafeNext(next)),
      "\"><input type=\"submit\" value=\"Sign in\"></form>"
      "<h2>Where tokens come from</h2><ul data-testid=\"token-help\">"
      "<li>The local stack (<code>deploy/local/up.sh</code>, <code>deploy/demo.sh</code>): the "
      "admin token is in <code>.parity/admin.token</code> (the stack's <code>--dir</code>), "
      "written at its first start.</li>"
      "<li>Any scheduler: an admin makes one with <code>parity token create --name NAME --role "
      "viewer</code>.</li>"
      "<li>A link <code>/login?token=TOKEN</code> pasted into the address bar signs in too.</li>"
      "</ul></main></body></html>");
}

}  // namespace

HttpServer::HttpServer(HttpServerOptions options, SweepsService& sweeps, ReadModels& reads,
                       AccessControl& access)
    : options_(std::move(options)),
      access_(access),
      api_(sweeps, reads, options_.api_replies),
      sessions_(clock_, options_.sessions),
      index_html_(web::IndexHtmlWith("<base href=\"/\">")) {}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(HttpServerOptions options,
                                                              SweepsService& sweeps,
                                                              ReadModels& reads,
                                                              AccessControl& access) {
  PARITY_ASSIGN_OR_RETURN(const HostPort address, ParseListen(options.listen));
  std::unique_ptr<HttpServer> server(new HttpServer(std::move(options), sweeps, reads, access));
  if (server->index_html_.empty()) {
    return absl::InternalError("the dashboard's index.html is not embedded in this binary");
  }
  const HttpServerOptions& o = server->options_;
  MicrohttpdServer::Options transport;
  transport.host = address.host;
  transport.port = address.port;
  transport.limits = o.limits;
  if (!o.tls_cert_file.empty()) {
    PARITY_ASSIGN_OR_RETURN(transport.tls_cert_pem, ReadFile(o.tls_cert_file, "certificate"));
    PARITY_ASSIGN_OR_RETURN(transport.tls_key_pem, ReadFile(o.tls_key_file, "key"));
  }
  auto refusal = [](int status, const std::string& message) {
    HttpResponse response =
        ErrorResponse(status, status == 413 ? "PAYLOAD_TOO_LARGE" : "INTERNAL", message);
    SecurityHeaders(response);
    return response;
  };
  PARITY_ASSIGN_OR_RETURN(
      server->transport_,
      MicrohttpdServer::Start(
          std::move(transport), &BodyLimitOf,
          [s = server.get()](const HttpRequest& r) { return s->Handle(r); }, refusal));
  spdlog::info("event=http_serving address={} port={} tls={}", o.listen, server->port(),
               !o.tls_cert_file.empty());
  return server;
}

HttpServer::~HttpServer() { Stop(); }

void HttpServer::Stop() {
  if (transport_ != nullptr) transport_->Stop();
}

std::string HttpServer::SessionCookie(const std::string& session_id) const {
  return absl::StrCat(kCookie, "=", session_id, "; Path=/; HttpOnly; SameSite=Strict",
                      options_.tls_cert_file.empty() ? "" : "; Secure");
}

HttpResponse HttpServer::Handle(const HttpRequest& request) {
  const std::string rule = RuleOf(request);
  std::optional<HttpResponse> refused = Refuse(request, rule);
  HttpResponse response = refused.has_value() ? std::move(*refused) : Route(request);
  SecurityHeaders(response);
  spdlog::debug("event=http_request method={} path=\"{}\" status={}", request.method, request.path,
                response.status);
  return response;
}

std::optional<HttpResponse> HttpServer::Refuse(const HttpRequest& request,
                                               const std::string& rule) {
  if (rule == "POST /login" || rule == "POST /logout") {
    if (absl::Status origin = CheckOrigin(request, !options_.tls_cert_file.empty()); !origin.ok()) {
      return ErrorResponse(403, "PERMISSION_DENIED", std::string(origin.message()));
    }
  }
  // The token: a bearer header, else the token of the cookie's session.
  const std::string header = request.Header("authorization");
  std::string token(AccessControl::BearerToken(header));
  const std::string session = token.empty() ? CookieSession(request) : "";
  if (!session.empty()) token = sessions_.TokenOf(session).value_or("");
  absl::StatusOr<Identity> who = access_.Authorize(token, rule);
  if (who.ok()) return std::nullopt;
  const absl::StatusCode code = who.status().code();
  // A session whose token was revoked or expired ends with it.
  if (!session.empty() && code == absl::StatusCode::kUnauthenticated) sessions_.Close(session);
  if (rule == "GET /pages" && code == absl::StatusCode::kUnauthenticated) {
    HttpResponse to_login = Reply(302, kHtml, "");
    const std::string next = SafeNext(request.path);
    to_login.headers = {{"Location", next == "/" ? "/login" : absl::StrCat("/login?next=", next)},
                        {"Cache-Control", "no-store"}};
    return to_login;
  }
  HttpResponse response = ErrorResponse(HttpStatusOf(code), absl::StatusCodeToString(code),
                                        std::string(who.status().message()));
  if (code == absl::StatusCode::kUnauthenticated) {
    response.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"parity\"");
  }
  return response;
}

// Signing in: a valid token of a reading role opens a session, whose id becomes an HttpOnly
// cookie. From a link (?token=) or the form; either way the answer redirects to / so that the
// token leaves the address bar and the browser's history.
HttpResponse HttpServer::SignIn(const HttpRequest& request, const std::string& token,
                                const std::string& next) {
  absl::StatusOr<Identity> who = access_.Authorize(token, "GET /pages");
  if (!who.ok()) {
    HttpResponse page = Reply(HttpStatusOf(who.status().code()), kHtml,
                              LoginPage(std::string(who.status().message()), next));
    page.headers.emplace_back("Cache-Control", "no-store");
    return page;
  }
  if (const std::string old = CookieSession(request); !old.empty()) sessions_.Close(old);
  HttpResponse response = Reply(303, kHtml, "");
  response.headers = {{"Set-Cookie", SessionCookie(sessions_.Open(token))},
                      {"Location", SafeNext(next)},
                      {"Cache-Control", "no-store"}};
  return response;
}

HttpResponse HttpServer::SignOut(const HttpRequest& request) {
  sessions_.Close(CookieSession(request));
  HttpResponse response = Reply(303, kHtml, "");
  response.headers = {
      {"Set-Cookie", absl::StrCat(kCookie, "=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict")},
      {"Location", "/login"},
      {"Cache-Control", "no-store"}};
  return response;
}

HttpResponse HttpServer::Route(const HttpRequest& request) {
  const std::string& path = request.path;
  const bool get = request.method == "GET" || request.method == "HEAD";
  if (request.method == "POST" && path == "/login") {
    return SignIn(request, FormField(request.body, "token"), FormField(request.body, "next"));
  }
  if (request.method == "POST" && path == "/logout") return SignOut(request);
  if (get && path == "/login") {
    if (auto it = request.params.find("token"); it != request.params.end()) {
      // A sign-in link followed from another site would sign the browser in as someone else.
      const std::string& site = request.Header("sec-fetch-site");
      if (!site.empty() && site != "none" && site != "same-origin") {
        return ErrorResponse(403, "PERMISSION_DENIED",
                             "a sign-in link works only typed or pasted into the address bar, "
                             "not followed from another site");
      }
      return SignIn(request, it->second, ParamOr(request, "next"));
    }
    HttpResponse page = Reply(200, kHtml, LoginPage("", ParamOr(request, "next")));
    page.headers.emplace_back("Cache-Control", "no-store");
    return page;
  }
  if (get && path == "/healthz") return Reply(200, "text/plain", "ok\n");
  if (get && absl::StartsWith(path, "/api/v1/")) {
    HttpReply reply = api_.Get(absl::string_view(path).substr(8), request.params);
    HttpResponse response =
        Reply(reply.status, std::move(reply.content_type), std::move(reply.body));
    response.headers.emplace_back("Cache-Control", "no-store");
    return response;
  }
  if (get && path == "/metrics") {
    if (!options_.metrics_text) {
      return ErrorResponse(404, "NOT_FOUND", "metrics are not enabled on this server");
    }
    return Reply(200, "text/plain; version=0.0.4", options_.metrics_text());
  }
  if (get && absl::StartsWith(path, "/assets/")) {
    const std::string name = path.substr(1);
    const bool plain =
        name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-",
                               7) == std::string::npos;
    const std::optional<web::EmbeddedAsset> asset = plain ? web::FindAsset(name) : std::nullopt;
    if (!asset) return ErrorResponse(404, "NOT_FOUND", absl::StrCat("no asset ", path));
    HttpResponse response = Reply(200, asset->content_type, std::string(asset->content()));
    // Revalidated on every load: a rebuilt scheduler serves a new app.js at once.
    response.headers.emplace_back("Cache-Control", "no-cache");
    return response;
  }
  // The app's pages: one index.html, routed on the client.
  const std::vector<std::string> parts =
      absl::StrSplit(absl::StripSuffix(path, "/"), '/', absl::SkipEmpty());
  const bool page =
      path == "/" || (parts.size() == 2 && (parts[0] == "sweeps" || parts[0] == "runs"));
  if (get && page) {
    HttpResponse response = Reply(200, kHtml, index_html_);
    response.headers.emplace_back("Cache-Control", "no-cache");
    return response;
  }
  return ErrorResponse(404, "NOT_FOUND", absl::StrCat("no page or API route ", path));
}

}  // namespace parity::server
