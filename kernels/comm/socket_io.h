// Blocking socket helpers and the frame codec shared by the rendezvous store's server and client
// (internal to comm/; kv_store.h has the wire format).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

#include "absl/time/time.h"

namespace parity::kernels::comm_internal {

enum KvOp : uint8_t { kHello = 1, kSet = 2, kGet = 3, kWatch = 4, kDone = 5 };
enum KvStatus : uint8_t { kOk = 0, kError = 1, kTimedOut = 2 };
inline constexpr char kMagic[8] = {'P', 'A', 'R', 'I', 'T', 'Y', 'K', 'V'};
inline constexpr uint32_t kVersion = 1;

// Receive and send timeouts of a blocking socket (0 = none).
void SetSocketTimeouts(int fd, absl::Duration recv, absl::Duration send);
// TCP keepalive probes after 10 s of silence, every 5 s, 3 unanswered = dead: a watch connection
// to a host that vanished (power, network) breaks within about 25 s instead of never.
void EnableKeepalive(int fd);
// Reads exactly n bytes; false on EOF, error or timeout.
bool ReadFull(int fd, void* buf, size_t n);
// Writes all bytes (MSG_NOSIGNAL); false on error or timeout.
bool WriteFull(int fd, const void* buf, size_t n);
// Writes u32 length + payload.
bool WriteFrame(int fd, const std::string& payload);

// Little-endian appenders and a bounds-checked reader over a payload.
template <typename T>
void Put(std::string& out, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));  // the engine runs on little-endian hosts only
  out.append(b, sizeof(T));
}
void PutBytes16(std::string& out, const std::string& s);  // u16 length + bytes
void PutBytes32(std::string& out, const std::string& s);  // u32 length + bytes

class Reader {
 public:
  explicit Reader(const std::string& s) : s_(s) {}
  template <typename T>
  bool Get(T& v) {
    if (s_.size() - pos_ < sizeof(T)) return false;
    std::memcpy(&v, s_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }
  // u16/u32 length + bytes, refusing more than `max`.
  bool Bytes16(std::string& out, size_t max);
  bool Bytes32(std::string& out, size_t max);
  bool Raw(std::string& out, size_t n);
  bool AtEnd() const { return pos_ == s_.size(); }

 private:
  const std::string& s_;
  size_t pos_ = 0;
};

// Keys are 1..kMaxKeyBytes of printable ASCII (no spaces, no control bytes).
bool ValidKey(const std::string& key);

}  // namespace parity::kernels::comm_internal
