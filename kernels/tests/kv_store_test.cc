// The gang's rendezvous store (kernels/comm/kv_store.h) over real loopback sockets: values cross
// clients, GET waits and times out, and the network-facing server refuses what it must — oversized
// values, garbage, a huge frame length, another run or gang epoch, too many connections, a silent
// connection — while it keeps serving well-behaved clients.
#include "kernels/comm/kv_store.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "absl/time/clock.h"

namespace parity::kernels {
namespace {

const KvIdentity kGang{.run_id = "run-a", .epoch = 5, .token = "0123456789abcdef0123456789abcdef"};

std::unique_ptr<KvServer> StartServer(KvLimits limits = {}) {
  auto server = KvServer::Start("127.0.0.1", 0, kGang, limits);
  EXPECT_TRUE(server.ok()) << server.status();
  return *std::move(server);
}

std::unique_ptr<KvClient> Dial(const KvServer& server, KvIdentity id = kGang) {
  auto client = KvClient::Connect(server.address(), id, absl::Seconds(5));
  EXPECT_TRUE(client.ok()) << client.status();
  return client.ok() ? *std::move(client) : nullptr;
}

// A raw TCP connection to the server, for sending what no KvClient would.
int RawConnect(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  timeval tv{.tv_sec = 5, .tv_usec = 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  return fd;
}

// Reads until the server closes (EOF, or a reset when it closed with our bytes unread: true) or
// the 5 s receive timeout (false).
bool ClosedByPeer(int fd) {
  char buf[4096];
  for (;;) {
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n == 0 || (n < 0 && errno == ECONNRESET)) return true;
    if (n < 0) return false;
  }
}

TEST(KvStoreTest, ValuesCrossClientsAndGetWaitsForASet) {
  auto server = StartServer();
  auto a = Dial(*server), b = Dial(*server);
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(a->Set("gang/x/0", std::string("\0binary\xff", 8)).ok());
  auto got = b->Get("gang/x/0", absl::Seconds(1));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, std::string("\0binary\xff", 8));
  std::thread later([&] {
    absl::SleepFor(absl::Milliseconds(200));
    EXPECT_TRUE(a->Set("gang/x/1", "v1").ok());
  });
  got = b->Get("gang/x/1", absl::Seconds(10));
  later.join();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "v1");
  // Keys are written once: the same value again is an idempotent retry, another is refused.
  EXPECT_TRUE(a->Set("gang/x/1", "v1").ok());
  auto c = Dial(*server);
  EXPECT_FALSE(c->Set("gang/x/1", "other").ok());
}

TEST(KvStoreTest, GetOfAMissingKeyTimesOut) {
  auto server = StartServer();
  auto c = Dial(*server);
  const auto t0 = std::chrono::steady_clock::now();
  auto got = c->Get("never", absl::Milliseconds(300));
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_TRUE(absl::IsDeadlineExceeded(got.status())) << got.status();
  EXPECT_GE(s, 0.25);
  EXPECT_LT(s, 5);
  // The connection is still usable after a timeout.
  EXPECT_TRUE(c->Set("k", "v").ok());
}

TEST(KvStoreTest, OversizedValuesAndBadKeysAreRefusedAndTheServerServesOn) {
  KvLimits limits;
  limits.max_value_bytes = 1024;
  limits.max_total_bytes = 3000;
  auto server = StartServer(limits);
  auto c = Dial(*server);
  EXPECT_FALSE(c->Set("big", std::string(1025, 'x')).ok());
  EXPECT_FALSE(Dial(*server)->Set("has space", "v").ok());
  EXPECT_FALSE(Dial(*server)->Set(std::string(kMaxKeyBytes + 1, 'k'), "v").ok());
  auto d = Dial(*server);
  EXPECT_TRUE(d->Set("a", std::string(1024, 'x')).ok());
  EXPECT_TRUE(d->Set("b", std::string(1024, 'x')).ok());
  EXPECT_FALSE(d->Set("c", std::string(1024, 'x')).ok()) << "store total over its cap";
  auto e = Dial(*server);
  auto got = e->Get("a", absl::Seconds(1));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->size(), 1024u);
}

TEST(KvStoreTest, GarbageAndHugeFramesAreClosedWithoutHarm) {
  auto server = StartServer();
  const int http = RawConnect(server->port());
  const char req[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";  // length field = 'GET ' = 0x20544547
  ASSERT_EQ(::send(http, req, sizeof(req) - 1, 0), static_cast<ssize_t>(sizeof(req) - 1));
  EXPECT_TRUE(ClosedByPeer(http));
  ::close(http);
  // A well-formed frame that is not a HELLO.
  const int bad = RawConnect(server->port());
  const char frame[] = {5, 0, 0, 0, 2, 'x', 'y', 'z', 'w'};
  ASSERT_EQ(::send(bad, frame, sizeof(frame), 0), static_cast<ssize_t>(sizeof(frame)));
  EXPECT_TRUE(ClosedByPeer(bad));
  ::close(bad);
  // A frame claiming 4 GiB is refused before anything is read or allocated.
  const int huge = RawConnect(server->port());
  const unsigned char len[] = {0xff, 0xff, 0xff, 0xff};
  ASSERT_EQ(::send(huge, len, sizeof(len), 0), 4);
  EXPECT_TRUE(ClosedByPeer(huge));
  ::close(huge);
  auto c = Dial(*server);
  ASSERT_TRUE(c);
  EXPECT_TRUE(c->Set("still", "serving").ok());
}

TEST(KvStoreTest, AnotherEpochOrRunIsRefusedNamingIt) {
  auto server = StartServer();
  auto stale = KvClient::Connect(
      server->address(), {.run_id = "run-a", .epoch = 4, .token = kGang.token}, absl::Seconds(5));
  ASSERT_FALSE(stale.ok());
  EXPECT_TRUE(absl::IsUnavailable(stale.status()));
  EXPECT_NE(stale.status().message().find("gang epoch 5"), std::string::npos) << stale.status();
  EXPECT_NE(stale.status().message().find("gang epoch 4"), std::string::npos) << stale.status();
  auto other = KvClient::Connect(
      server->address(), {.run_id = "run-b", .epoch = 5, .token = kGang.token}, absl::Seconds(5));
  EXPECT_FALSE(other.ok());
}

TEST(KvStoreTest, AWrongOrMissingTokenIsRefusedWithoutEchoingIt) {
  auto server = StartServer();
  for (const std::string& token :
       {std::string(""), std::string("0123456789abcdef0123456789abcdee"), std::string("0123")}) {
    auto c = KvClient::Connect(server->address(), {.run_id = "run-a", .epoch = 5, .token = token},
                               absl::Seconds(5));
    ASSERT_FALSE(c.ok()) << "token '" << token << "' admitted";
    EXPECT_NE(c.status().message().find("gang token"), std::string::npos) << c.status();
    EXPECT_EQ(c.status().message().find(kGang.token), std::string::npos) << c.status();
  }
  EXPECT_NE(Dial(*server), nullptr);  // the right one still gets in
  // A server without a token of 128 bits is never started.
  EXPECT_FALSE(
      KvServer::Start("127.0.0.1", 0, {.run_id = "r", .epoch = 1, .token = "short"}, {}).ok());
  absl::StatusOr<std::string> a = NewGangToken(), b = NewGangToken();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->size(), 32u);
  EXPECT_NE(*a, *b);
}

TEST(KvStoreTest, ConnectionsAreCappedAndSilentOnesClosed) {
  KvLimits limits;
  limits.max_connections = 2;
  limits.idle_timeout = absl::Milliseconds(300);
  auto server = StartServer(limits);
  // A silent connection is closed after the idle timeout.
  const int silent = RawConnect(server->port());
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(ClosedByPeer(silent));
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 4);
  ::close(silent);
  limits.idle_timeout = absl::Seconds(30);
  auto capped = StartServer(limits);
  auto a = Dial(*capped), b = Dial(*capped);
  ASSERT_TRUE(a && b);
  auto third = KvClient::Connect(capped->address(), kGang, absl::Seconds(2));
  EXPECT_FALSE(third.ok());
  a.reset();  // a slot frees when a client leaves
  std::unique_ptr<KvClient> again;
  for (int i = 0; i < 50 && again == nullptr; ++i) {
    auto c = KvClient::Connect(capped->address(), kGang, absl::Seconds(2));
    if (c.ok())
      again = *std::move(c);
    else
      absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_NE(again, nullptr);
}

TEST(KvStoreTest, ServerStopsWhileAClientWaits) {
  auto server = StartServer();
  auto c = Dial(*server);
  std::thread stopper([&] {
    absl::SleepFor(absl::Milliseconds(200));
    server->Stop();
  });
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(c->Get("never", absl::Seconds(60)).ok());
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 10);
  stopper.join();
}

// The gang's watches (kv_store.h): WATCH, DONE and the store's one response to each watch.
std::vector<std::unique_ptr<KvClient>> Watches(const KvServer& server, int ranks) {
  std::vector<std::unique_ptr<KvClient>> watches;
  for (int r = 0; r < ranks; ++r) {
    watches.push_back(Dial(server));
    EXPECT_TRUE(watches.back()->Watch(r).ok());
  }
  return watches;
}

TEST(KvStoreTest, AWatchClosedWithoutDoneTellsEveryOtherWatchWhichRankLeft) {
  KvLimits limits;
  limits.ranks = 3;
  auto server = StartServer(limits);
  auto w = Watches(*server, 3);
  EXPECT_TRUE(absl::IsDeadlineExceeded(w[0]->AwaitWatchEnd(absl::Milliseconds(200)).status()))
      << "a watch holds while every rank is there";
  const auto t0 = std::chrono::steady_clock::now();
  w[1].reset();  // rank 1's process is gone: its connection closes without DONE
  for (int r : {0, 2}) {
    const absl::StatusOr<std::string> end = w[r]->AwaitWatchEnd(absl::Seconds(5));
    ASSERT_TRUE(absl::IsUnavailable(end.status())) << "rank " << r << ": " << end.status();
    EXPECT_NE(end.status().message().find("rank 1 left the gang"), std::string::npos)
        << end.status();
  }
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 2);
  // A rank watching only now (it was late) learns at once that the gang broke.
  auto late = Dial(*server);
  ASSERT_NE(late, nullptr);
  EXPECT_TRUE(late->Watch(1).ok());
  const absl::StatusOr<std::string> refused = late->AwaitWatchEnd(absl::Seconds(5));
  EXPECT_TRUE(absl::IsUnavailable(refused.status())) << refused.status();
}

TEST(KvStoreTest, DoneEndsAWatchQuietlyAndTheStoreClosesWithFinishedAfterRankZerosDone) {
  KvLimits limits;
  limits.ranks = 3;
  auto server = StartServer(limits);
  auto w = Watches(*server, 3);
  ASSERT_TRUE(w[1]->SendDone().ok());
  const absl::StatusOr<std::string> one = w[1]->AwaitWatchEnd(absl::Seconds(5));
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(*one, "rank 1 finished");
  w[1].reset();
  EXPECT_TRUE(absl::IsDeadlineExceeded(w[2]->AwaitWatchEnd(absl::Milliseconds(300)).status()))
      << "a rank that said DONE and left alarms nobody";
  ASSERT_TRUE(w[0]->SendDone().ok());
  ASSERT_TRUE(w[0]->AwaitWatchEnd(absl::Seconds(5)).ok());
  server->Stop();
  const absl::StatusOr<std::string> two = w[2]->AwaitWatchEnd(absl::Seconds(5));
  ASSERT_TRUE(two.ok()) << "rank 0 finished, so the store's closing is the gang's end: "
                        << two.status();
  EXPECT_NE(two->find("rank 0 finished"), std::string::npos) << *two;
}

TEST(KvStoreTest, AStoreStoppedBeforeRankZerosDoneTellsTheWatchesRankZeroLeft) {
  auto server = StartServer();
  auto w = Watches(*server, 2);
  server->Stop();
  const absl::StatusOr<std::string> end = w[1]->AwaitWatchEnd(absl::Seconds(5));
  ASSERT_TRUE(absl::IsUnavailable(end.status())) << end.status();
  EXPECT_NE(end.status().message().find("rank 0 left the gang"), std::string::npos) << end.status();
}

TEST(KvStoreTest, AWatchOfARankOutsideTheGangOrAlreadyWatchedIsRefused) {
  KvLimits limits;
  limits.ranks = 2;
  auto server = StartServer(limits);
  auto outside = Dial(*server);
  ASSERT_TRUE(outside->Watch(2).ok());
  absl::StatusOr<std::string> end = outside->AwaitWatchEnd(absl::Seconds(5));
  ASSERT_TRUE(absl::IsUnavailable(end.status()));
  EXPECT_NE(end.status().message().find("the gang has 2 ranks"), std::string::npos) << end.status();
  // Two processes claim rank 1: whichever the store heard second is refused (WATCH has no
  // acknowledgement, so the order is the store's).
  std::unique_ptr<KvClient> claims[2] = {Dial(*server), Dial(*server)};
  ASSERT_TRUE(claims[0]->Watch(1).ok());
  ASSERT_TRUE(claims[1]->Watch(1).ok());
  int refused = -1;
  for (int i = 0; i < 50 && refused < 0; ++i) {
    for (int c : {0, 1}) {
      end = claims[c]->AwaitWatchEnd(absl::Milliseconds(50));
      if (absl::IsDeadlineExceeded(end.status())) continue;
      refused = c;
      ASSERT_TRUE(absl::IsUnavailable(end.status())) << end.status();
      EXPECT_NE(end.status().message().find("already watches"), std::string::npos) << end.status();
      break;
    }
  }
  ASSERT_GE(refused, 0) << "one of two watches of rank 1 is refused within 5 s";
  // Neither refusal broke the gang: the first claim's watch holds.
  EXPECT_TRUE(absl::IsDeadlineExceeded(
      claims[1 - refused]->AwaitWatchEnd(absl::Milliseconds(200)).status()));
}

TEST(KvStoreTest, ASealedStoreTakesNoNewConnectionAndItsWatchesOutliveTheIdleTimeout) {
  KvLimits limits;
  limits.idle_timeout = absl::Milliseconds(200);
  auto server = StartServer(limits);
  auto w = Watches(*server, 2);
  server->Seal();
  EXPECT_FALSE(KvClient::Connect(server->address(), kGang, absl::Milliseconds(500)).ok())
      << "a sealed store accepts no new connection";
  absl::SleepFor(absl::Milliseconds(600));  // three idle timeouts: a watch is silent by design
  EXPECT_TRUE(absl::IsDeadlineExceeded(w[0]->AwaitWatchEnd(absl::Milliseconds(100)).status()));
  w[0].reset();
  const absl::StatusOr<std::string> end = w[1]->AwaitWatchEnd(absl::Seconds(5));
  ASSERT_TRUE(absl::IsUnavailable(end.status())) << end.status();
  EXPECT_NE(end.status().message().find("rank 0 left the gang"), std::string::npos) << end.status();
}

TEST(KvStoreTest, HostPortParsing) {
  std::string host;
  int port = 0;
  EXPECT_TRUE(ParseHostPort("127.0.0.1:4000", "--rendezvous", host, port).ok());
  EXPECT_EQ(host, "127.0.0.1");
  EXPECT_EQ(port, 4000);
  EXPECT_TRUE(ParseHostPort("[::1]:80", "--rendezvous", host, port).ok());
  EXPECT_EQ(host, "::1");
  for (const char* bad : {"host", ":80", "h:0", "h:99999", "h:8x", "::1:80", "h:"}) {
    const absl::Status s = ParseHostPort(bad, "--rendezvous", host, port);
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << bad;
    EXPECT_NE(s.message().find("--rendezvous"), std::string::npos) << s;
  }
}

}  // namespace
}  // namespace parity::kernels
