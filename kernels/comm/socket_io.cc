#include "kernels/comm/socket_io.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <cerrno>

#include "kernels/comm/kv_store.h"

namespace parity::kernels::comm_internal {
namespace {

timeval TimevalOf(absl::Duration d) {
  if (d <= absl::ZeroDuration()) return timeval{};
  const int64_t us = absl::ToInt64Microseconds(d);
  return timeval{.tv_sec = static_cast<time_t>(us / 1000000),
                 .tv_usec = static_cast<suseconds_t>(us % 1000000)};
}

}  // namespace

void SetSocketTimeouts(int fd, absl::Duration recv, absl::Duration send) {
  const timeval r = TimevalOf(recv), s = TimevalOf(send);
  (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &r, sizeof(r));
  (void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &s, sizeof(s));
}

void EnableKeepalive(int fd) {
  const int on = 1, idle = 10, interval = 5, count = 3;
  (void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on));
  (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
  (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof(interval));
  (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof(count));
}

bool ReadFull(int fd, void* buf, size_t n) {
  char* p = static_cast<char*>(buf);
  while (n > 0) {
    const ssize_t got = ::recv(fd, p, n, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;  // EOF, error, or SO_RCVTIMEO expired (EAGAIN)
    p += got;
    n -= static_cast<size_t>(got);
  }
  return true;
}

bool WriteFull(int fd, const void* buf, size_t n) {
  const char* p = static_cast<const char*>(buf);
  while (n > 0) {
    const ssize_t put = ::send(fd, p, n, MSG_NOSIGNAL);
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0) return false;
    p += put;
    n -= static_cast<size_t>(put);
  }
  return true;
}

bool WriteFrame(int fd, const std::string& payload) {
  std::string frame;
  frame.reserve(4 + payload.size());
  Put<uint32_t>(frame, static_cast<uint32_t>(payload.size()));
  frame += payload;
  return WriteFull(fd, frame.data(), frame.size());
}

void PutBytes16(std::string& out, const std::string& s) {
  Put<uint16_t>(out, static_cast<uint16_t>(s.size()));
  out += s;
}

void PutBytes32(std::string& out, const std::string& s) {
  Put<uint32_t>(out, static_cast<uint32_t>(s.size()));
  out += s;
}

bool Reader::Raw(std::string& out, size_t n) {
  if (s_.size() - pos_ < n) return false;
  out.assign(s_, pos_, n);
  pos_ += n;
  return true;
}

bool Reader::Bytes16(std::string& out, size_t max) {
  uint16_t n = 0;
  return Get(n) && n <= max && Raw(out, n);
}

bool Reader::Bytes32(std::string& out, size_t max) {
  uint32_t n = 0;
  return Get(n) && n <= max && Raw(out, n);
}

bool ValidKey(const std::string& key) {
  if (key.empty() || key.size() > kMaxKeyBytes) return false;
  for (unsigned char c : key) {
    if (c <= 0x20 || c >= 0x7f) return false;
  }
  return true;
}

}  // namespace parity::kernels::comm_internal
