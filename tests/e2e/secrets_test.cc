// The admin token stays out of logs and other users' reach, with the real binaries (issue #23):
// parity-scheduler started without --bootstrap-token-file writes the first admin token only into
// a 0600 file (never to stderr, which journald, `kubectl logs` and a `2>&1` keep); a bootstrap
// file other users could read, or one another user owns, is refused at start with the flag, the
// mode and the remedy; `parity token create --out FILE` makes a 0600 file and replaces one only
// with --force. Each test has its own database (tests/support) and scratch directory.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "clients/cpp/scheduler_channel.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "parity/v1/sweep_service.grpc.pb.h"
#include "server/bootstrap_token.h"
#include "tests/e2e/secret_process.h"
#include "tests/support/postgres_environment.h"
#include "tests/support/test_tokens.h"

namespace parity::e2e {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// ListSweeps with `token` over plaintext loopback: OK when the token is a live one.
grpc::StatusCode ListSweepsAs(const std::string& address, const std::string& token) {
  clients::SchedulerChannelOptions options;
  options.address = address;
  options.token = token;
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = clients::MakeSchedulerChannel(options);
  if (!channel.ok()) return grpc::StatusCode::INTERNAL;
  auto stub = parity::v1::SweepService::NewStub(*channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  parity::v1::ListSweepsResponse response;
  return stub->ListSweeps(&context, parity::v1::ListSweepsRequest(), &response).error_code();
}

// A file holding `text`, with `mode`.
void WriteFile(const std::string& path, const std::string& text, mode_t mode) {
  std::ofstream(path) << text;
  ASSERT_EQ(::chmod(path.c_str(), mode), 0) << path;
}

TEST(SchedulerSecrets, WithoutTheFlagTheFirstAdminTokenGoesOnlyIntoA0600File) {
  PARITY_REQUIRE_POSTGRES();
  ScratchDir root("parity-secrets");
  const std::string log = root / "scheduler.log";
  // Where a scheduler without --bootstrap-token-file writes the token: XDG_STATE_HOME/parity.
  absl::StatusOr<std::unique_ptr<SchedulerProcess>> scheduler =
      SchedulerProcess::Start(parity::testing::PostgresEnvironment::FreshDatabase(), log,
                              {{"XDG_STATE_HOME", root / "state"}});
  ASSERT_TRUE(scheduler.ok()) << scheduler.status();
  ASSERT_TRUE((*scheduler)->WaitHealthy().ok()) << ReadWholeFile(log);
  const std::string file = root / "state/parity/admin.token";
  ASSERT_EQ(FileMode(file), 0600) << "the new admin token's file " << file
                                  << " should exist with mode 0600";
  EXPECT_EQ(FileMode(root / "state/parity"), 0700) << "its new directory should be private";
  const absl::StatusOr<std::string> token = clients::ReadSecretFile(file);
  ASSERT_TRUE(token.ok() && token->size() >= 32) << token.status();
  EXPECT_EQ(ListSweepsAs((*scheduler)->address(), *token), grpc::StatusCode::OK)
      << "the file's token should be a live admin token";
  (*scheduler)->Stop();  // every line it wrote is in the log now
  const std::string output = ReadWholeFile(log);
  EXPECT_THAT(output, HasSubstr(absl::StrCat("event=bootstrap_token_created file=", file)))
      << "the log should say where the token went";
  EXPECT_THAT(output, Not(HasSubstr(*token)))
      << "the admin token must never reach stdout/stderr (the log)";
  EXPECT_THAT(output, Not(HasSubstr(token->substr(7, 16)))) << "nor any part of it";
}

TEST(SchedulerSecrets, ABootstrapFileOthersCanReadIsRefusedAtStart) {
  PARITY_REQUIRE_POSTGRES();
  ScratchDir root("parity-secrets");
  const std::string file = root / "admin.token";
  WriteFile(file, std::string(parity::testing::kTestAdminToken) + "\n", 0644);
  const std::string log = root / "scheduler.log";
  absl::StatusOr<std::unique_ptr<SchedulerProcess>> scheduler =
      SchedulerProcess::Start(parity::testing::PostgresEnvironment::FreshDatabase(), log,
                              {{"PARITY_BOOTSTRAP_TOKEN_FILE", file}});
  ASSERT_TRUE(scheduler.ok()) << scheduler.status();
  const std::optional<worker::ExitStatus> exit = (*scheduler)->WaitExit();
  ASSERT_TRUE(exit.has_value()) << "a 0644 bootstrap file must stop the start; log:\n"
                                << ReadWholeFile(log);
  EXPECT_FALSE(exit->success());
  const std::string output = ReadWholeFile(log);
  EXPECT_THAT(output, HasSubstr("--bootstrap-token-file"));
  EXPECT_THAT(output, HasSubstr("mode 0644"));
  EXPECT_THAT(output, HasSubstr(absl::StrCat("chmod 600 ", file)));
  EXPECT_THAT(output, Not(HasSubstr(parity::testing::kTestAdminToken)));
}

TEST(SchedulerSecrets, ABootstrapFileAnotherUserOwnsIsRefusedAtStart) {
  PARITY_REQUIRE_POSTGRES();
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give the file to another user";
  ScratchDir root("parity-secrets");
  const std::string file = root / "admin.token";
  WriteFile(file, std::string(parity::testing::kTestAdminToken) + "\n", 0600);
  ASSERT_EQ(::chown(file.c_str(), 65534, 65534), 0) << "chown nobody " << file;
  const std::string log = root / "scheduler.log";
  absl::StatusOr<std::unique_ptr<SchedulerProcess>> scheduler =
      SchedulerProcess::Start(parity::testing::PostgresEnvironment::FreshDatabase(), log,
                              {{"PARITY_BOOTSTRAP_TOKEN_FILE", file}});
  ASSERT_TRUE(scheduler.ok()) << scheduler.status();
  const std::optional<worker::ExitStatus> exit = (*scheduler)->WaitExit();
  ASSERT_TRUE(exit.has_value()) << "a file another user owns must stop the start";
  EXPECT_FALSE(exit->success());
  EXPECT_THAT(ReadWholeFile(log), HasSubstr("is owned by uid 65534, not by the scheduler's user"));
}

TEST(BootstrapTokenFile, TheDefaultPathFollowsXdgStateHomeThenHome) {
  EXPECT_EQ(server::DefaultBootstrapTokenFile("/state", "/home/a"), "/state/parity/admin.token");
  EXPECT_EQ(server::DefaultBootstrapTokenFile("relative", "/home/a"),
            "/home/a/.local/state/parity/admin.token")
      << "XDG_STATE_HOME must be absolute (the XDG rule) or it is ignored";
  EXPECT_EQ(server::DefaultBootstrapTokenFile(nullptr, "/home/a"),
            "/home/a/.local/state/parity/admin.token");
  EXPECT_EQ(server::DefaultBootstrapTokenFile(nullptr, nullptr), "")
      << "nowhere to write: then --bootstrap-token-file is needed";
}

TEST(BootstrapTokenFile, ANewFileIsNeverWrittenThroughALink) {
  ScratchDir root("parity-secrets");
  const std::string target = root / "elsewhere";
  ASSERT_EQ(::symlink(target.c_str(), (root / "admin.token").c_str()), 0);
  const absl::Status created =
      server::CreateBootstrapTokenFile(root / "admin.token", "secret", "--bootstrap-token-file");
  EXPECT_FALSE(created.ok()) << "a planted link at the path must not be followed";
  EXPECT_EQ(FileMode(target), -1) << "nothing may be written where the link points";
}

class TokenCreateOut : public ::testing::Test {
 protected:
  void SetUp() override {
    PARITY_REQUIRE_POSTGRES();
    WriteFile(admin_, std::string(parity::testing::kTestAdminToken) + "\n", 0600);
    absl::StatusOr<std::unique_ptr<SchedulerProcess>> started =
        SchedulerProcess::Start(parity::testing::PostgresEnvironment::FreshDatabase(),
                                root_ / "scheduler.log", {{"PARITY_BOOTSTRAP_TOKEN_FILE", admin_}});
    ASSERT_TRUE(started.ok()) << started.status();
    scheduler_ = *std::move(started);
    ASSERT_TRUE(scheduler_->WaitHealthy().ok()) << ReadWholeFile(root_ / "scheduler.log");
  }

  CommandResult Create(const std::string& name, const std::string& extra) {
    return RunCommand(absl::StrCat(ShellQuote(PARITY_CLI_BIN), " token create --name ", name,
                                   " --role researcher --scheduler ", scheduler_->address(),
                                   " --token-file ", ShellQuote(admin_), extra));
  }

  ScratchDir root_{"parity-secrets"};
  const std::string admin_ = root_ / "admin.token";
  std::unique_ptr<SchedulerProcess> scheduler_;
};

TEST_F(TokenCreateOut, WritesA0600FileAndReplacesOneOnlyWithForce) {
  const std::string out = root_ / "alice.token";
  const CommandResult made = Create("alice", " --out " + ShellQuote(out));
  ASSERT_EQ(made.exit_code, 0) << made.output;
  ASSERT_EQ(FileMode(out), 0600) << "--out must make the file 0600 whatever the umask";
  const absl::StatusOr<std::string> secret = clients::ReadSecretFile(out);
  ASSERT_TRUE(secret.ok() && secret->size() >= 32) << secret.status();
  EXPECT_THAT(made.output, Not(HasSubstr(*secret))) << "with --out the secret is not printed";
  EXPECT_THAT(made.output, HasSubstr(out));
  EXPECT_EQ(ListSweepsAs(scheduler_->address(), *secret), grpc::StatusCode::OK);

  const CommandResult again = Create("alice2", " --out " + ShellQuote(out));
  EXPECT_EQ(again.exit_code, 64) << again.output;
  EXPECT_THAT(again.output, HasSubstr("--force"));
  EXPECT_EQ(*clients::ReadSecretFile(out), *secret) << "an existing file stays as it was";
  const CommandResult listed =
      RunCommand(absl::StrCat(ShellQuote(PARITY_CLI_BIN), " token list --scheduler ",
                              scheduler_->address(), " --token-file ", ShellQuote(admin_)));
  EXPECT_THAT(listed.output, Not(HasSubstr("alice2")))
      << "a refused --out must not leave a token behind on the scheduler";

  ASSERT_EQ(::chmod(out.c_str(), 0644), 0);
  const CommandResult forced = Create("alice3", " --out " + ShellQuote(out) + " --force");
  ASSERT_EQ(forced.exit_code, 0) << forced.output;
  EXPECT_EQ(FileMode(out), 0600) << "a replaced file is 0600 again";
  EXPECT_NE(*clients::ReadSecretFile(out), *secret) << "--force puts the new secret in place";
}

}  // namespace
}  // namespace parity::e2e
