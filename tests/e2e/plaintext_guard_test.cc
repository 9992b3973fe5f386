// The C++ clients never send a bearer token in plaintext off this machine (issue #23): the
// loopback decision on resolved addresses (clients/cpp/loopback_address.h), MakeSchedulerChannel's
// refusal, and the real `parity` CLI and parity-worker refusing before any connection. Nothing
// here sends a packet off loopback: 192.0.2.1 (TEST-NET-1) is only ever refused, or put into a
// channel that is never used.
#include <netdb.h>
#include <netinet/in.h>
#include <unistd.h>

#include <fstream>

#include "absl/strings/str_cat.h"
#include "clients/cpp/loopback_address.h"
#include "clients/cpp/scheduler_channel.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/secret_process.h"
#include "tests/support/test_certificates.h"
#include "tests/support/test_tokens.h"

namespace parity::e2e {
namespace {

using ::testing::HasSubstr;

constexpr char kOffLoopback[] = "192.0.2.1:1";

TEST(ResolvesOnlyToLoopback, DecidesOnEveryResolvedAddress) {
  struct Case {
    const char* target;
    bool loopback;
  };
  for (const Case& c : std::vector<Case>{{"127.0.0.1:50051", true},
                                         {"127.8.9.10:1", true},
                                         {"[::1]:1", true},
                                         {"[::ffff:127.0.0.1]:1", true},
                                         {"localhost:50051", true},
                                         {"dns:///127.0.0.1:1", true},
                                         {"dns://192.0.2.53/127.0.0.1:1", true},
                                         {"ipv4:127.0.0.1:1,127.0.0.2:2", true},
                                         {"unix:/run/parity.sock", true},
                                         {"192.0.2.1:1", false},
                                         {"0.0.0.0:1", false},
                                         {"[::ffff:192.0.2.1]:1", false},
                                         {"[2001:db8::1]:1", false},
                                         {"ipv4:127.0.0.1:1,192.0.2.1:1", false},
                                         {"dns:///192.0.2.1:1", false}}) {
    absl::StatusOr<bool> loopback = clients::ResolvesOnlyToLoopback(c.target);
    ASSERT_TRUE(loopback.ok()) << c.target << ": " << loopback.status();
    EXPECT_EQ(*loopback, c.loopback) << c.target;
  }
  EXPECT_EQ(clients::ResolvesOnlyToLoopback(":50051").status().code(),
            absl::StatusCode::kInvalidArgument)
      << "no host";
}

TEST(ResolvesOnlyToLoopback, ANameIsJudgedByWhatItResolvesTo) {
  // This host's own name: /etc/hosts usually maps it to a non-loopback interface address.
  char name[256] = {};
  ASSERT_EQ(::gethostname(name, sizeof name - 1), 0);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(name, nullptr, &hints, &found) != 0)
    GTEST_SKIP() << name << " does not resolve";
  bool all_loopback = true;
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    if (a->ai_family == AF_INET) {
      all_loopback &=
          (ntohl(reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr.s_addr) >> 24) == 127;
    } else if (a->ai_family == AF_INET6) {
      all_loopback &= IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<sockaddr_in6*>(a->ai_addr)->sin6_addr);
    }
  }
  ::freeaddrinfo(found);
  absl::StatusOr<bool> loopback = clients::ResolvesOnlyToLoopback(absl::StrCat(name, ":1"));
  ASSERT_TRUE(loopback.ok()) << loopback.status();
  EXPECT_EQ(*loopback, all_loopback)
      << name << " resolves to " << (all_loopback ? "loopback only" : "a non-loopback address");
}

TEST(MakeSchedulerChannel, RefusesATokenInPlaintextOffLoopback) {
  clients::SchedulerChannelOptions options;
  options.address = kOffLoopback;
  options.token = parity::testing::kTestAdminToken;
  absl::StatusOr<std::shared_ptr<grpc::Channel>> refused = clients::MakeSchedulerChannel(options);
  ASSERT_FALSE(refused.ok()) << "a token must not go in plaintext to " << kOffLoopback;
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("--tls-ca FILE (PARITY_TLS_CA)"));
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("--insecure-plaintext"));
  EXPECT_THAT(std::string(refused.status().message()),
              ::testing::Not(HasSubstr(parity::testing::kTestAdminToken)));

  options.insecure_plaintext = true;
  absl::StatusOr<std::shared_ptr<grpc::Channel>> allowed = clients::MakeSchedulerChannel(options);
  ASSERT_TRUE(allowed.ok()) << allowed.status();
  EXPECT_EQ((*allowed)->GetState(/*try_to_connect=*/false), GRPC_CHANNEL_IDLE)
      << "the channel is only built, never connected";

  options.insecure_plaintext = false;
  options.token.clear();
  EXPECT_TRUE(clients::MakeSchedulerChannel(options).ok()) << "no token, nothing to protect";
}

TEST(MakeSchedulerChannel, ATokenOverTlsMayGoAnywhere) {
  ScratchDir root("parity-plaintext");
  ASSERT_TRUE(parity::testing::MakeTestCertificates(root / "tls").ok());
  clients::SchedulerChannelOptions options;
  options.address = kOffLoopback;
  options.token = parity::testing::kTestAdminToken;
  options.tls_ca_file = root / "tls/ca.pem";
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = clients::MakeSchedulerChannel(options);
  ASSERT_TRUE(channel.ok()) << channel.status();
  EXPECT_EQ((*channel)->GetState(false), GRPC_CHANNEL_IDLE);
}

class RealClients : public ::testing::Test {
 protected:
  void SetUp() override { std::ofstream(token_) << parity::testing::kTestAdminToken << "\n"; }
  ScratchDir root_{"parity-plaintext"};
  const std::string token_ = root_ / "admin.token";
};

TEST_F(RealClients, TheCliRefusesBeforeConnecting) {
  const CommandResult refused =
      RunCommand(absl::StrCat(ShellQuote(PARITY_CLI_BIN), " status --scheduler ", kOffLoopback,
                              " --token-file ", ShellQuote(token_)));
  EXPECT_EQ(refused.exit_code, 64) << refused.output;
  EXPECT_THAT(refused.output, HasSubstr("refusing to send the bearer token in plaintext"));
  EXPECT_THAT(refused.output, HasSubstr("--insecure-plaintext"));
  EXPECT_LT(refused.seconds, 10) << "the refusal comes before any connection (the call's "
                                    "deadline is 30 s)";

  const CommandResult env =
      RunCommand(absl::StrCat("PARITY_INSECURE_PLAINTEXT=maybe ", ShellQuote(PARITY_CLI_BIN),
                              " status --scheduler 127.0.0.1:1 --token-file ", ShellQuote(token_)));
  EXPECT_EQ(env.exit_code, 64) << env.output;
  EXPECT_THAT(env.output, HasSubstr("PARITY_INSECURE_PLAINTEXT='maybe'"));
}

TEST_F(RealClients, TheWorkerRefusesBeforeConnecting) {
  const CommandResult refused =
      RunCommand(absl::StrCat(ShellQuote(PARITY_WORKER_BIN), " --probe --scheduler ", kOffLoopback,
                              " --token-file ", ShellQuote(token_)));
  EXPECT_NE(refused.exit_code, 0) << refused.output;
  EXPECT_THAT(refused.output, HasSubstr("refusing to send the bearer token in plaintext"));
  EXPECT_LT(refused.seconds, 10) << refused.output;
}

}  // namespace
}  // namespace parity::e2e
