#include "clients/cpp/loopback.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"

namespace parity::clients {
namespace {

// The host of one "host:port", "[v6]:port", "v6" or "host" (gRPC allows the port to be left off).
std::string HostOf(absl::string_view address) {
  if (absl::StartsWith(address, "[")) {
    const size_t close = address.find(']');
    return std::string(address.substr(1, close == absl::string_view::npos ? close : close - 1));
  }
  const size_t colons = static_cast<size_t>(std::count(address.begin(), address.end(), ':'));
  if (colons == 1) return std::string(address.substr(0, address.find(':')));
  return std::string(address);  // no port, or a bare IPv6 address
}

// The hosts a gRPC target names: one for a DNS name, one or more for ipv4:/ipv6: lists.
std::vector<std::string> HostsOf(absl::string_view target) {
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

bool IsLoopback(const sockaddr* address) {
  if (address->sa_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(address);
    return (ntohl(v4->sin_addr.s_addr) >> 24) == 127;
  }
  if (address->sa_family == AF_INET6) {
    const in6_addr& v6 = reinterpret_cast<const sockaddr_in6*>(address)->sin6_addr;
    if (IN6_IS_ADDR_LOOPBACK(&v6)) return true;
    return IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127;  // ::ffff:127.x.y.z
  }
  return false;
}

// Every address `host` resolves to is loopback.
absl::StatusOr<bool> HostIsLoopback(const std::string& host, absl::string_view target) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &found); rc != 0) {
    return absl::UnavailableError(absl::StrCat("scheduler address '", target, "': cannot resolve '",
                                               host, "' (", ::gai_strerror(rc), ")"));
  }
  bool all = found != nullptr;
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    all = all && IsLoopback(a->ai_addr);
  }
  ::freeaddrinfo(found);
  return all;
}

}  // namespace

absl::StatusOr<bool> ResolvesOnlyToLoopback(std::string_view target_text) {
  // Debian's Abseil has its own string_view, not std::string_view.
  const absl::string_view target(target_text.data(), target_text.size());
  if (absl::StartsWith(target, "unix:") || absl::StartsWith(target, "unix-abstract:")) {
    return true;  // a socket in this machine's file system (or abstract namespace)
  }
  const std::vector<std::string> hosts = HostsOf(target);
  if (hosts.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("scheduler address '", target, "': no host (expected host:port)"));
  }
  for (const std::string& host : hosts) {
    if (host.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("scheduler address '", target, "': no host (expected host:port)"));
    }
    absl::StatusOr<bool> loopback = HostIsLoopback(host, target);
    if (!loopback.ok() || !*loopback) return loopback;
  }
  return true;
}

}  // namespace parity::clients
