#include "worker/child_process.h"

#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"

namespace parity::worker {
namespace {

std::vector<std::string> ReadAllLines(ChildProcess& child) {
  std::vector<std::string> lines;
  LineReader reader(child.output_fd());
  while (reader.ReadSome(absl::Seconds(5), [&](std::string_view l) { lines.emplace_back(l); }) !=
         LineReader::Result::kEof) {
  }
  return lines;
}

// Whether `pid` is still a live process (a zombie waiting for its reaper counts as gone).
bool Alive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  size_t close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] != 'Z';
}

std::unique_ptr<ChildProcess> Sh(const std::string& script, int output_fd = 1,
                                 std::string log = "") {
  absl::StatusOr<std::unique_ptr<ChildProcess>> c = ChildProcess::Spawn(
      {.argv = {"/bin/sh", "-c", script}, .log_path = log, .output_fd = output_fd});
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? std::move(*c) : nullptr;
}

TEST(ChildProcessTest, ReadsLinesAndExitsZero) {
  auto c = Sh("echo first; printf 'second\\nthird'");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(ReadAllLines(*c), (std::vector<std::string>{"first", "second", "third"}));
  std::optional<ExitStatus> e = c->WaitFor(absl::Seconds(5));
  ASSERT_TRUE(e.has_value());
  EXPECT_TRUE(e->success()) << e->ToString();
}

TEST(ChildProcessTest, MetricsOnItsOwnDescriptorAndStderrToTheLog) {
  const std::string log = ::testing::TempDir() + "/child_log.txt";
  std::filesystem::remove(log);
  auto c = Sh("echo metric >&3; echo noise; echo oops >&2", /*output_fd=*/3, log);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(ReadAllLines(*c), std::vector<std::string>{"metric"})
      << "only fd 3 is the metrics stream";
  ASSERT_TRUE(c->WaitFor(absl::Seconds(5)).has_value());
  std::ifstream in(log);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(all, "noise\noops\n");
}

TEST(ChildProcessTest, ExitCodeAndSignal) {
  auto c = Sh("exit 7");
  ASSERT_NE(c, nullptr);
  std::optional<ExitStatus> e = c->WaitFor(absl::Seconds(5));
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->kind, ExitStatus::Kind::kExited);
  EXPECT_EQ(e->code, 7);

  auto crash = Sh("kill -SEGV $$");
  ASSERT_NE(crash, nullptr);
  e = crash->WaitFor(absl::Seconds(5));
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->kind, ExitStatus::Kind::kSignaled);
  EXPECT_EQ(e->signal, SIGSEGV);
}

TEST(ChildProcessTest, OwnProcessGroup) {
  auto c = Sh("sleep 30");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(getpgid(c->pid()), c->pid());
  EXPECT_NE(getpgid(c->pid()), getpgrp()) << "a signal to the child's group must not reach us";
  ExitStatus e = c->Terminate(absl::Seconds(5));
  EXPECT_EQ(e.signal, SIGTERM);
}

TEST(ChildProcessTest, TerminateReachesGrandchildren) {
  // The grandchild ignores SIGTERM: only the SIGKILL to the group after the grace ends it.
  auto c = Sh("(trap '' TERM; exec sleep 300) & echo $!; wait");
  ASSERT_NE(c, nullptr);
  LineReader reader(c->output_fd());
  pid_t grandchild = 0;
  reader.ReadSome(absl::Seconds(5),
                  [&](std::string_view l) { grandchild = std::stoi(std::string(l)); });
  ASSERT_GT(grandchild, 0);
  EXPECT_TRUE(Alive(grandchild));
  c->Terminate(absl::Milliseconds(300));
  for (int i = 0; i < 100 && Alive(grandchild); ++i) absl::SleepFor(absl::Milliseconds(20));
  EXPECT_FALSE(Alive(grandchild)) << "grandchild " << grandchild << " survived the group kill";
}

TEST(ChildProcessTest, StragglersDieWhenTheLeaderExits) {
  auto c = Sh("sleep 300 & echo $!; exit 0");
  ASSERT_NE(c, nullptr);
  LineReader reader(c->output_fd());
  pid_t grandchild = 0;
  reader.ReadSome(absl::Seconds(5),
                  [&](std::string_view l) { grandchild = std::stoi(std::string(l)); });
  ASSERT_GT(grandchild, 0);
  std::optional<ExitStatus> e = c->WaitFor(absl::Seconds(5));
  ASSERT_TRUE(e.has_value());
  EXPECT_TRUE(e->success());
  for (int i = 0; i < 100 && Alive(grandchild); ++i) absl::SleepFor(absl::Milliseconds(20));
  EXPECT_FALSE(Alive(grandchild));
}

TEST(ChildProcessTest, SigtermIgnoredEscalatesToSigkill) {
  auto c = Sh("trap '' TERM; while true; do sleep 0.05; done");
  ASSERT_NE(c, nullptr);
  absl::SleepFor(absl::Milliseconds(100));  // let the trap be installed
  const absl::Time t0 = absl::Now();
  ExitStatus e = c->Terminate(absl::Milliseconds(300));
  EXPECT_EQ(e.signal, SIGKILL) << e.ToString();
  EXPECT_LT(absl::Now() - t0, absl::Seconds(3));
}

TEST(ChildProcessTest, MissingProgramIsAnError) {
  absl::StatusOr<std::unique_ptr<ChildProcess>> c =
      ChildProcess::Spawn({.argv = {"/nonexistent/parity-train"}});
  EXPECT_EQ(c.status().code(), absl::StatusCode::kNotFound);
  c = ChildProcess::Spawn({.argv = {"no-such-program-on-path-xyz"}});
  EXPECT_EQ(c.status().code(), absl::StatusCode::kNotFound);
  c = ChildProcess::Spawn({.argv = {"/bin/true"}, .working_dir = "/nonexistent/dir"});
  EXPECT_FALSE(c.ok()) << "chdir failure in the child is reported";
}

TEST(ChildProcessTest, SignalMaskIsNotInherited) {
  sigset_t block, old;
  sigemptyset(&block);
  sigaddset(&block, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &block, &old);
  auto c = Sh("sleep 30");
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(c->SignalGroup(SIGTERM).ok());
  std::optional<ExitStatus> e = c->WaitFor(absl::Seconds(5));
  ASSERT_TRUE(e.has_value()) << "the worker blocks SIGTERM; its engines must not";
  EXPECT_EQ(e->signal, SIGTERM);
}

TEST(ChildProcessTest, EnvironmentAndWorkingDirectory) {
  absl::StatusOr<std::unique_ptr<ChildProcess>> c =
      ChildProcess::Spawn({.argv = {"/bin/sh", "-c", "echo $PARITY_X; pwd"},
                           .env = {{"PARITY_X", "42"}},
                           .working_dir = "/"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(ReadAllLines(**c), (std::vector<std::string>{"42", "/"}));
}

// Secrets of the worker's own environment are withheld by name or by prefix; the rest and what
// the caller adds are inherited.
TEST(ChildProcessTest, WithheldVariablesDoNotReachTheChild) {
  setenv("PARITY_TOKEN", "t", 1);
  setenv("PARITY_TOKEN_FILE", "/etc/parity/worker-token", 1);
  setenv("PARITY_TLS_CLIENT_KEY", "/etc/parity/tls/key.pem", 1);
  setenv("PARITY_KEPT", "kept", 1);
  absl::StatusOr<std::unique_ptr<ChildProcess>> c =
      ChildProcess::Spawn({.argv = {"/bin/sh", "-c", "env | grep '^PARITY_' | sort"},
                           .env = {{"PARITY_ADDED", "added"}},
                           .remove_env = {"PARITY_TOKEN", "PARITY_TOKEN_FILE", "PARITY_TLS_*"}});
  for (const char* name :
       {"PARITY_TOKEN", "PARITY_TOKEN_FILE", "PARITY_TLS_CLIENT_KEY", "PARITY_KEPT"}) {
    unsetenv(name);
  }
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(ReadAllLines(**c), (std::vector<std::string>{"PARITY_ADDED=added", "PARITY_KEPT=kept"}))
      << "the token, its file and every PARITY_TLS_* variable must be withheld";
}

}  // namespace
}  // namespace parity::worker
