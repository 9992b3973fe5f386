// Whether a scheduler address stays on this machine: the client side's test before it sends a
// bearer token without TLS. Decided on the RESOLVED addresses (getaddrinfo), not on the text: a
// name such as "localhost.attacker.example" or a hosts-file entry can point anywhere, and
// "127.0.0.1.nip.io" is not 127.0.0.1. Resolving asks the system resolver only; nothing is sent
// to the address itself.
#pragma once

#include <string_view>

#include "absl/status/statusor.h"

namespace parity::clients {

// true when every address `target` resolves to is loopback (127.0.0.0/8, ::1, ::ffff:127.0.0.0/104)
// or it is a Unix socket (unix:PATH, unix-abstract:NAME); false when any is not.
// `target` is a gRPC target: host:port, [v6]:port, dns:///host:port, ipv4:a.b.c.d:port[,...],
// ipv6:[addr]:port[,...]. INVALID_ARGUMENT when it has no host; UNAVAILABLE when the name does not
// resolve (then nobody can tell where the token would go).
absl::StatusOr<bool> ResolvesOnlyToLoopback(std::string_view target);

}  // namespace parity::clients
