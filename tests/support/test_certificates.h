// Certificates for the TLS tests, made with the openssl command line (deploy/setup.sh installs
// it): in `dir`, a CA (ca.pem, ca.key), a server certificate it signed for localhost and
// 127.0.0.1 (server.pem, server.key) and a client certificate (client.pem, client.key, CN
// "worker-1"), each valid two days.
#pragma once

#include <cstdlib>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace parity::testing {

inline absl::Status MakeTestCertificates(const std::string& dir) {
  const std::string script = absl::StrCat(
      "set -e; mkdir -p '", dir, "'; cd '", dir,
      "'; openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 "
      "-subj /CN=parity-test-ca 2>/dev/null"
      "; openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr "
      "-subj /CN=localhost 2>/dev/null"
      "; printf 'subjectAltName=DNS:localhost,IP:127.0.0.1' > san.ext"
      "; openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial "
      "-out server.pem -days 2 -extfile san.ext 2>/dev/null"
      "; openssl req -newkey rsa:2048 -nodes -keyout client.key -out client.csr "
      "-subj /CN=worker-1 2>/dev/null"
      "; openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial "
      "-out client.pem -days 2 2>/dev/null");
  if (std::system(script.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("openssl could not make the test certificates in ", dir,
                                            " (apt-get install openssl)"));
  }
  return absl::OkStatus();
}

}  // namespace parity::testing
