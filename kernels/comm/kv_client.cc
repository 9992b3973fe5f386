// The rendezvous store's client side (kv_store.h).
#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "kernels/comm/kv_store.h"
#include "kernels/comm/socket_io.h"

namespace parity::kernels {
namespace {

using namespace comm_internal;  // NOLINT: the codec's small names

// One connection attempt to each address of host:port; the connected fd or -1 with `error`.
int Dial(const std::string& host, int port, absl::Duration timeout, std::string& error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
  if (rc != 0) {
    error = gai_strerror(rc);
    return -1;
  }
  int fd = -1;
  for (addrinfo* a = res; a != nullptr && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    SetSocketTimeouts(fd, timeout, timeout);  // SO_SNDTIMEO bounds connect(2) on Linux
    if (::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      error = std::strerror(errno);
      ::close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(res);
  return fd;
}

}  // namespace

absl::StatusOr<std::unique_ptr<KvClient>> KvClient::Connect(const std::string& address,
                                                            const KvIdentity& identity,
                                                            absl::Duration timeout) {
  std::string host;
  int port = 0;
  if (absl::Status s = ParseHostPort(address, "--rendezvous", host, port); !s.ok()) return s;
  const absl::Time deadline = absl::Now() + timeout;
  std::string error;
  int fd = -1;
  // Rank 0 may still be starting; a refused connection is retried until the deadline.
  while (fd < 0) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return absl::UnavailableError(absl::StrCat("--rendezvous ", address,
                                                 ": cannot reach rank 0's rendezvous store (",
                                                 error, ") within --rendezvous-timeout"));
    }
    fd = Dial(host, port, std::min(left, absl::Seconds(5)), error);
    if (fd < 0) absl::SleepFor(std::min(left, absl::Milliseconds(100)));
  }
  std::unique_ptr<KvClient> client(new KvClient(fd));
  std::string hello;
  Put<uint8_t>(hello, kHello);
  hello.append(kMagic, sizeof(kMagic));
  Put<uint32_t>(hello, kVersion);
  Put<uint64_t>(hello, identity.epoch);
  PutBytes16(hello, identity.run_id.substr(0, kMaxRunIdBytes));
  PutBytes16(hello, identity.token.substr(0, kMaxTokenBytes));
  absl::StatusOr<std::string> r = client->Call(hello, absl::ZeroDuration());
  if (!r.ok()) {
    return absl::UnavailableError(
        absl::StrCat("--rendezvous ", address, ": ", r.status().message()));
  }
  return client;
}

KvClient::~KvClient() { ::close(fd_); }

absl::StatusOr<std::string> KvClient::Call(const std::string& request, absl::Duration wait) {
  // The server answers a GET after at most `wait`; the margin covers the network.
  SetSocketTimeouts(fd_, wait + absl::Seconds(30), absl::Seconds(30));
  if (!WriteFrame(fd_, request)) {
    return absl::UnavailableError("the rendezvous store closed the connection");
  }
  uint8_t status = 0;
  std::string body;
  if (!ReadReply(status, body)) {
    return absl::UnavailableError("the rendezvous store sent no valid reply");
  }
  if (status == kOk) return body;
  if (status == kTimedOut) return absl::DeadlineExceededError(body);
  return absl::UnavailableError(absl::StrCat("the rendezvous store refused: ", body));
}

bool KvClient::ReadReply(uint8_t& status, std::string& body) {
  uint32_t len = 0;
  uint32_t body_len = 0;
  if (!ReadFull(fd_, &len, 4) || len < 5 || len > (64u << 20) || !ReadFull(fd_, &status, 1) ||
      !ReadFull(fd_, &body_len, 4) || body_len != len - 5) {
    return false;
  }
  body.assign(body_len, '\0');
  return ReadFull(fd_, body.data(), body_len);
}

absl::Status KvClient::Set(const std::string& key, const std::string& value) {
  std::string req;
  Put<uint8_t>(req, kSet);
  PutBytes16(req, key);
  PutBytes32(req, value);
  return Call(req, absl::ZeroDuration()).status();
}

absl::StatusOr<std::string> KvClient::Get(const std::string& key, absl::Duration wait) {
  std::string req;
  Put<uint8_t>(req, kGet);
  PutBytes16(req, key);
  Put<uint32_t>(req, static_cast<uint32_t>(std::clamp<int64_t>(absl::ToInt64Milliseconds(wait), 0,
                                                               int64_t{UINT32_MAX})));
  return Call(req, wait);
}

absl::Status KvClient::Watch(int rank) {
  std::string req;
  Put<uint8_t>(req, kWatch);
  Put<uint32_t>(req, static_cast<uint32_t>(rank));
  // Silent for the whole run: no receive timeout (AwaitWatchEnd polls), keepalive instead.
  SetSocketTimeouts(fd_, absl::ZeroDuration(), absl::Seconds(5));
  EnableKeepalive(fd_);
  if (!WriteFrame(fd_, req)) {
    return absl::UnavailableError("the rendezvous store closed the connection before the watch");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> KvClient::AwaitWatchEnd(absl::Duration wait) {
  pollfd p{.fd = fd_, .events = POLLIN, .revents = 0};
  const int ready = ::poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(wait)));
  if (ready == 0 || (ready < 0 && errno == EINTR)) {
    return absl::DeadlineExceededError("the watch holds");
  }
  // A response arrives whole (a few bytes) or not at all: bound the rest of the read.
  SetSocketTimeouts(fd_, absl::Seconds(5), absl::Seconds(5));
  uint8_t status = 0;
  std::string body;
  if (!ReadReply(status, body)) {
    return absl::UnavailableError(
        "rank 0's rendezvous store went away (rank 0 died, was killed or its host is unreachable)");
  }
  if (status != kOk) return absl::UnavailableError(body);
  return body;
}

absl::Status KvClient::SendDone() {
  std::string req;
  Put<uint8_t>(req, kDone);
  if (!WriteFrame(fd_, req)) return absl::UnavailableError("the rendezvous store went away");
  return absl::OkStatus();
}

std::string KvClient::LocalHost() const {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  char buf[INET6_ADDRSTRLEN] = {};
  if (getsockname(fd_, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "";
  if (ss.ss_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(&ss)->sin6_addr, buf, sizeof(buf));
  } else {
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&ss)->sin_addr, buf, sizeof(buf));
  }
  return buf;
}

}  // namespace parity::kernels
