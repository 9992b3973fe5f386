#include "tests/support/postgres_cluster.h"

#include <netinet/in.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <pqxx/pqxx>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace parity::testing {
namespace {

namespace fs = std::filesystem;

// A port the kernel says is free now (another process may still take it before postgres does;
// Start() retries).
int FreeLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t length = sizeof(address);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
    port = ntohs(address.sin_port);
  }
  close(fd);
  return port;
}

// Runs argv (optionally as the postgres user through runuser), output appended to `log`.
absl::Status Run(const std::vector<std::string>& argv, bool as_postgres, const std::string& log) {
  std::vector<std::string> full;
  if (as_postgres) full = {"runuser", "-u", "postgres", "--"};
  full.insert(full.end(), argv.begin(), argv.end());
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    FILE* out = std::fopen(log.c_str(), "a");
    if (out != nullptr) {
      dup2(fileno(out), STDOUT_FILENO);
      dup2(fileno(out), STDERR_FILENO);
    }
    std::vector<char*> args;
    for (std::string& arg : full) args.push_back(arg.data());
    args.push_back(nullptr);
    execvp(args[0], args.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return absl::OkStatus();
  std::ifstream in(log);
  std::stringstream text;
  text << in.rdbuf();
  return absl::UnavailableError(absl::StrCat("`", absl::StrJoin(full, " "), "` failed (status ",
                                             status, "); log:\n", text.str()));
}

}  // namespace

absl::StatusOr<std::unique_ptr<PostgresCluster>> PostgresCluster::Start() {
  std::unique_ptr<PostgresCluster> cluster(new PostgresCluster());
  absl::Status status = cluster->Init();
  if (!status.ok()) return status;
  return cluster;
}

absl::Status PostgresCluster::Init() {
  const char* bin = std::getenv("PARITY_PG_BIN");
  bin_dir_ = bin != nullptr ? bin : "/usr/lib/postgresql/15/bin";
  if (!fs::exists(fs::path(bin_dir_) / "initdb")) {
    return absl::UnavailableError(absl::StrCat("no initdb in ", bin_dir_, " (set PARITY_PG_BIN)"));
  }
  std::string pattern = (fs::temp_directory_path() / "parity-pg-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) return absl::InternalError("mkdtemp failed");
  root_ = pattern;
  data_dir_ = root_ + "/data";
  socket_dir_ = root_ + "/sock";
  log_file_ = root_ + "/postgres.log";
  fs::create_directories(data_dir_);
  fs::create_directories(socket_dir_);
  { std::ofstream touch(log_file_); }
  as_postgres_user_ = geteuid() == 0;
  if (as_postgres_user_) {
    // initdb refuses to run as root: hand the directories to the postgres user.
    const passwd* user = getpwnam("postgres");
    if (user == nullptr) return absl::UnavailableError("running as root but no postgres user");
    fs::permissions(root_, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                               fs::perms::others_read | fs::perms::others_exec);
    for (const std::string& path : {root_, data_dir_, socket_dir_, log_file_}) {
      if (chown(path.c_str(), user->pw_uid, user->pw_gid) != 0) {
        return absl::InternalError(absl::StrCat("chown ", path, " failed"));
      }
    }
  }
  absl::Status status = InitDataDirectory();
  if (!status.ok()) return status;
  for (int attempt = 0; attempt < 3; ++attempt) {
    port_ = FreeLoopbackPort();
    std::string options =
        absl::StrCat("-k ", socket_dir_, " -p ", port_,
                     " -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off"
                     " -c full_page_writes=off -c max_connections=300 -c shared_buffers=256MB");
    // For diagnostics (e.g. "-c shared_preload_libraries=pg_stat_statements"); unset in tests.
    if (const char* extra = std::getenv("PARITY_PG_EXTRA_OPTIONS")) {
      options = absl::StrCat(options, " ", extra);
    }
    status = Run({bin_dir_ + "/pg_ctl", "-D", data_dir_, "-l", log_file_, "-w", "-t", "30", "-o",
                  options, "start"},
                 as_postgres_user_, root_ + "/pg_ctl.log");
    if (status.ok()) {
      started_ = true;
      return absl::OkStatus();
    }
  }
  return status;
}

// initdb costs seconds on a loaded machine and every test process (ctest runs each test case in
// its own) starts a cluster, so a pristine initdb result is kept once per machine and user in
// the temp directory and copied (cp -a keeps the postgres ownership) into each new cluster.
absl::Status PostgresCluster::InitDataDirectory() {
  const fs::path cache =
      fs::temp_directory_path() /
      absl::StrCat("parity-pg-initdb-", geteuid(), "-", std::hash<std::string>{}(bin_dir_));
  if (!fs::exists(cache / "PG_VERSION")) {
    const std::string staging = absl::StrCat(cache.string(), ".", getpid());
    fs::create_directories(staging);
    if (as_postgres_user_) {
      const passwd* user = getpwnam("postgres");
      if (user == nullptr || chown(staging.c_str(), user->pw_uid, user->pw_gid) != 0) {
        return absl::InternalError("cannot hand the initdb directory to postgres");
      }
    }
    absl::Status status = Run({bin_dir_ + "/initdb", "-D", staging, "-A", "trust", "-U", "postgres",
                               "-E", "UTF8", "--no-sync"},
                              as_postgres_user_, log_file_);
    if (!status.ok()) return status;
    std::error_code error;
    fs::rename(staging, cache, error);  // another process may have won the race: fine
    if (error) fs::remove_all(staging, error);
  }
  absl::Status status = Run({"cp", "-a", cache.string() + "/.", data_dir_}, false, log_file_);
  if (!status.ok()) return status;
  fs::permissions(data_dir_, fs::perms::owner_all);  // postgres insists on 0700
  return absl::OkStatus();
}

PostgresCluster::~PostgresCluster() {
  if (started_) {
    Run({bin_dir_ + "/pg_ctl", "-D", data_dir_, "-m", "immediate", "-w", "stop"}, as_postgres_user_,
        root_ + "/pg_ctl.log")
        .IgnoreError();
  }
  if (!root_.empty() && std::getenv("PARITY_KEEP_PG") == nullptr) {
    std::error_code ignored;
    fs::remove_all(root_, ignored);
  }
}

std::string PostgresCluster::ConnectionString(const std::string& name) const {
  return absl::StrCat("host=", socket_dir_, " port=", port_, " user=postgres dbname=", name);
}

std::string PostgresCluster::TcpConnectionString(const std::string& name) const {
  return absl::StrCat("host=127.0.0.1 port=", port_, " user=postgres dbname=", name);
}

absl::Status PostgresCluster::CreateDatabase(const std::string& name,
                                             const std::string& template_name) {
  return Execute("postgres",
                 absl::StrCat("CREATE DATABASE \"", name, "\" TEMPLATE \"", template_name, "\""));
}

absl::Status PostgresCluster::Execute(const std::string& name, const std::string& sql) {
  try {
    pqxx::connection connection(ConnectionString(name));
    pqxx::nontransaction tx(connection);
    tx.exec(sql);
    return absl::OkStatus();
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("on ", name, ": ", sql, ": ", e.what()));
  }
}

}  // namespace parity::testing
