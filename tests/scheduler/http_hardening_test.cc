// The web port against hostile clients, on the real parity-scheduler process (its own memory,
// its own sockets): slow headers do not freeze it and are cut by the request deadline, a huge
// body is refused from its headers without the process growing, one address cannot hold more
// than its share of connections, every route has a body limit, and the metrics port refuses
// plaintext off loopback (checked on the resolved address) at start.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "clients/cpp/loopback_address.h"
#include "tests/scheduler/scheduler_process.h"
#include "tests/support/postgres_environment.h"
#include "tests/support/test_tokens.h"

namespace parity::server::testing {
namespace {

namespace fs = std::filesystem;
using ::parity::testing::kTestAdminToken;
using ::testing::HasSubstr;

constexpr absl::Duration kDeadline = absl::Seconds(3);

fs::path Scratch(const std::string& name) {
  const fs::path dir = fs::path(::testing::TempDir()) / absl::StrCat("http_hardening-", name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// The common flags of a scheduler on loopback ports picked by the kernel.
std::vector<std::string> BaseArgs(const fs::path& dir, const std::string& database_url) {
  const fs::path token = dir / "admin.token";
  std::ofstream(token) << kTestAdminToken << "\n";
  fs::permissions(token, fs::perms::owner_read | fs::perms::owner_write);
  return {"--database-url",
          database_url,
          "--listen",
          "127.0.0.1:0",
          "--http-listen",
          "127.0.0.1:0",
          "--metrics-listen",
          "",
          "--bootstrap-token-file",
          token.string(),
          "--http-request-deadline",
          "3s",
          "--db-pool-size",
          "4"};
}

class HttpHardeningTest : public ::testing::Test {
 protected:
  void StartScheduler(std::vector<std::string> extra = {}) {
    PARITY_REQUIRE_POSTGRES();
    const fs::path dir = Scratch(::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::vector<std::string> args =
        BaseArgs(dir, parity::testing::PostgresEnvironment::FreshDatabase());
    args.insert(args.end(), extra.begin(), extra.end());
    process_ = std::make_unique<SchedulerProcess>(PARITY_SCHEDULER_BINARY, args,
                                                  (dir / "scheduler.log").string());
    ASSERT_TRUE(process_->WaitServing()) << "parity-scheduler did not start:\n" << process_->Log();
  }

  // GET /healthz from `source`: its time, or an infinite duration when it failed.
  absl::Duration TimedHealthz(const std::string& source = "127.0.0.1") {
    const absl::Time start = absl::Now();
    const int fd = ConnectFrom(source, process_->http_port());
    if (fd < 0) return absl::InfiniteDuration();
    const bool sent = SendAll(fd, "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    const std::string head = ReadHead(fd, absl::Seconds(5));
    ::close(fd);
    if (!sent || StatusOf(head) != 200) return absl::InfiniteDuration();
    return absl::Now() - start;
  }

  std::unique_ptr<SchedulerProcess> process_;
};

TEST_F(HttpHardeningTest, SlowHeadersDoNotFreezeThePortAndAreCutByTheDeadline) {
  StartScheduler();
  // More slow clients than the old server had threads (8), each sending a header line a
  // second: never idle long enough for an inactivity timeout, only the deadline ends them.
  constexpr int kSlow = 16;
  std::vector<int> slow;
  std::vector<absl::Time> opened, closed(kSlow, absl::InfiniteFuture());
  for (int i = 0; i < kSlow; ++i) {
    slow.push_back(ConnectFrom("127.0.0.1", process_->http_port()));
    ASSERT_GE(slow.back(), 0) << "slow connection " << i;
    opened.push_back(absl::Now());
    ASSERT_TRUE(SendAll(slow.back(), "GET /api/v1/sweeps HTTP/1.1\r\nHost: x\r\n"));
  }
  absl::Duration worst = absl::ZeroDuration();
  int probes = 0;
  absl::Time next_line = absl::Now() + absl::Seconds(1);
  const absl::Time end = absl::Now() + kDeadline + absl::Seconds(4);
  while (absl::Now() < end) {
    worst = std::max(worst, TimedHealthz());
    ++probes;
    const bool line_due = absl::Now() >= next_line;
    if (line_due) next_line += absl::Seconds(1);
    for (int i = 0; i < kSlow; ++i) {
      if (closed[i] != absl::InfiniteFuture()) continue;
      if (ClosedByPeer(slow[i], absl::ZeroDuration()) ||
          (line_due && !SendAll(slow[i], "X-Slow: 1\r\n"))) {
        closed[i] = absl::Now();
      }
    }
    absl::SleepFor(absl::Milliseconds(150));
  }
  EXPECT_GE(probes, 10);
  EXPECT_LT(worst, absl::Seconds(1))
      << "/healthz must answer within 1 s while " << kSlow << " clients trickle headers";
  for (int i = 0; i < kSlow; ++i) {
    const absl::Duration lived = closed[i] - opened[i];
    EXPECT_GE(lived, kDeadline - absl::Milliseconds(500)) << "connection " << i << " cut early";
    EXPECT_LE(lived, kDeadline + absl::Seconds(2))
        << "connection " << i << " should be cut by the 3 s request deadline";
    ::close(slow[i]);
  }
}

TEST_F(HttpHardeningTest, AHugeLoginBodyIsRefusedFromItsHeadersWithoutTheProcessGrowing) {
  StartScheduler();
  const int port = process_->http_port();
  ASSERT_LT(TimedHealthz(), absl::Seconds(1));
  const long rss_before = process_->RssKib();
  ASSERT_GT(rss_before, 0);
  // Declared: 1 GiB. The 413 must come before any of the body is sent.
  const int declared = ConnectFrom("127.0.0.1", port);
  ASSERT_TRUE(SendAll(declared, absl::StrCat("POST /login HTTP/1.1\r\nHost: 127.0.0.1:", port,
                                             "\r\nOrigin: http://127.0.0.1:", port,
                                             "\r\nContent-Type: application/x-www-form-urlencoded"
                                             "\r\nContent-Length: 1073741824\r\n\r\n")));
  const std::string head = ReadHead(declared, absl::Seconds(2));
  EXPECT_EQ(StatusOf(head), 413) << "a declared 1 GiB body should be refused at once: " << head;
  EXPECT_THAT(head, HasSubstr("X-Frame-Options: DENY"));
  ::close(declared);
  // Streamed without a length (chunked): cut once past the 4 KiB limit, whatever follows.
  const int streamed = ConnectFrom("127.0.0.1", port);
  ASSERT_TRUE(SendAll(streamed, absl::StrCat("POST /login HTTP/1.1\r\nHost: 127.0.0.1:", port,
                                             "\r\nOrigin: http://127.0.0.1:", port,
                                             "\r\nTransfer-Encoding: chunked\r\n\r\n")));
  const std::string chunk = absl::StrCat("10000\r\n", std::string(0x10000, 'a'), "\r\n");
  size_t sent = 0;
  absl::Duration worst = absl::ZeroDuration();
  const absl::Time end = absl::Now() + absl::Seconds(5);
  while (absl::Now() < end && sent < (256u << 20) && SendAll(streamed, chunk)) {
    sent += chunk.size();
    if (sent % (4u << 20) < chunk.size()) worst = std::max(worst, TimedHealthz());
  }
  EXPECT_LT(sent, 16u << 20) << "the server should cut a streamed login body past 4 KiB, took "
                             << sent << " bytes";
  EXPECT_TRUE(ClosedByPeer(streamed, absl::Seconds(2)));
  ::close(streamed);
  worst = std::max(worst, TimedHealthz());
  EXPECT_LT(worst, absl::Seconds(1)) << "/healthz while a huge body is refused";
  const long growth = process_->RssKib() - rss_before;
  EXPECT_LT(growth, 8 * 1024) << "the scheduler's RSS grew by " << growth << " KiB";
}

TEST_F(HttpHardeningTest, OneAddressHoldsAtMostItsShareOfConnections) {
  StartScheduler({"--http-max-connections-per-ip", "8"});
  const int port = process_->http_port();
  std::vector<int> held;
  for (int i = 0; i < 8; ++i) {
    held.push_back(ConnectFrom("127.0.0.1", port));
    ASSERT_GE(held.back(), 0);
  }
  absl::SleepFor(absl::Milliseconds(200));  // accepted and counted
  for (int fd : held) EXPECT_FALSE(ClosedByPeer(fd, absl::ZeroDuration())) << "within the cap";
  const int extra = ConnectFrom("127.0.0.1", port);
  ASSERT_GE(extra, 0);
  SendAll(extra, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(StatusOf(ReadHead(extra, absl::Seconds(2))), 0)
      << "a ninth connection from 127.0.0.1 should be closed unanswered";
  ::close(extra);
  EXPECT_LT(TimedHealthz("127.0.0.2"), absl::Seconds(1))
      << "another address is not held back by 127.0.0.1's connections";
  for (int fd : held) ::close(fd);
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_LT(TimedHealthz("127.0.0.1"), absl::Seconds(1)) << "the slots come back on close";
}

TEST_F(HttpHardeningTest, EveryRouteHasABodyLimit) {
  StartScheduler();
  const int port = process_->http_port();
  const auto status_with_body = [&](const std::string& method, const std::string& path,
                                    size_t length) {
    const int fd = ConnectFrom("127.0.0.1", port);
    SendAll(fd, absl::StrCat(method, " ", path, " HTTP/1.1\r\nHost: 127.0.0.1:", port,
                             "\r\nOrigin: http://127.0.0.1:", port, "\r\nAuthorization: Bearer ",
                             kTestAdminToken, "\r\nContent-Length: ", length, "\r\n\r\n"));
    const int status = StatusOf(ReadHead(fd, absl::Seconds(2)));
    ::close(fd);
    return status;
  };
  for (const char* path : {"/healthz", "/", "/sweeps/x", "/api/v1/sweeps", "/metrics",
                           "/assets/app.js", "/login", "/no/such/route"}) {
    EXPECT_EQ(status_with_body("GET", path, 1), 413) << "GET " << path << " takes no body";
  }
  EXPECT_EQ(status_with_body("POST", "/login", 4097), 413) << "POST /login: 4 KiB";
  EXPECT_EQ(status_with_body("POST", "/logout", 1025), 413) << "POST /logout: 1 KiB";
  EXPECT_EQ(status_with_body("PUT", "/api/v1/sweeps", 1), 413);
  // Within the limit the request goes on to its route (the body is no token: 401).
  const int fd = ConnectFrom("127.0.0.1", port);
  SendAll(fd, absl::StrCat("POST /login HTTP/1.1\r\nHost: 127.0.0.1:", port,
                           "\r\nOrigin: http://127.0.0.1:", port,
                           "\r\nContent-Type: application/x-www-form-urlencoded\r\n"
                           "Content-Length: 4096\r\n\r\ntoken=",
                           std::string(4090, 'x')));
  EXPECT_EQ(StatusOf(ReadHead(fd, absl::Seconds(2))), 401);
  ::close(fd);
}

// Start-up refusals need no database: the check comes first.
int RefusedStart(const std::vector<std::string>& extra, std::string* log) {
  const fs::path dir = Scratch(absl::StrCat("refused-", extra.size(), "-", extra.back().size()));
  // The base flags but those `extra` gives (CLI11 takes each flag once).
  const std::vector<std::string> base = BaseArgs(dir, "postgresql://127.0.0.1:1/never");
  std::vector<std::string> args = {"--no-migrate"};
  for (size_t i = 0; i + 1 < base.size(); i += 2) {
    if (std::find(extra.begin(), extra.end(), base[i]) != extra.end()) continue;
    args.insert(args.end(), {base[i], base[i + 1]});
  }
  args.insert(args.end(), extra.begin(), extra.end());
  SchedulerProcess process(PARITY_SCHEDULER_BINARY, args, (dir / "scheduler.log").string());
  const std::optional<int> code = process.ExitCode(absl::Seconds(20));
  *log = process.Log();
  return code.value_or(-1);
}

TEST(MetricsListenTest, PlaintextOffLoopbackIsRefusedAtStartNamingTheFlag) {
  std::string log;
  EXPECT_NE(RefusedStart({"--metrics-listen", "0.0.0.0:0"}, &log), 0) << log;
  EXPECT_THAT(log, HasSubstr("--metrics-listen 0.0.0.0:0")) << log;
  EXPECT_THAT(log, HasSubstr("--insecure-plaintext")) << log;
  // A name that only looks like loopback: .invalid never resolves (RFC 6761).
  EXPECT_NE(RefusedStart({"--metrics-listen", "127.0.0.1.invalid:0"}, &log), 0) << log;
  EXPECT_THAT(log, HasSubstr("--metrics-listen 127.0.0.1.invalid:0")) << log;
  EXPECT_NE(RefusedStart({"--http-listen", "127.0.0.1.invalid:0"}, &log), 0) << log;
  EXPECT_THAT(log, HasSubstr("--http-listen 127.0.0.1.invalid:0")) << log;
}

TEST(LoopbackAddressTest, DecidesOnTheResolvedAddress) {
  for (const char* address :
       {"127.0.0.1:80", "127.8.9.10:1", "[::1]:9464", "::1", "localhost:80", "localhost"}) {
    const absl::StatusOr<bool> loopback = clients::IsLoopbackAddress(address);
    ASSERT_TRUE(loopback.ok()) << address << ": " << loopback.status();
    EXPECT_TRUE(*loopback) << address << " is loopback";
  }
  for (const char* address : {"0.0.0.0:80", ":80", "[::]:80", "10.1.2.3:80", "192.0.2.1",
                              "[2001:db8::1]:80", "[::ffff:10.0.0.1]:80"}) {
    const absl::StatusOr<bool> loopback = clients::IsLoopbackAddress(address);
    ASSERT_TRUE(loopback.ok()) << address << ": " << loopback.status();
    EXPECT_FALSE(*loopback) << address << " is not loopback";
  }
  EXPECT_EQ(clients::IsLoopbackAddress("127.0.0.1.invalid:80").status().code(),
            absl::StatusCode::kInvalidArgument)
      << "a name that does not resolve cannot be shown to be loopback";
}

}  // namespace
}  // namespace parity::server::testing
