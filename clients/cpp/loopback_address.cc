#include "clients/cpp/loopback_address.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <memory>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace parity::clients {
namespace {

// The host of "host:port", "[v6]:port", "v6" or "host" (a bare IPv6 address has several colons
// and no brackets: all of it is the host).
std::string HostOf(absl::string_view host_port) {
  if (absl::ConsumePrefix(&host_port, "[")) {
    const size_t close = host_port.find(']');
    return std::string(host_port.substr(0, close));
  }
  const size_t colon = host_port.rfind(':');
  if (colon == absl::string_view::npos || host_port.find(':') != colon) {
    return std::string(host_port);  // no port, or an unbracketed IPv6 address
  }
  return std::string(host_port.substr(0, colon));
}

bool IsLoopbackSockaddr(const sockaddr* address) {
  if (address->sa_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(address);
    return (ntohl(v4->sin_addr.s_addr) >> 24) == 127;
  }
  if (address->sa_family == AF_INET6) {
    const in6_addr& v6 = reinterpret_cast<const sockaddr_in6*>(address)->sin6_addr;
    if (IN6_IS_ADDR_LOOPBACK(&v6)) return true;
    return IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127;
  }
  return false;
}

}  // namespace

absl::StatusOr<bool> IsLoopbackAddress(absl::string_view host_port) {
  const std::string host = HostOf(host_port);
  // Every interface: the wildcard addresses resolve to themselves, which are not loopback.
  if (host.empty() || host == "0.0.0.0" || host == "::" || host == "*") return false;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int error = ::getaddrinfo(host.c_str(), nullptr, &hints, &found);
  if (error != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot resolve '", host, "' (", ::gai_strerror(error),
                     "): only an address that resolves to loopback may carry plaintext"));
  }
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> owned(found, &::freeaddrinfo);
  bool any = false;
  for (const addrinfo* entry = found; entry != nullptr; entry = entry->ai_next) {
    if (entry->ai_addr == nullptr) continue;
    if (!IsLoopbackSockaddr(entry->ai_addr)) return false;
    any = true;
  }
  return any;
}

}  // namespace parity::clients
