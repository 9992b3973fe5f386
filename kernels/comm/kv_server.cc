// The rendezvous store's server side (kv_store.h).
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "kernels/comm/kv_store.h"
#include "kernels/comm/socket_io.h"

namespace parity::kernels {
namespace {

using namespace comm_internal;  // NOLINT: the codec's small names

std::string Reply(KvStatus status, const std::string& body) {
  std::string r;
  Put<uint8_t>(r, status);
  PutBytes32(r, body);
  return r;
}

bool IsWildcard(const std::string& host) {
  return host.empty() || host == "0.0.0.0" || host == "::" || host == "*";
}

// Binds and listens on the first address of host:port that works; -1 and `error` otherwise.
int Listen(const std::string& host, int port, std::string& error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  const int rc = getaddrinfo(host == "*" || host.empty() ? nullptr : host.c_str(), service.c_str(),
                             &hints, &res);
  if (rc != 0) {
    error = gai_strerror(rc);
    return -1;
  }
  int fd = -1;
  for (addrinfo* a = res; a != nullptr && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, 64) != 0) {
      error = std::strerror(errno);
      ::close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(res);
  return fd;
}

int BoundPort(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return -1;
  if (ss.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  return ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
}

// Constant time in the contents: a rank guessing the token learns nothing from how long the
// refusal took (only the length, which is fixed at 32).
bool TokensEqual(const std::string& a, const std::string& b) {
  if (a.size() != b.size() || b.empty()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  }
  return diff == 0;
}

}  // namespace

absl::StatusOr<std::string> NewGangToken() {
  unsigned char bytes[16];
  size_t got = 0;
  while (got < sizeof(bytes)) {
    const ssize_t n = getrandom(bytes + got, sizeof(bytes) - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return absl::InternalError(
          absl::StrCat("getrandom: cannot draw the gang token: ", std::strerror(errno)));
    }
    got += static_cast<size_t>(n);
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string token;
  for (unsigned char b : bytes) {
    token.push_back(kHex[b >> 4]);
    token.push_back(kHex[b & 15]);
  }
  return token;
}

absl::StatusOr<std::unique_ptr<KvServer>> KvServer::Start(const std::string& host, int port,
                                                          const KvIdentity& identity,
                                                          const KvLimits& limits) {
  if (identity.token.size() < 32) {
    return absl::InvalidArgumentError(
        "rendezvous store: the gang token must be at least 128 bits (NewGangToken)");
  }
  std::string error;
  const int fd = Listen(host, port, error);
  if (fd < 0) {
    return absl::InvalidArgumentError(absl::StrCat("--rendezvous-listen ", host,
                                                   ": cannot listen there (", error,
                                                   "); give an address of this machine"));
  }
  const int bound = BoundPort(fd);
  std::string name = host;
  if (IsWildcard(host)) {
    char buf[256] = {};
    (void)gethostname(buf, sizeof(buf) - 1);
    name = buf;
  }
  const std::string address = name.find(':') != std::string::npos
                                  ? absl::StrCat("[", name, "]:", bound)
                                  : absl::StrCat(name, ":", bound);
  std::unique_ptr<KvServer> server(new KvServer(fd, address, bound, identity, limits));
  server->accept_thread_ = std::thread([s = server.get()] { s->AcceptLoop(); });
  return server;
}

KvServer::KvServer(int fd, std::string address, int port, KvIdentity identity, KvLimits limits)
    : listen_fd_(fd),
      address_(std::move(address)),
      port_(port),
      identity_(std::move(identity)),
      limits_(limits) {}

KvServer::~KvServer() { Stop(); }

void KvServer::Seal() {
  if (sealed_.exchange(true)) return;
  if (accept_thread_.joinable()) accept_thread_.join();
  ::close(listen_fd_);
}

void KvServer::Stop() {
  if (stop_.exchange(true)) return;
  Seal();
  std::unique_lock<std::mutex> lock(mu_);
  if (rank0_done_) {
    EndWatchesLocked(kOk, "rank 0 finished and closed the gang's store");
  } else {
    EndWatchesLocked(kError,
                     "rank 0 left the gang without finishing (its rendezvous store stopped: it "
                     "stopped on an error; see rank 0's log)");
  }
  // Unblock every connection thread (reads fail, waits wake) and wait for them to leave; they are
  // detached, so the last thing each does is to count itself out under the lock.
  for (int fd : open_fds_) ::shutdown(fd, SHUT_RDWR);
  changed_.notify_all();
  changed_.wait(lock, [&] { return active_ == 0; });
}

void KvServer::AcceptLoop() {
  while (!stop_.load() && !sealed_.load()) {
    pollfd p{.fd = listen_fd_, .events = POLLIN, .revents = 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    std::lock_guard<std::mutex> lock(mu_);
    if (active_ >= limits_.max_connections || stop_.load()) {
      ::close(fd);  // over the cap: no reply, no thread
      continue;
    }
    ++active_;
    open_fds_.push_back(fd);
    std::thread([this, fd] { Serve(fd); }).detach();
  }
}

void KvServer::Serve(int fd) {
  SetSocketTimeouts(fd, limits_.idle_timeout, limits_.idle_timeout);
  const size_t max_frame = 1 + 2 + kMaxKeyBytes + 4 + limits_.max_value_bytes;
  bool greeted = false;
  for (;;) {
    uint32_t len = 0;
    if (!ReadFull(fd, &len, sizeof(len))) break;  // closed, garbage-free EOF or idle too long
    if (len == 0 || len > max_frame) {
      (void)WriteFrame(fd, Reply(kError, absl::StrCat("frame of ", len, " bytes refused (limit ",
                                                      max_frame, ")")));
      break;
    }
    std::string payload(len, '\0');
    if (!ReadFull(fd, payload.data(), len)) break;
    if (Reader watch(payload); greeted && payload[0] == kWatch) {
      uint8_t op = 0;
      uint32_t rank = 0;
      if (watch.Get(op) && watch.Get(rank) && watch.AtEnd()) {
        Watch(fd, rank);
      } else {
        (void)WriteFrame(fd, Reply(kError, "malformed WATCH (expected a u32 rank)"));
      }
      break;
    }
    std::string reply;
    const bool keep = Handle(payload, greeted, reply);
    if (!WriteFrame(fd, reply) || !keep) break;
  }
  std::lock_guard<std::mutex> lock(mu_);
  ::close(fd);
  std::erase(open_fds_, fd);
  --active_;
  changed_.notify_all();
}

bool KvServer::Handle(const std::string& payload, bool& greeted, std::string& reply) {
  Reader in(payload);
  uint8_t op = 0;
  in.Get(op);
  if (!greeted) {
    std::string magic, run_id, token;
    uint32_t version = 0;
    uint64_t epoch = 0;
    if (op != kHello || !in.Raw(magic, sizeof(kMagic)) ||
        magic != std::string(kMagic, sizeof(kMagic)) || !in.Get(version) || !in.Get(epoch) ||
        !in.Bytes16(run_id, kMaxRunIdBytes) || !in.Bytes16(token, kMaxTokenBytes) || !in.AtEnd() ||
        version != kVersion) {
      reply = Reply(kError, "not a parity rendezvous client (expected HELLO, protocol 1)");
      return false;
    }
    if (run_id != identity_.run_id || epoch != identity_.epoch) {
      reply = Reply(kError, absl::StrCat("refused: this rendezvous serves run '", identity_.run_id,
                                         "' gang epoch ", identity_.epoch, "; the rank is of run '",
                                         run_id, "' gang epoch ", epoch,
                                         " (a rank of another attempt cannot join this gang)"));
      return false;
    }
    // After the run and epoch: a stale rank learns why it is refused, and the token is the secret
    // part (never echoed, compared in constant time).
    if (!TokensEqual(token, identity_.token)) {
      reply = Reply(kError,
                    "refused: wrong or missing gang token (PARITY_RENDEZVOUS_TOKEN must be the "
                    "token rank 0 reported with this address)");
      return false;
    }
    greeted = true;
    reply = Reply(kOk, "");
    return true;
  }
  std::string key, value;
  if (op == kSet && in.Bytes16(key, kMaxKeyBytes) && ValidKey(key) &&
      in.Bytes32(value, limits_.max_value_bytes) && in.AtEnd()) {
    bool ok = false;
    const std::string error = HandleSet(key, std::move(value), ok);
    reply = Reply(ok ? kOk : kError, error);
    return ok;
  }
  uint32_t wait_ms = 0;
  if (op == kGet && in.Bytes16(key, kMaxKeyBytes) && ValidKey(key) && in.Get(wait_ms) &&
      in.AtEnd()) {
    const absl::Duration wait = std::min(absl::Milliseconds(wait_ms), limits_.max_wait);
    std::unique_lock<std::mutex> lock(mu_);
    const bool found = changed_.wait_for(lock, absl::ToChronoMilliseconds(wait),
                                         [&] { return stop_.load() || values_.count(key) > 0; });
    const auto it = values_.find(key);
    if (found && it != values_.end()) {
      reply = Reply(kOk, it->second);
    } else {
      reply = Reply(kTimedOut, absl::StrCat("key '", key, "' not set within ", wait_ms, " ms"));
    }
    return true;
  }
  reply = Reply(kError, "malformed request (op, key or value out of bounds)");
  return false;
}

void KvServer::Watch(int fd, uint32_t rank) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::string refused;
    if (limits_.ranks > 0 && rank >= static_cast<uint32_t>(limits_.ranks)) {
      refused =
          absl::StrCat("WATCH of rank ", rank, " refused: the gang has ", limits_.ranks, " ranks");
    } else if (!watched_.insert(rank).second) {
      refused = absl::StrCat("WATCH of rank ", rank,
                             " refused: that rank already watches (two processes claim it)");
    } else if (!broken_.empty()) {
      refused = broken_;  // the gang broke before this rank got here: it learns why at once
    }
    if (!refused.empty()) {
      (void)WriteFrame(fd, Reply(kError, refused));
      return;
    }
    watches_[fd] = rank;
  }
  // A watch is silent for the whole run: no idle timeout, but keepalive finds a vanished host.
  SetSocketTimeouts(fd, absl::ZeroDuration(), absl::Seconds(5));
  EnableKeepalive(fd);
  uint32_t len = 0;
  uint8_t op = 0;
  const bool done =
      ReadFull(fd, &len, sizeof(len)) && len == 1 && ReadFull(fd, &op, 1) && op == kDone;
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = watches_.find(fd);
  if (it == watches_.end()) return;  // already ended by another rank's leaving or by Stop
  watches_.erase(it);
  if (done) {
    if (rank == 0) rank0_done_ = true;
    (void)WriteFrame(fd, Reply(kOk, absl::StrCat("rank ", rank, " finished")));
    return;
  }
  EndWatchesLocked(kError, absl::StrCat("rank ", rank,
                                        " left the gang without finishing (its watch connection "
                                        "to rank 0's rendezvous store closed: the process died, "
                                        "was killed or stopped on an error; see its own log)"));
}

void KvServer::EndWatchesLocked(uint8_t status, const std::string& why) {
  if (status != kOk && broken_.empty()) broken_ = why;
  const std::string reply = Reply(static_cast<KvStatus>(status), why);
  for (const auto& [fd, rank] : watches_) {
    (void)WriteFrame(fd, reply);  // a few bytes under a 5 s send timeout: never blocks for long
    ::shutdown(fd, SHUT_RDWR);    // its thread's read returns; the frame goes out before the FIN
  }
  watches_.clear();
}

std::string KvServer::HandleSet(const std::string& key, std::string value, bool& ok) {
  std::lock_guard<std::mutex> lock(mu_);
  ok = false;
  if (const auto it = values_.find(key); it != values_.end()) {
    if (it->second == value) ok = true;  // an idempotent retry
    return ok ? "" : absl::StrCat("key '", key, "' is already set (keys are written once)");
  }
  if (values_.size() >= limits_.max_keys || total_bytes_ + value.size() > limits_.max_total_bytes) {
    return "the rendezvous store is full";
  }
  total_bytes_ += value.size();
  values_.emplace(key, std::move(value));
  changed_.notify_all();
  ok = true;
  return "";
}

absl::Status ParseHostPort(const std::string& address, const std::string& flag, std::string& host,
                           int& port) {
  const auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " '", address, "': ", why, "; expected HOST:PORT or [IPV6]:PORT"));
  };
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0) return bad("no port");
  host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  } else if (host.find(':') != std::string::npos) {
    return bad("an IPv6 host must be in brackets");
  }
  const std::string p = address.substr(colon + 1);
  if (p.empty() || p.size() > 5 || p.find_first_not_of("0123456789") != std::string::npos) {
    return bad("the port is not a number");
  }
  port = std::stoi(p);
  if (port < 1 || port > 65535 || host.empty()) return bad("port out of range or empty host");
  return absl::OkStatus();
}

}  // namespace parity::kernels
