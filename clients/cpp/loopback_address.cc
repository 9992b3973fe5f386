#include "clients/cpp/loopback_address.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <memory>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
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

// Every address `host` resolves to is loopback; the getaddrinfo error text when it does not
// resolve.
absl::StatusOr<bool> HostResolvesToLoopback(const std::string& host, std::string* error_text) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int error = ::getaddrinfo(host.c_str(), nullptr, &hints, &found);
  if (error != 0) {
    *error_text = ::gai_strerror(error);
    return absl::NotFoundError(*error_text);
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

// The hosts a gRPC target names: one for a DNS name, one or more for ipv4:/ipv6: lists.
std::vector<std::string> HostsOfTarget(absl::string_view target) {
  std::vector<std::string> hosts;
  if (absl::ConsumePrefix(&target, "ipv4:") || absl::ConsumePrefix(&target, "ipv6:")) {
    for (absl::string_view one : absl::StrSplit(target, ',', absl::SkipEmpty())) {
      hosts.push_back(HostOf(one));
    }
    return hosts;
  }
  if (absl::ConsumePrefix(&target, "dns://")) {
    // dns://AUTHORITY/host:port: the authority is the DNS server, not the scheduler.
    const size_t slash = target.find('/');
    target = slash == absl::string_view::npos ? absl::string_view() : target.substr(slash + 1);
  } else {
    absl::ConsumePrefix(&target, "dns:");
  }
  hosts.push_back(HostOf(target));
  return hosts;
}

}  // namespace

absl::StatusOr<bool> IsLoopbackAddress(absl::string_view host_port) {
  const std::string host = HostOf(host_port);
  // Every interface: the wildcard addresses resolve to themselves, which are not loopback.
  if (host.empty() || host == "0.0.0.0" || host == "::" || host == "*") return false;
  std::string error;
  absl::StatusOr<bool> loopback = HostResolvesToLoopback(host, &error);
  if (!loopback.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot resolve '", host, "' (", error,
                     "): only an address that resolves to loopback may carry plaintext"));
  }
  return loopback;
}

absl::StatusOr<bool> ResolvesOnlyToLoopback(std::string_view target_text) {
  // Debian's Abseil has its own string_view, not std::string_view.
  const absl::string_view target(target_text.data(), target_text.size());
  if (absl::StartsWith(target, "unix:") || absl::StartsWith(target, "unix-abstract:")) {
    return true;  // a socket in this machine's file system (or abstract namespace)
  }
  for (const std::string& host : HostsOfTarget(target)) {
    if (host.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("scheduler address '", target, "': no host (expected host:port)"));
    }
    std::string error;
    absl::StatusOr<bool> loopback = HostResolvesToLoopback(host, &error);
    if (!loopback.ok()) {
      return absl::UnavailableError(absl::StrCat("scheduler address '", target,
                                                 "': cannot resolve '", host, "' (", error, ")"));
    }
    if (!*loopback) return false;
  }
  return true;
}

}  // namespace parity::clients
