// IsLoopbackAddress: whether plaintext to or from "host:port" stays on this machine. Every port
// the scheduler and the worker open (and every client that would send a token without TLS)
// asks this one function, so that the rule cannot drift between them.
//
// The rule is on the RESOLVED address, never on the text: the host is resolved with
// getaddrinfo and every address it yields must be loopback (127.0.0.0/8, ::1, or ::ffff:127.x).
// "localhost" passes because it resolves there; "127.0.0.1.nip.io" passes only if it really
// resolves to loopback here (offline it does not resolve, and is refused). An empty host
// ("":8080, "0.0.0.0", "::") means every interface and is not loopback.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace parity::clients {

// true when every address `host_port` ("host:port", "[v6]:port" or a bare host) resolves to is
// loopback; false when one is not; INVALID_ARGUMENT when the host cannot be resolved (a name
// that does not resolve cannot be shown to be loopback, so callers refuse it).
absl::StatusOr<bool> IsLoopbackAddress(absl::string_view host_port);

// The client side of the same rule, for a gRPC target rather than a listen address: true when
// every address `target` resolves to is loopback, or it is a Unix socket (unix:PATH,
// unix-abstract:NAME). `target` is host:port, [v6]:port, dns:///host:port, ipv4:a.b.c.d:port[,...]
// or ipv6:[addr]:port[,...]. INVALID_ARGUMENT when it has no host; UNAVAILABLE when a name does
// not resolve (then nobody can tell where a token would go). Nothing is sent to the address.
absl::StatusOr<bool> ResolvesOnlyToLoopback(std::string_view target);

}  // namespace parity::clients
