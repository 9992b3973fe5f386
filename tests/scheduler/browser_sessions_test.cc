// Browser sessions and the web port's headers, over real HTTP and gRPC to a SchedulerServer on
// a throwaway PostgreSQL: the cookie is a session id, not the token (and is no token anywhere);
// signing out and revoking the token end the session; sign-in and sign-out refuse other sites;
// every response carries the security headers. BrowserSessions' expiry is checked on a
// FakeClock.
#include "server/api/browser_sessions.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "parity/v1/sweep_service.grpc.pb.h"
#include "parity/v1/token_service.grpc.pb.h"
#include "server/scheduler_server.h"
#include "tests/scheduler/scheduler_fixture.h"
#include "tests/support/test_tokens.h"

namespace parity::server::testing {
namespace {

using ::parity::testing::kTestAdminToken;
using ::parity::testing::TokenChannel;
using ::testing::HasSubstr;
using ::testing::StartsWith;

class BrowserSessionsHttpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    PARITY_REQUIRE_POSTGRES();
    ServerOptions options;
    options.listen_address = "127.0.0.1:0";
    options.http_listen = "127.0.0.1:0";
    options.database_url = parity::testing::PostgresEnvironment::FreshDatabase();
    options.pool_size = 4;
    options.bootstrap_token = kTestAdminToken;
    absl::StatusOr<std::unique_ptr<SchedulerServer>> server =
        SchedulerServer::Start(options, &StubPlanner);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    origin_ = absl::StrCat("http://127.0.0.1:", server_->http_port());
  }

  httplib::Client Http() {
    httplib::Client http("127.0.0.1", server_->http_port());
    http.set_read_timeout(10);
    return http;
  }

  // POST /login with `token` from `origin`; the response.
  httplib::Result Login(const std::string& token, const std::string& origin) {
    httplib::Headers headers;
    if (!origin.empty()) headers.emplace("Origin", origin);
    return Http().Post("/login", headers, absl::StrCat("token=", token),
                       "application/x-www-form-urlencoded");
  }

  // The session id a successful sign-in set.
  std::string SignIn(const std::string& token) {
    httplib::Result login = Login(token, origin_);
    EXPECT_TRUE(login);
    if (!login) return "";
    EXPECT_EQ(login->status, 303) << login->body;
    const std::string cookie = login->get_header_value("Set-Cookie");
    EXPECT_THAT(cookie, StartsWith("parity_session="));
    EXPECT_THAT(cookie, HasSubstr("HttpOnly"));
    EXPECT_THAT(cookie, HasSubstr("SameSite=Strict"));
    return cookie.substr(15, cookie.find(';') - 15);
  }

  int ApiStatusWithCookie(const std::string& session) {
    httplib::Result api =
        Http().Get("/api/v1/sweeps", {{"Cookie", absl::StrCat("parity_session=", session)}});
    return api ? api->status : -1;
  }

  std::string MakeToken(const std::string& name, v1::Role role) {
    v1::CreateTokenRequest request;
    request.set_name(name);
    request.set_role(role);
    v1::CreateTokenResponse response;
    grpc::ClientContext context;
    const grpc::Status status = v1::TokenService::NewStub(TokenChannel(server_->port()))
                                    ->CreateToken(&context, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response.secret();
  }

  std::unique_ptr<SchedulerServer> server_;
  std::string origin_;
};

TEST_F(BrowserSessionsHttpTest, TheCookieIsASessionIdThatIsNoBearerToken) {
  const std::string session = SignIn(kTestAdminToken);
  ASSERT_FALSE(session.empty());
  EXPECT_NE(session, kTestAdminToken);
  EXPECT_THAT(session, ::testing::Not(HasSubstr(kTestAdminToken)));
  EXPECT_EQ(ApiStatusWithCookie(session), 200) << "the cookie signs the browser in";
  httplib::Client http = Http();
  http.set_bearer_token_auth(session);
  httplib::Result as_bearer = http.Get("/api/v1/sweeps");
  ASSERT_TRUE(as_bearer);
  EXPECT_EQ(as_bearer->status, 401) << "a session id is not a bearer token on the web port";
  grpc::ClientContext context;
  v1::ListSweepsResponse listed;
  EXPECT_EQ(v1::SweepService::NewStub(TokenChannel(server_->port(), session))
                ->ListSweeps(&context, v1::ListSweepsRequest(), &listed)
                .error_code(),
            grpc::StatusCode::UNAUTHENTICATED)
      << "nor on the gRPC port";
}

TEST_F(BrowserSessionsHttpTest, SigningOutEndsTheSession) {
  const std::string session = SignIn(kTestAdminToken);
  ASSERT_EQ(ApiStatusWithCookie(session), 200);
  httplib::Result logout = Http().Post(
      "/logout", {{"Origin", origin_}, {"Cookie", absl::StrCat("parity_session=", session)}}, "",
      "application/x-www-form-urlencoded");
  ASSERT_TRUE(logout);
  EXPECT_EQ(logout->status, 303);
  EXPECT_THAT(logout->get_header_value("Set-Cookie"), HasSubstr("Max-Age=0"));
  EXPECT_EQ(ApiStatusWithCookie(session), 401) << "the same cookie after signing out";
  httplib::Result page = Http().Get("/", {{"Cookie", absl::StrCat("parity_session=", session)}});
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 302) << "pages send a signed-out browser to /login";
}

// Signing in keeps its target: a signed-out page goes to /login?next=PAGE and the sign-in lands
// there; a `next` that is not a plain path of this site ("//host", a scheme, odd characters,
// /login itself) lands on / instead, so a crafted link cannot send the browser elsewhere.
TEST_F(BrowserSessionsHttpTest, SignInLandsOnThePageAskedForAndOnlyOnThisSite) {
  httplib::Result page = Http().Get("/sweeps/abc-123");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 302);
  EXPECT_EQ(page->get_header_value("Location"), "/login?next=/sweeps/abc-123");
  httplib::Result form = Http().Get("/login?next=/sweeps/abc-123");
  ASSERT_TRUE(form);
  EXPECT_THAT(form->body, HasSubstr("name=\"next\" value=\"/sweeps/abc-123\""));
  EXPECT_THAT(form->body, HasSubstr("admin.token")) << "the page says where tokens come from";
  const std::string viewer = MakeToken("next-viewer", v1::ROLE_VIEWER);
  auto form_encode = [](const std::string& text) {
    std::string out;
    constexpr char kHex[] = "0123456789ABCDEF";
    for (unsigned char c : text) out += {'%', kHex[c >> 4], kHex[c & 15]};
    return out;
  };
  struct Case {
    std::string next;
    std::string location;
  };
  for (const Case& c : std::vector<Case>{{"/sweeps/abc-123", "/sweeps/abc-123"},
                                         {"/runs/r1", "/runs/r1"},
                                         {"", "/"},
                                         {"//evil.example/x", "/"},
                                         {"https://evil.example/", "/"},
                                         {"/\\evil.example", "/"},
                                         {"/sweeps/a%0d%0aSet-Cookie:x", "/"},
                                         {"/login", "/"},
                                         {"sweeps/abc", "/"}}) {
    httplib::Result login =
        Http().Post("/login", {{"Origin", origin_}},
                    absl::StrCat("token=", viewer, "&next=", form_encode(c.next)),
                    "application/x-www-form-urlencoded");
    ASSERT_TRUE(login);
    EXPECT_EQ(login->status, 303) << c.next << ": " << login->body;
    EXPECT_EQ(login->get_header_value("Location"), c.location) << "next=" << c.next;
  }
}

TEST_F(BrowserSessionsHttpTest, RevokingTheTokenEndsItsSessions) {
  const std::string viewer = MakeToken("session-viewer", v1::ROLE_VIEWER);
  const std::string first = SignIn(viewer);
  const std::string second = SignIn(viewer);
  ASSERT_EQ(ApiStatusWithCookie(first), 200);
  ASSERT_EQ(ApiStatusWithCookie(second), 200);
  v1::RevokeTokenRequest revoke;
  revoke.set_name("session-viewer");
  v1::RevokeTokenResponse revoked;
  grpc::ClientContext context;
  ASSERT_TRUE(v1::TokenService::NewStub(TokenChannel(server_->port()))
                  ->RevokeToken(&context, revoke, &revoked)
                  .ok());
  EXPECT_EQ(ApiStatusWithCookie(first), 401) << "a revoked token's session";
  EXPECT_EQ(ApiStatusWithCookie(second), 401) << "every session of the revoked token";
}

TEST_F(BrowserSessionsHttpTest, SignInAndSignOutRefuseOtherSites) {
  for (const std::string& origin :
       {std::string("https://evil.example"), std::string("null"), std::string(""),
        absl::StrCat("http://127.0.0.1:", server_->http_port() + 1),
        absl::StrCat("https://127.0.0.1.evil.example:", server_->http_port())}) {
    httplib::Result login = Login(kTestAdminToken, origin);
    ASSERT_TRUE(login);
    EXPECT_EQ(login->status, 403) << "POST /login from Origin '" << origin << "'";
    EXPECT_EQ(login->get_header_value("Set-Cookie"), "") << origin;
  }
  const std::string session = SignIn(kTestAdminToken);
  httplib::Result logout = Http().Post(
      "/logout",
      {{"Origin", "https://evil.example"}, {"Cookie", absl::StrCat("parity_session=", session)}},
      "", "application/x-www-form-urlencoded");
  ASSERT_TRUE(logout);
  EXPECT_EQ(logout->status, 403) << "a cross-site sign-out";
  EXPECT_EQ(ApiStatusWithCookie(session), 200) << "the session survives it";
  httplib::Result link = Http().Get(absl::StrCat("/login?token=", kTestAdminToken).c_str(),
                                    {{"Sec-Fetch-Site", "cross-site"}});
  ASSERT_TRUE(link);
  EXPECT_EQ(link->status, 403) << "a sign-in link followed from another site";
  httplib::Result typed = Http().Get(absl::StrCat("/login?token=", kTestAdminToken).c_str(),
                                     {{"Sec-Fetch-Site", "none"}});
  ASSERT_TRUE(typed);
  EXPECT_EQ(typed->status, 303) << "the same link typed into the address bar";
}

TEST_F(BrowserSessionsHttpTest, EveryResponseCarriesTheSecurityHeaders) {
  httplib::Client http = Http();
  const std::string session = SignIn(kTestAdminToken);
  const httplib::Headers cookie = {{"Cookie", absl::StrCat("parity_session=", session)}};
  for (const char* path : {"/", "/sweeps/x", "/login", "/api/v1/sweeps", "/api/v1/nothing",
                           "/healthz", "/assets/app.js", "/metrics"}) {
    for (const bool signed_in : {true, false}) {
      httplib::Result response = signed_in ? http.Get(path, cookie) : http.Get(path);
      ASSERT_TRUE(response) << path;
      const std::string what = absl::StrCat(path, signed_in ? " (signed in)" : " (anonymous)");
      EXPECT_EQ(response->get_header_value("X-Frame-Options"), "DENY") << what;
      EXPECT_EQ(response->get_header_value("Referrer-Policy"), "same-origin") << what;
      EXPECT_EQ(response->get_header_value("X-Content-Type-Options"), "nosniff") << what;
      const std::string csp = response->get_header_value("Content-Security-Policy");
      EXPECT_THAT(csp, HasSubstr("frame-ancestors 'none'")) << what;
      EXPECT_THAT(csp, HasSubstr("script-src 'self'")) << what;
      EXPECT_THAT(csp, ::testing::Not(HasSubstr("unsafe-inline"))) << what;
    }
  }
  httplib::Result login = Login("wrong", origin_);
  ASSERT_TRUE(login);
  EXPECT_EQ(login->get_header_value("X-Frame-Options"), "DENY") << "POST /login";
  EXPECT_THAT(login->body, ::testing::Not(HasSubstr("<style"))) << "no inline style";
}

TEST(BrowserSessionsTest, SessionsEndWhenIdleOrOldOrClosed) {
  FakeClock clock;
  BrowserSessions sessions(
      clock, {.idle = absl::Hours(12), .lifetime = absl::Hours(48), .max_sessions = 3});
  const std::string a = sessions.Open("token-a");
  EXPECT_EQ(a.size(), 43u) << "256 random bits, web-safe base64";
  EXPECT_EQ(sessions.TokenOf(a), "token-a");
  clock.Advance(absl::Hours(11));
  EXPECT_EQ(sessions.TokenOf(a), "token-a") << "used within the idle time";
  clock.Advance(absl::Hours(11));
  EXPECT_EQ(sessions.TokenOf(a), "token-a") << "each use restarts the idle time";
  clock.Advance(absl::Hours(12) + absl::Seconds(1));
  EXPECT_EQ(sessions.TokenOf(a), std::nullopt) << "idle for more than 12 h";

  const std::string b = sessions.Open("token-b");
  for (int hour = 0; hour < 48; hour += 6) {
    clock.Advance(absl::Hours(6));
    if (hour + 6 < 48) {
      EXPECT_EQ(sessions.TokenOf(b), "token-b") << hour;
    }
  }
  clock.Advance(absl::Seconds(1));
  EXPECT_EQ(sessions.TokenOf(b), std::nullopt) << "past its 48 h lifetime";

  const std::string c = sessions.Open("token-c");
  sessions.Close(c);
  EXPECT_EQ(sessions.TokenOf(c), std::nullopt) << "closed";
  EXPECT_EQ(sessions.TokenOf("token-c"), std::nullopt) << "a token is not a session id";

  const std::string d = sessions.Open("d");
  clock.Advance(absl::Seconds(1));
  const std::string e = sessions.Open("e");
  clock.Advance(absl::Seconds(1));
  sessions.Open("f");
  sessions.Open("g");
  EXPECT_EQ(sessions.size(), 3u);
  EXPECT_EQ(sessions.TokenOf(d), std::nullopt) << "the least recently used makes room";
  EXPECT_EQ(sessions.TokenOf(e), "e");
}

}  // namespace
}  // namespace parity::server::testing
