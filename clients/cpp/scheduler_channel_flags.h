// The command-line flags of a scheduler channel, the same in every C++ client that has a command
// line (the `parity` CLI's subcommands, parity-worker); the environment behind each is read by
// ResolveFromEnvironment (scheduler_channel.h). Header-only: CLI11 is too.
#pragma once

#include <string>

#include "CLI/CLI.hpp"
#include "clients/cpp/scheduler_channel.h"

namespace parity::clients {

// --token, --token-file (into `token_file`), --tls-ca, --tls-client-cert, --tls-client-key,
// --tls-server-name and --insecure-plaintext.
inline void AddSchedulerChannelFlags(CLI::App& app, SchedulerChannelOptions& options,
                                     std::string& token_file) {
  app.add_option("--token", options.token,
                 "Bearer token (env PARITY_TOKEN; prefer --token-file: a command line is visible "
                 "to other users)");
  app.add_option("--token-file", token_file,
                 "File holding the bearer token (env PARITY_TOKEN_FILE)");
  app.add_option("--tls-ca", options.tls_ca_file,
                 "PEM CA of the scheduler's certificate: connect over TLS (env PARITY_TLS_CA)");
  app.add_option("--tls-client-cert", options.tls_client_cert_file,
                 "PEM client certificate, for mutual TLS (env PARITY_TLS_CLIENT_CERT)");
  app.add_option("--tls-client-key", options.tls_client_key_file,
                 "PEM key of --tls-client-cert (env PARITY_TLS_CLIENT_KEY)");
  app.add_option("--tls-server-name", options.tls_server_name,
                 "Name to expect in the scheduler's certificate (env PARITY_TLS_SERVER_NAME)");
  app.add_flag("--insecure-plaintext", options.insecure_plaintext,
               "Send the token without TLS to a non-loopback address (only behind a "
               "TLS-terminating proxy or on a private network; env PARITY_INSECURE_PLAINTEXT=1)");
}

}  // namespace parity::clients
