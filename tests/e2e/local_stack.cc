#include "tests/e2e/local_stack.h"

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/spec_loader.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/support/test_certificates.h"
#include "tests/support/test_tokens.h"
#include "worker/scheduler_client.h"

namespace parity::e2e {
namespace {

namespace fs = std::filesystem;

int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

std::string PgBin() {
  const char* env = std::getenv("PARITY_PG_BIN");
  if (env != nullptr && *env != '\0') return env;
  for (const char* v :
       {"/usr/lib/postgresql/17/bin", "/usr/lib/postgresql/16/bin", "/usr/lib/postgresql/15/bin"}) {
    if (fs::exists(fs::path(v) / "pg_ctl")) return v;
  }
  return "/usr/lib/postgresql/15/bin";
}

// Runs a shell command, returning its stdout; error on a non-zero exit.
absl::StatusOr<std::string> Shell(const std::string& cmd) {
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return absl::InternalError("popen failed");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int rc = pclose(p);
  if (rc != 0) return absl::InternalError(absl::StrCat("`", cmd, "` failed (", rc, "): ", out));
  return out;
}

std::string Quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) {
    if (c == '\'') {
      q += "'\\''";
    } else {
      q += c;
    }
  }
  return q + "'";
}

}  // namespace

std::string SyntheticCorpus(size_t bytes) {
  static const char* kWords[] = {"and",   "the",  "of",   "that", "he",   "unto", "in",  "shall",
                                 "for",   "lord", "his",  "they", "be",   "is",   "him", "not",
                                 "them",  "it",   "with", "all",  "thou", "thy",  "was", "god",
                                 "which", "my",   "me",   "said", "but",  "ye"};
  std::string out;
  uint64_t x = 88172645463325252ull;
  while (out.size() < bytes) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    out += kWords[x % 30];
    out += (x >> 20) % 11 == 0 ? ".\n" : " ";
  }
  return out;
}

absl::StatusOr<std::unique_ptr<LocalStack>> LocalStack::Start(StackOptions options,
                                                              std::string database_url,
                                                              std::string root) {
  std::unique_ptr<LocalStack> s(
      new LocalStack(std::move(options), std::move(database_url), std::move(root)));
  fs::create_directories(fs::path(s->root_) / "corpus");
  std::ofstream(fs::path(s->root_) / "corpus" / "kjv.txt") << SyntheticCorpus(2 << 20);
  for (int i = 0; i < std::max(s->options_.replicas, 1); ++i) s->ports_.push_back(FreePort());
  s->schedulers_.resize(s->ports_.size());
  absl::StatusOr<std::vector<std::string>> dir = s->Query("SHOW data_directory");
  absl::StatusOr<std::vector<std::string>> sock = s->Query("SHOW unix_socket_directories");
  absl::StatusOr<std::vector<std::string>> port = s->Query("SHOW port");
  if (!dir.ok()) return dir.status();
  if (dir->empty() || !sock.ok() || sock->empty() || !port.ok() || port->empty()) {
    return absl::InternalError("cannot read the cluster's settings");
  }
  s->pg_data_dir_ = (*dir)[0];
  s->pg_socket_dir_ = (*sock)[0];
  s->pg_port_ = (*port)[0];
  // The scheduler reads its admin token from this file (as the local stack's does); the tests
  // and the workers use it.
  std::ofstream(s->admin_token_file()) << parity::testing::kTestAdminToken << "\n";
  // 0600: the scheduler refuses a bootstrap file that other users could read.
  fs::permissions(s->admin_token_file(), fs::perms::owner_read | fs::perms::owner_write);
  if (s->options_.tls) {
    if (absl::Status made = parity::testing::MakeTestCertificates(s->root_ + "/tls"); !made.ok()) {
      return made;
    }
  }
  for (size_t i = 0; i < s->ports_.size(); ++i) {
    if (absl::Status st = s->StartReplica(static_cast<int>(i)); !st.ok()) return st;
  }
  clients::SchedulerChannelOptions channel_options;
  channel_options.address = s->addresses();
  channel_options.token = parity::testing::kTestAdminToken;
  if (s->options_.tls) channel_options.tls_ca_file = s->tls_ca_file();
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      clients::MakeSchedulerChannel(channel_options);
  if (!channel.ok()) return channel.status();
  auto made = *channel;
  s->sweeps_ = parity::v1::SweepService::NewStub(made);
  s->worker_api_ = parity::v1::WorkerService::NewStub(made);
  return s;
}

LocalStack::~LocalStack() {
  for (auto& w : workers_) {
    if (w) w->Terminate(absl::Seconds(10));
  }
  for (auto& scheduler : schedulers_) {
    if (scheduler) scheduler->Terminate(absl::Seconds(10));
  }
}

std::string LocalStack::replica_address(int index) const {
  return absl::StrCat("127.0.0.1:", ports_.at(static_cast<size_t>(index)));
}

std::string LocalStack::addresses() const {
  std::vector<std::string> all;
  for (size_t i = 0; i < ports_.size(); ++i) all.push_back(replica_address(static_cast<int>(i)));
  return absl::StrJoin(all, ",");
}

absl::Status LocalStack::StartReplica(int index) {
  const int port = ports_.at(static_cast<size_t>(index));
  const std::string log = index == 0 ? "scheduler.log" : absl::StrCat("scheduler-", index, ".log");
  std::vector<std::pair<std::string, std::string>> tls_env;
  if (options_.tls) {
    tls_env = {{"PARITY_TLS_CERT", root_ + "/tls/server.pem"},
               {"PARITY_TLS_KEY", root_ + "/tls/server.key"}};
  }
  std::vector<std::pair<std::string, std::string>> env = {
      {"PARITY_LISTEN", absl::StrCat("127.0.0.1:", port)},
      {"PARITY_LEADER_TTL", options_.leader_ttl},
      {"PARITY_REPLICA_ID", absl::StrCat("replica-", index)},
      {"PARITY_DATABASE_URL", database_url_},
      {"PARITY_LEASE_TTL", options_.lease_ttl},
      {"PARITY_HEARTBEAT_INTERVAL", options_.heartbeat_interval},
      {"PARITY_REAP_INTERVAL", options_.reap_interval},
      {"PARITY_BOOTSTRAP_TOKEN_FILE", root_ + "/admin.token"},
      // Any free port: tests run side by side, and the default 9464 would collide.
      {"PARITY_METRICS_LISTEN", "127.0.0.1:0"},
      // Likewise the web dashboard (default 8080).
      {"PARITY_HTTP_LISTEN", "127.0.0.1:0"}};
  env.insert(env.end(), tls_env.begin(), tls_env.end());
  env.insert(env.end(), options_.scheduler_env.begin(), options_.scheduler_env.end());
  absl::StatusOr<std::unique_ptr<worker::ChildProcess>> c = worker::ChildProcess::Spawn({
      .argv = {options_.scheduler_bin, "serve"},
      .env = env,
      .working_dir = root_,
      .log_path = root_ + "/" + log,
      .output_fd = 3,  // unused: stdout and stderr both go to the log
  });
  if (!c.ok()) return c.status();
  auto& scheduler = schedulers_.at(static_cast<size_t>(index));
  scheduler = std::move(*c);
  clients::SchedulerChannelOptions target;
  target.address = absl::StrCat("127.0.0.1:", port);
  if (options_.tls) target.tls_ca_file = tls_ca_file();
  for (int i = 0; i < 150; ++i) {
    if (worker::ProbeSchedulerHealth(target, absl::Milliseconds(200)).ok()) return absl::OkStatus();
    if (scheduler->TryWait().has_value()) break;
    absl::SleepFor(absl::Milliseconds(100));
  }
  return absl::UnavailableError(absl::StrCat("scheduler not healthy; log:\n", LogTail(log)));
}

void LocalStack::StopScheduler() {
  for (auto& scheduler : schedulers_) {
    if (scheduler) scheduler->Terminate(absl::Seconds(15));
    scheduler.reset();
  }
}

void LocalStack::KillReplica(int index) {
  auto& scheduler = schedulers_.at(static_cast<size_t>(index));
  if (!scheduler) return;
  (void)scheduler->SignalGroup(SIGKILL);
  scheduler->WaitFor(absl::Seconds(10));
  scheduler.reset();
}

absl::Status LocalStack::StartWorker(int index, const std::string& token_file) {
  if (static_cast<int>(workers_.size()) <= index) workers_.resize(static_cast<size_t>(index) + 1);
  const std::string work = absl::StrCat(root_, "/work-", index);
  std::vector<std::string> argv = {options_.worker_bin,
                                   "--scheduler",
                                   addresses(),
                                   "--checkpoint-dir",
                                   root_ + "/checkpoints",
                                   "--work-dir",
                                   work,
                                   "--corpus-dir",
                                   root_ + "/corpus",
                                   "--train-binary",
                                   options_.engine_bin,
                                   "--threads",
                                   options_.worker_threads,
                                   "--max-runs",
                                   "1",
                                   "--lease-wait",
                                   "2",
                                   "--kill-grace",
                                   "5",
                                   "--no-gpus",
                                   "--label",
                                   absl::StrCat("e2e=", index),
                                   "--token-file",
                                   token_file.empty() ? admin_token_file() : token_file};
  if (options_.tls) argv.insert(argv.end(), {"--tls-ca", tls_ca_file()});
  absl::StatusOr<std::unique_ptr<worker::ChildProcess>> c = worker::ChildProcess::Spawn({
      .argv = argv,
      .env = options_.worker_env,
      .working_dir = root_,
      .log_path = absl::StrCat(root_, "/worker-", index, ".log"),
      .output_fd = 3,
  });
  if (!c.ok()) return c.status();
  workers_[static_cast<size_t>(index)] = std::move(*c);
  return absl::OkStatus();
}

void LocalStack::KillWorker(int index) {
  auto& w = workers_.at(static_cast<size_t>(index));
  (void)w->SignalGroup(SIGKILL);
  w->WaitFor(absl::Seconds(10));
  w.reset();
}

worker::ExitStatus LocalStack::StopWorker(int index) {
  auto& w = workers_.at(static_cast<size_t>(index));
  worker::ExitStatus e = w->Terminate(absl::Seconds(60));
  w.reset();
  return e;
}

absl::Status LocalStack::StopPostgres() {
  const std::string as = getuid() == 0 ? "runuser -u postgres -- " : "";
  return Shell(
             absl::StrCat(as, PgBin(), "/pg_ctl -D ", Quote(pg_data_dir_), " -m fast -w stop 2>&1"))
      .status();
}

absl::Status LocalStack::StartPostgres() {
  const std::string as = getuid() == 0 ? "runuser -u postgres -- " : "";
  const std::string opts = absl::StrCat("-k ", pg_socket_dir_, " -p ", pg_port_,
                                        " -c listen_addresses=127.0.0.1 -c fsync=off");
  return Shell(absl::StrCat(as, PgBin(), "/pg_ctl -D ", Quote(pg_data_dir_), " -l ",
                            Quote(pg_data_dir_ + "/restart.log"), " -w -o ", Quote(opts),
                            " start 2>&1"))
      .status();
}

absl::StatusOr<std::vector<std::string>> LocalStack::Query(const std::string& sql) const {
  absl::StatusOr<std::string> out = Shell(
      absl::StrCat(PgBin(), "/psql ", Quote(database_url_), " -tAX -c ", Quote(sql), " 2>&1"));
  if (!out.ok()) return out.status();
  std::vector<std::string> lines = absl::StrSplit(*out, '\n', absl::SkipEmpty());
  return lines;
}

std::string LocalStack::Submit(const std::string& yaml, parity::v1::SweepService::Stub* via) {
  absl::StatusOr<parity::v1::SweepSpec> spec = core::ParseSweepSpec(yaml, core::SpecFormat::kYaml);
  if (!spec.ok()) {
    ADD_FAILURE() << "the sweep's YAML does not parse: " << spec.status();
    return "";
  }
  parity::v1::SubmitSweepRequest request;
  *request.mutable_spec() = *spec;
  parity::v1::SubmitSweepResponse response;
  const grpc::Status status =
      (via != nullptr ? *via : *sweeps_).SubmitSweep(Deadline().get(), request, &response);
  if (!status.ok()) {
    ADD_FAILURE() << "SubmitSweep failed: " << status.error_message();
    return "";
  }
  return response.sweep().sweep_id();
}

std::vector<parity::v1::Run> LocalStack::Runs(const std::string& sweep_id) {
  parity::v1::ListRunsRequest request;
  request.set_sweep_id(sweep_id);
  request.set_page_size(100);
  parity::v1::ListRunsResponse response;
  if (!sweeps_->ListRuns(Deadline(10).get(), request, &response).ok()) return {};
  return {response.runs().begin(), response.runs().end()};
}

std::unique_ptr<grpc::ClientContext> Deadline(int seconds) {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(seconds));
  return context;
}

std::string LocalStack::LogTail(const std::string& name) const {
  std::ifstream in(root_ + "/" + name);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return all.size() > 4000 ? all.substr(all.size() - 4000) : all;
}

}  // namespace parity::e2e
