// The one way a C++ client opens a channel to the scheduler: TLS when a CA is given (optionally
// with a client certificate, for mutual TLS), plaintext otherwise, and the bearer token sent as
// `authorization: Bearer …` on every call by a client interceptor. An interceptor rather than
// gRPC call credentials: gRPC sends call credentials only over a secure channel, and the local
// stack is plaintext on loopback.
//
// A token is never sent in plaintext off this machine: without TLS, MakeSchedulerChannel refuses
// a target that resolves to any non-loopback address (clients/cpp/loopback_address.h) unless
// `insecure_plaintext` says a TLS-terminating proxy or a private network carries the connection.
// The check resolves the name itself, before any connection; a resolver that answers gRPC's own
// lookup differently (DNS under an attacker's control) is out of its reach: use TLS there.
//
// Environment (flags of the CLI and the worker win):
//   PARITY_TOKEN            the bearer token
//   PARITY_TOKEN_FILE       a file holding it (first line; for secrets mounted as files)
//   PARITY_TLS_CA           PEM CA bundle that signed the scheduler's certificate: turns TLS on
//   PARITY_TLS_CLIENT_CERT  PEM client certificate chain, for mutual TLS
//   PARITY_TLS_CLIENT_KEY   its PEM private key
//   PARITY_TLS_SERVER_NAME  the name to check in the scheduler's certificate, when not the host
//   PARITY_INSECURE_PLAINTEXT  1/true: allow the token in plaintext to a non-loopback address
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/grpcpp.h"

namespace parity::clients {

struct SchedulerChannelOptions {
  // host:port, a comma-separated list of them, or gRPC's own target syntax (dns:///name:port,
  // ipv4:a:p,b:p): several scheduler replicas (clients/cpp/scheduler_target.h).
  std::string address;
  std::string token;  // empty = none (only the health check works without one)
  std::string tls_ca_file;
  std::string tls_client_cert_file;
  std::string tls_client_key_file;
  std::string tls_server_name;
  // Send the token without TLS to a non-loopback address (--insecure-plaintext).
  bool insecure_plaintext = false;
  grpc::ChannelArguments args;
};

// Fills what the flags left empty from the environment above; reads the token file.
// INVALID_ARGUMENT naming the flag when a file cannot be read or a client certificate comes
// without its key.
absl::Status ResolveFromEnvironment(SchedulerChannelOptions& options,
                                    const std::string& token_file_flag = "");

// Opens the channel (it connects lazily). INVALID_ARGUMENT when a TLS file cannot be read, or
// when a token would go in plaintext to an address that is not loopback (or does not resolve)
// and `insecure_plaintext` is off; the message names --tls-ca and --insecure-plaintext.
absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeSchedulerChannel(
    const SchedulerChannelOptions& options);

// The first line of a file, trimmed: a token or secret as written by `parity token create`,
// a Kubernetes Secret mount or `install -m 0600`.
absl::StatusOr<std::string> ReadSecretFile(const std::string& path);

// A yes/no environment variable (PARITY_INSECURE_PLAINTEXT, the worker's metrics one):
// 1/true/yes/on, 0/false/no/off or empty (= no), any case; anything else is INVALID_ARGUMENT
// naming the variable and its value.
absl::StatusOr<bool> EnvFlag(const char* name);

}  // namespace parity::clients
