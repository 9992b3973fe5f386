// `parity token create|list|revoke`: the scheduler's access tokens (an admin token's job).
// `create --out FILE` writes the secret into a new file of mode 0600 (never through a link, and
// an existing file only with --force); without --out it prints the secret alone on stdout, for
// piping (`> FILE` would make the file with the shell's umask, usually 0644: readable by all).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "cli/commands.h"
#include "cli/scheduler_connection.h"
#include "cli/table.h"
#include "core/proto_time.h"
#include "parity/v1/token_service.grpc.pb.h"

namespace parity::cli {
namespace {

struct TokenOptions {
  SchedulerOptions scheduler;
  std::string name;
  std::string role;
  std::string expires_in;
  std::string token_id;
  std::string out;
  bool force = false;
  bool all = false;
};

// The secret's file, 0600 from its first byte: a temporary file beside --out is made before the
// token exists (so a path that cannot be written costs no token), then linked into place
// (refused if --out appeared meanwhile) or, with --force, renamed over it.
class SecretOutFile {
 public:
  static absl::StatusOr<std::unique_ptr<SecretOutFile>> Open(const std::string& path, bool force) {
    struct stat existing {};
    if (!force && ::lstat(path.c_str(), &existing) == 0) {
      return absl::AlreadyExistsError(
          absl::StrCat("--out: '", path, "' exists; give --force to replace it"));
    }
    auto file = std::unique_ptr<SecretOutFile>(new SecretOutFile(path, force));
    file->fd_ =
        ::open(file->temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (file->fd_ < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--out: cannot create '", file->temp_, "': ", std::strerror(errno)));
    }
    return file;
  }

  ~SecretOutFile() {
    if (fd_ >= 0) ::close(fd_);
    ::unlink(temp_.c_str());  // gone already once committed
  }

  absl::Status Commit(const std::string& secret) {
    const std::string line = secret + "\n";
    const bool written =
        ::write(fd_, line.data(), line.size()) == static_cast<ssize_t>(line.size()) &&
        ::fsync(fd_) == 0;
    ::close(fd_);
    fd_ = -1;
    if (!written) return absl::InternalError(absl::StrCat("--out: cannot write '", temp_, "'"));
    const int placed =
        force_ ? ::rename(temp_.c_str(), path_.c_str()) : ::link(temp_.c_str(), path_.c_str());
    if (placed != 0) {
      return absl::InternalError(
          absl::StrCat("--out: cannot put the secret into '", path_, "': ", std::strerror(errno)));
    }
    return absl::OkStatus();
  }

 private:
  SecretOutFile(std::string path, bool force)
      : path_(std::move(path)), temp_(absl::StrCat(path_, ".new-", ::getpid())), force_(force) {}

  const std::string path_;
  const std::string temp_;
  const bool force_;
  int fd_ = -1;
};

const std::map<std::string, parity::v1::Role> kRoles = {{"viewer", parity::v1::ROLE_VIEWER},
                                                        {"researcher", parity::v1::ROLE_RESEARCHER},
                                                        {"worker", parity::v1::ROLE_WORKER},
                                                        {"admin", parity::v1::ROLE_ADMIN}};

std::string RoleText(parity::v1::Role role) {
  for (const auto& [name, value] : kRoles) {
    if (value == role) return name;
  }
  return "?";
}

std::string TimeText(const google::protobuf::Timestamp& time) {
  if (time.seconds() == 0 && time.nanos() == 0) return "-";
  return absl::FormatTime("%Y-%m-%d %H:%M:%SZ", FromProtoTime(time), absl::UTCTimeZone());
}

std::unique_ptr<parity::v1::TokenService::Stub> Connect(const SchedulerOptions& options) {
  return parity::v1::TokenService::NewStub(ConnectScheduler(options));
}

int RunCreate(const TokenOptions& options) {
  parity::v1::CreateTokenRequest request;
  request.set_name(options.name);
  request.set_role(kRoles.at(options.role));
  if (!options.expires_in.empty()) {
    absl::Duration lifetime;
    if (!absl::ParseDuration(options.expires_in, &lifetime)) {
      std::cerr << "error: --expires-in: '" << options.expires_in
                << "' is not a duration (e.g. 720h, 90m)\n";
      return kExitUsage;
    }
    *request.mutable_lifetime() = ToProtoDuration(lifetime);
  }
  // First the channel (which exits on a bad TLS, token or plaintext setting), then the file, so
  // that neither a refused channel nor a refused path leaves a file or a token behind.
  std::unique_ptr<parity::v1::TokenService::Stub> stub = Connect(options.scheduler);
  std::unique_ptr<SecretOutFile> out;
  if (!options.out.empty()) {
    absl::StatusOr<std::unique_ptr<SecretOutFile>> opened =
        SecretOutFile::Open(options.out, options.force);
    if (!opened.ok()) {
      std::cerr << "error: " << opened.status().message() << "\n";
      return absl::IsAlreadyExists(opened.status()) ? kExitUsage : kExitFailure;
    }
    out = *std::move(opened);
  }
  parity::v1::CreateTokenResponse response;
  const grpc::Status status =
      stub->CreateToken(UnaryContext(options.scheduler).get(), request, &response);
  if (!status.ok()) return ReportRpcError(status, "token create", options.scheduler);
  std::cerr << "created token " << response.token().token_id() << " for '"
            << response.token().name() << "' (" << options.role << ", expires "
            << TimeText(response.token().expire_time()) << ")";
  if (out == nullptr) {
    std::cerr << "; it is shown only now:\n";
    std::cout << response.secret() << "\n";
    return kExitOk;
  }
  if (absl::Status committed = out->Commit(response.secret()); !committed.ok()) {
    std::cerr << "\nerror: " << committed.message() << "; revoke it with `parity token revoke --id "
              << response.token().token_id() << "`\n";
    return kExitFailure;
  }
  std::cerr << "; its secret is in " << options.out << " (mode 0600)\n";
  return kExitOk;
}

int RunList(const TokenOptions& options) {
  auto stub = Connect(options.scheduler);
  parity::v1::ListTokensRequest request;
  request.set_include_inactive(options.all);
  request.set_page_size(1000);
  const TableRow header = {"TOKEN", "NAME", "ROLE", "CREATED", "EXPIRES", "REVOKED", "BY"};
  std::vector<TableRow> rows;
  do {
    parity::v1::ListTokensResponse page;
    const grpc::Status status =
        stub->ListTokens(UnaryContext(options.scheduler).get(), request, &page);
    if (!status.ok()) return ReportRpcError(status, "token list", options.scheduler);
    for (const parity::v1::AccessToken& token : page.tokens()) {
      rows.push_back({token.token_id(), token.name(), RoleText(token.role()),
                      TimeText(token.create_time()), TimeText(token.expire_time()),
                      TimeText(token.revoke_time()), token.created_by()});
    }
    request.set_page_token(page.next_page_token());
  } while (!request.page_token().empty());
  std::cout << RenderTable(header, rows, header);
  return kExitOk;
}

int RunRevoke(const TokenOptions& options) {
  if (options.token_id.empty() == options.name.empty()) {
    std::cerr << "error: give exactly one of --id and --name\n";
    return kExitUsage;
  }
  parity::v1::RevokeTokenRequest request;
  request.set_token_id(options.token_id);
  request.set_name(options.name);
  parity::v1::RevokeTokenResponse response;
  const grpc::Status status =
      Connect(options.scheduler)
          ->RevokeToken(UnaryContext(options.scheduler).get(), request, &response);
  if (!status.ok()) return ReportRpcError(status, "token revoke", options.scheduler);
  std::cout << "revoked " << response.revoked() << " token(s)\n";
  return kExitOk;
}

}  // namespace

void RegisterTokenCommands(CLI::App& app, int& exit_code) {
  CLI::App* token = app.add_subcommand("token", "Access tokens of the scheduler (admin)");
  token->require_subcommand(1);

  auto create = std::make_shared<TokenOptions>();
  CLI::App* c = token->add_subcommand(
      "create", "Create a token; its secret goes into --out FILE (0600), else once to stdout");
  c->add_option("--name", create->name,
                "The identity it acts as: the owner of the sweeps it submits")
      ->required();
  c->add_option("--role", create->role, "viewer, researcher, worker or admin")
      ->required()
      ->check(CLI::IsMember({"viewer", "researcher", "worker", "admin"}));
  c->add_option("--expires-in", create->expires_in, "Lifetime, e.g. 720h (default: never)");
  CLI::Option* out = c->add_option(
      "--out", create->out, "Write the secret into this new file, mode 0600 (not to stdout)");
  c->add_flag("--force", create->force, "With --out: replace an existing file")->needs(out);
  AddSchedulerOptions(*c, create->scheduler);
  c->footer(std::string(kExitCodesHelp));
  c->callback([create, &exit_code] { exit_code = RunCreate(*create); });

  auto list = std::make_shared<TokenOptions>();
  CLI::App* l = token->add_subcommand("list", "List tokens (never their secrets)");
  l->add_flag("--all", list->all, "Include revoked and expired tokens");
  AddSchedulerOptions(*l, list->scheduler);
  l->footer(std::string(kExitCodesHelp));
  l->callback([list, &exit_code] { exit_code = RunList(*list); });

  auto revoke = std::make_shared<TokenOptions>();
  CLI::App* r = token->add_subcommand(
      "revoke", "Revoke one token (--id) or every live token of a name (--name)");
  r->add_option("--id", revoke->token_id, "Token id (from `parity token list`)");
  r->add_option("--name", revoke->name, "Revoke every live token of this name");
  AddSchedulerOptions(*r, revoke->scheduler);
  r->footer(std::string(kExitCodesHelp));
  r->callback([revoke, &exit_code] { exit_code = RunRevoke(*revoke); });
}

}  // namespace parity::cli
