#include "clients/cpp/scheduler_target.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>

#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace parity::clients {
namespace {

constexpr char kServiceConfig[] = R"json({
  "loadBalancingConfig": [{"round_robin": {}}],
  "methodConfig": [{
    "name": [{"service": "parity.v1.SweepService"}, {"service": "parity.v1.WorkerService"},
             {"service": "parity.v1.TokenService"}, {"service": "grpc.health.v1.Health"}],
    "retryPolicy": {"maxAttempts": 4, "initialBackoff": "0.1s", "maxBackoff": "1s",
                    "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}
  }]
})json";

struct HostPort {
  std::string host;  // without brackets
  std::string port;
  bool bracketed = false;
};

absl::StatusOr<HostPort> SplitHostPort(absl::string_view entry) {
  HostPort out;
  if (absl::ConsumePrefix(&entry, "[")) {
    const size_t close = entry.find("]:");
    if (close == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat("'[", entry, "': expected [v6 address]:port"));
    }
    out.host = std::string(entry.substr(0, close));
    out.port = std::string(entry.substr(close + 2));
    out.bracketed = true;
  } else {
    const size_t colon = entry.rfind(':');
    if (colon == absl::string_view::npos || entry.find(':') != colon) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", entry, "': expected host:port (an IPv6 address in brackets)"));
    }
    out.host = std::string(entry.substr(0, colon));
    out.port = std::string(entry.substr(colon + 1));
  }
  if (out.host.empty() || out.port.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("'", entry, "': expected host:port"));
  }
  return out;
}

bool IsIpv4(const std::string& host) {
  in_addr addr;
  return inet_pton(AF_INET, host.c_str(), &addr) == 1;
}
bool IsIpv6(const std::string& host) {
  in6_addr addr;
  return inet_pton(AF_INET6, host.c_str(), &addr) == 1;
}

// The addresses of `family` that `entry`'s host resolves to ("a.b.c.d" or "v6", no brackets);
// none when it does not resolve.
std::vector<std::string> Resolve(const HostPort& entry, int family) {
  addrinfo hints{};
  hints.ai_family = family;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(entry.host.c_str(), entry.port.c_str(), &hints, &found) != 0) return {};
  std::vector<std::string> out;
  for (addrinfo* it = found; it != nullptr; it = it->ai_next) {
    char text[INET6_ADDRSTRLEN] = {};
    const void* addr =
        it->ai_family == AF_INET
            ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(it->ai_addr)->sin_addr)
            : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(it->ai_addr)->sin6_addr);
    if (inet_ntop(it->ai_family, addr, text, sizeof(text)) != nullptr) out.push_back(text);
  }
  freeaddrinfo(found);
  return out;
}

}  // namespace

absl::StatusOr<SchedulerTarget> ResolveSchedulerTarget(const std::string& address) {
  const std::string trimmed(absl::StripAsciiWhitespace(address));
  // gRPC's own syntax: a scheme (dns:, ipv4:, ipv6:, unix:, unix-abstract:, xds:, …).
  const size_t colon = trimmed.find(':');
  const std::string scheme = colon == std::string::npos ? "" : trimmed.substr(0, colon);
  const bool has_scheme = absl::StrContains(trimmed, "://") || scheme == "dns" ||
                          scheme == "ipv4" || scheme == "ipv6" || scheme == "unix" ||
                          scheme == "unix-abstract";
  if (has_scheme || !absl::StrContains(trimmed, ',')) return SchedulerTarget{trimmed, ""};

  std::vector<HostPort> entries;
  for (absl::string_view part : absl::StrSplit(trimmed, ',')) {
    part = absl::StripAsciiWhitespace(part);
    if (part.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("scheduler address '", address, "': an empty entry in the list"));
    }
    absl::StatusOr<HostPort> entry = SplitHostPort(part);
    if (!entry.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("scheduler address '", address, "': ", entry.status().message()));
    }
    entries.push_back(*entry);
  }
  // IPv4 when every entry has an IPv4 address, else IPv6 (gRPC's target names one family).
  SchedulerTarget out;
  for (int family : {AF_INET, AF_INET6}) {
    std::vector<std::string> addresses;
    bool complete = true;
    for (const HostPort& entry : entries) {
      if (!IsIpv4(entry.host) && !IsIpv6(entry.host) && out.server_name.empty()) {
        out.server_name = entry.host;  // TLS checks the first name given
      }
      const std::vector<std::string> resolved = Resolve(entry, family);
      if (resolved.empty()) {
        complete = false;
        break;
      }
      for (const std::string& ip : resolved) {
        addresses.push_back(family == AF_INET ? absl::StrCat(ip, ":", entry.port)
                                              : absl::StrCat("[", ip, "]:", entry.port));
      }
    }
    if (!complete) continue;
    out.target = absl::StrCat(family == AF_INET ? "ipv4:" : "ipv6:", absl::StrJoin(addresses, ","));
    return out;
  }
  return absl::UnavailableError(absl::StrCat(
      "scheduler address '", address,
      "': some host of the list does not resolve (to addresses of one family); give IP "
      "addresses, or one DNS name with a record per replica (dns:///name:port)"));
}

void AddSchedulerServiceConfig(grpc::ChannelArguments& args) {
  args.SetServiceConfigJSON(kServiceConfig);
}

}  // namespace parity::clients
