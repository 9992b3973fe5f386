#include "clients/cpp/scheduler_channel.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "clients/cpp/loopback_address.h"
#include "clients/cpp/scheduler_target.h"
#include "grpcpp/support/client_interceptor.h"

namespace parity::clients {
namespace {

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? "" : value;
}

absl::StatusOr<std::string> ReadFile(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(absl::StrCat(what, ": cannot read '", path, "'"));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

class BearerTokenInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit BearerTokenInterceptor(const std::string& header) : header_(header) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->insert({"authorization", header_});
    }
    methods->Proceed();
  }

 private:
  const std::string& header_;  // owned by the factory, which the channel keeps
};

class BearerTokenFactory final : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit BearerTokenFactory(std::string token) : header_(absl::StrCat("Bearer ", token)) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo*) override {
    return new BearerTokenInterceptor(header_);
  }

 private:
  const std::string header_;
};

// A token goes in plaintext only to loopback, unless the caller said otherwise.
absl::Status CheckPlaintextTarget(const SchedulerChannelOptions& options,
                                  const std::string& target) {
  if (options.token.empty() || !options.tls_ca_file.empty() || options.insecure_plaintext) {
    return absl::OkStatus();
  }
  absl::StatusOr<bool> loopback = ResolvesOnlyToLoopback(target);
  if (loopback.ok() && *loopback) return absl::OkStatus();
  const std::string why =
      loopback.ok() ? "it is not a loopback address" : std::string(loopback.status().message());
  return absl::InvalidArgumentError(absl::StrCat(
      "refusing to send the bearer token in plaintext to '", options.address, "' (", why,
      "): anyone on the path could read it; connect over TLS with --tls-ca FILE "
      "(PARITY_TLS_CA), or give --insecure-plaintext (PARITY_INSECURE_PLAINTEXT=1) only when "
      "a TLS-terminating proxy or a private network carries the connection"));
}

}  // namespace

absl::StatusOr<bool> EnvFlag(const char* name) {
  const std::string value = absl::AsciiStrToLower(Env(name));
  if (value.empty() || value == "0" || value == "false" || value == "no" || value == "off") {
    return false;
  }
  if (value == "1" || value == "true" || value == "yes" || value == "on") return true;
  return absl::InvalidArgumentError(
      absl::StrCat(name, "='", Env(name), "': expected 1/true/yes/on or 0/false/no/off"));
}

absl::StatusOr<std::string> ReadSecretFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFile(path, "token file");
  if (!text.ok()) return text.status();
  const std::string line = text->substr(0, text->find('\n'));
  return std::string(absl::StripAsciiWhitespace(line));
}

absl::Status ResolveFromEnvironment(SchedulerChannelOptions& options,
                                    const std::string& token_file_flag) {
  if (options.token.empty()) {
    std::string file = token_file_flag;
    if (file.empty() && Env("PARITY_TOKEN").empty()) file = Env("PARITY_TOKEN_FILE");
    if (!file.empty()) {
      absl::StatusOr<std::string> token = ReadSecretFile(file);
      if (!token.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("--token-file (or PARITY_TOKEN_FILE): ", token.status().message()));
      }
      options.token = *token;
    } else {
      options.token = Env("PARITY_TOKEN");
    }
  }
  if (options.tls_ca_file.empty()) options.tls_ca_file = Env("PARITY_TLS_CA");
  if (options.tls_client_cert_file.empty()) {
    options.tls_client_cert_file = Env("PARITY_TLS_CLIENT_CERT");
  }
  if (options.tls_client_key_file.empty()) {
    options.tls_client_key_file = Env("PARITY_TLS_CLIENT_KEY");
  }
  if (options.tls_server_name.empty()) options.tls_server_name = Env("PARITY_TLS_SERVER_NAME");
  if (!options.insecure_plaintext) {
    absl::StatusOr<bool> insecure = EnvFlag("PARITY_INSECURE_PLAINTEXT");
    if (!insecure.ok()) return insecure.status();
    options.insecure_plaintext = *insecure;
  }
  if (options.tls_client_cert_file.empty() != options.tls_client_key_file.empty()) {
    return absl::InvalidArgumentError(
        "--tls-client-cert and --tls-client-key (PARITY_TLS_CLIENT_CERT/KEY) go together");
  }
  if (!options.tls_client_cert_file.empty() && options.tls_ca_file.empty()) {
    return absl::InvalidArgumentError(
        "--tls-client-cert needs --tls-ca (PARITY_TLS_CA): a client certificate is sent only "
        "over TLS");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeSchedulerChannel(
    const SchedulerChannelOptions& options) {
  // Several replicas: a list becomes one target, balanced and retried (scheduler_target.h).
  absl::StatusOr<SchedulerTarget> target = ResolveSchedulerTarget(options.address);
  if (!target.ok()) return target.status();
  if (absl::Status plaintext = CheckPlaintextTarget(options, target->target); !plaintext.ok()) {
    return plaintext;
  }
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  grpc::ChannelArguments args = options.args;
  AddSchedulerServiceConfig(args);
  if (options.tls_ca_file.empty()) {
    credentials = grpc::InsecureChannelCredentials();
  } else {
    grpc::SslCredentialsOptions ssl;
    absl::StatusOr<std::string> ca = ReadFile(options.tls_ca_file, "--tls-ca");
    if (!ca.ok()) return ca.status();
    ssl.pem_root_certs = *ca;
    if (!options.tls_client_cert_file.empty()) {
      absl::StatusOr<std::string> cert =
          ReadFile(options.tls_client_cert_file, "--tls-client-cert");
      if (!cert.ok()) return cert.status();
      absl::StatusOr<std::string> key = ReadFile(options.tls_client_key_file, "--tls-client-key");
      if (!key.ok()) return key.status();
      ssl.pem_cert_chain = *cert;
      ssl.pem_private_key = *key;
    }
    credentials = grpc::SslCredentials(ssl);
    const std::string& server_name =
        options.tls_server_name.empty() ? target->server_name : options.tls_server_name;
    if (!server_name.empty()) args.SetSslTargetNameOverride(server_name);
  }
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> creators;
  if (!options.token.empty())
    creators.push_back(std::make_unique<BearerTokenFactory>(options.token));
  return grpc::experimental::CreateCustomChannelWithInterceptors(target->target, credentials, args,
                                                                 std::move(creators));
}

}  // namespace parity::clients
