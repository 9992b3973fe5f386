// The rendezvous key-value store of a gang: rank 0 hosts a KvServer on a port the OS picks and
// reports "host:port" (one JSON line, kernels/README.md); every rank, rank 0 included, talks to it
// through a KvClient to swap what its collective library needs to connect (Gloo's per-rank
// transport addresses, NCCL's unique id). The scheduler relays that one string, nothing else.
//
// The socket faces the network, so the server trusts nothing: a connection must open with a HELLO
// naming the protocol, the run and the gang epoch (a rank of another run or an older attempt is
// refused with a message saying so, and the connection is closed) and the gang's secret token (rank
// 0 draws it from getrandom and reports it only with the address, to the worker that relays both
// through the scheduler; ranks > 0 take it from PARITY_RENDEZVOUS_TOKEN, never argv; compared in
// constant time, and a refusal never echoes it); keys are 1..kMaxKeyBytes of
// printable ASCII; values, the store's total size, the number of keys and of connections are
// capped; a frame longer than its limit is refused before anything is allocated; a connection
// idle for `idle_timeout` (a peer that connects and says nothing) is closed; a key is written once.
//
// Each rank also opens a second connection before the collective mesh forms and makes it its
// watch on the gang (WATCH); once the mesh is up the store is sealed (no new connections, the
// watches stay). A watch that closes without DONE —
// the rank died, was killed or stopped on an error — makes the store tell every other watch at
// once, and their ranks interrupt their collectives (gang_watch.h). Collective libraries do not
// promise to notice a dead peer (Gloo's TCP pairs can wait out the whole collective timeout; NCCL
// between GPUs of one host never notices), so this is what fails a gang promptly.
//
// Wire format (little-endian): each message is u32 length + payload.
//   request  = u8 op, then HELLO: 8 bytes "PARITYKV", u32 version (1), u64 epoch, u16 n + run id,
//                                 u16 n + token
//                           SET:   u16 n + key, u32 n + value
//                           GET:   u16 n + key, u32 wait in ms (blocks until the key exists)
//                           WATCH: u32 rank (no reply until the watch ends)
//                           DONE:  nothing (after WATCH: this rank finished; the watch ends)
//   response = u8 status (0 ok, 1 error, 2 timed out), u32 n + bytes (the value or a message)
//   A watch gets exactly one response: ok after its DONE or when the store closes after rank 0's
//   DONE (the gang finished); error naming the rank that left, or rank 0's store going away.
//
// Threading: the server runs an accept thread and one thread per connection (at most
// max_connections); KvClient is not thread-safe (one per rank, used by the rendezvous), except
// that once watching, one thread may wait for the watch's end while another sends DONE.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace parity::kernels {

inline constexpr size_t kMaxKeyBytes = 256;
inline constexpr size_t kMaxRunIdBytes = 256;
inline constexpr size_t kMaxTokenBytes = 256;

struct KvLimits {
  size_t max_value_bytes = 1 << 20;   // one value (Gloo's address list: 192 bytes per rank)
  size_t max_total_bytes = 64 << 20;  // all values together
  size_t max_keys = 4096;
  int max_connections = 64;                         // concurrent; more are closed at once
  absl::Duration idle_timeout = absl::Seconds(60);  // silence on a connection before it is closed
  absl::Duration max_wait = absl::Minutes(30);      // longest GET wait a client may ask for
  int ranks = 0;  // the gang's size: a WATCH names a rank below it (0: not checked)
};

// The identity a connection must present.
struct KvIdentity {
  std::string run_id;
  uint64_t epoch = 0;
  // The gang's secret (hex); a connection that does not present exactly it is refused.
  std::string token;
};

// A fresh gang token: 128 bits from getrandom(2) as 32 hex digits.
absl::StatusOr<std::string> NewGangToken();

class KvServer {
 public:
  // Listens on `host`:`port` (port 0: the OS picks one; host "0.0.0.0" or "::" for every
  // interface). InvalidArgument naming --rendezvous-listen when the host cannot be bound.
  static absl::StatusOr<std::unique_ptr<KvServer>> Start(const std::string& host, int port,
                                                         const KvIdentity& identity,
                                                         const KvLimits& limits);
  ~KvServer();  // Stop()
  KvServer(const KvServer&) = delete;
  KvServer& operator=(const KvServer&) = delete;

  // "host:port" as the other ranks should dial it ("[v6]:port" for IPv6); the host is the one
  // given to Start (a wildcard is replaced by this machine's host name).
  const std::string& address() const { return address_; }
  int port() const { return port_; }
  // Closes the listener: connections already open (the ranks' watches) stay. Idempotent.
  void Seal();
  // Ends every watch still open (ok when rank 0 said DONE: the gang finished; an error otherwise),
  // closes the listener and every connection and joins the threads. Idempotent.
  void Stop();

 private:
  KvServer(int fd, std::string address, int port, KvIdentity identity, KvLimits limits);
  void AcceptLoop();
  void Serve(int fd);
  // Handles one request payload; false when the connection is to be closed after the reply.
  bool Handle(const std::string& payload, bool& greeted, std::string& reply);
  std::string HandleSet(const std::string& key, std::string value, bool& ok);
  // The rest of a connection's life once it asked to WATCH `rank`.
  void Watch(int fd, uint32_t rank);
  // Sends every open watch its one response and wakes its thread (mu_ held).
  void EndWatchesLocked(uint8_t status, const std::string& why);

  const int listen_fd_;
  const std::string address_;
  const int port_;
  const KvIdentity identity_;
  const KvLimits limits_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> sealed_{false};
  std::thread accept_thread_;
  std::mutex mu_;
  std::condition_variable changed_;
  std::map<std::string, std::string> values_;  // guarded by mu_
  size_t total_bytes_ = 0;                     // guarded by mu_
  std::vector<int> open_fds_;                  // guarded by mu_
  std::vector<std::thread> threads_;           // guarded by mu_
  int active_ = 0;                             // guarded by mu_
  std::map<int, uint32_t> watches_;  // fd → rank of the watches not yet ended; guarded by mu_
  std::set<uint32_t> watched_;       // ranks that ever watched (one process a rank); guarded by mu_
  std::string broken_;               // why the gang broke ("" while it holds); guarded by mu_
  bool rank0_done_ = false;          // guarded by mu_
};

class KvClient {
 public:
  // Dials `address` ("host:port"), retrying refused connections until `timeout`, and presents
  // `identity`. Unavailable naming --rendezvous when it cannot connect or is refused (the message
  // is the server's: e.g. another gang epoch).
  static absl::StatusOr<std::unique_ptr<KvClient>> Connect(const std::string& address,
                                                           const KvIdentity& identity,
                                                           absl::Duration timeout);
  ~KvClient();
  KvClient(const KvClient&) = delete;
  KvClient& operator=(const KvClient&) = delete;

  absl::Status Set(const std::string& key, const std::string& value);
  // The key's value, waiting up to `wait` for it to be set. DeadlineExceeded when it was not.
  absl::StatusOr<std::string> Get(const std::string& key, absl::Duration wait);
  // Turns this connection into `rank`'s watch on the gang (after the collective mesh is up).
  absl::Status Watch(int rank);
  // Waits up to `wait` for the watch's one response: OK (with the store's words) when it ended
  // normally, Unavailable naming who left when the gang broke or the store went away,
  // DeadlineExceeded when nothing came yet.
  absl::StatusOr<std::string> AwaitWatchEnd(absl::Duration wait);
  // This rank finished: the watch ends without alarming the others (the response comes to
  // AwaitWatchEnd). May be called from another thread than the one waiting.
  absl::Status SendDone();
  // The local address of this connection: the interface that routes to rank 0, which is where
  // this rank's own transport listens unless told otherwise.
  std::string LocalHost() const;

 private:
  explicit KvClient(int fd) : fd_(fd) {}
  absl::StatusOr<std::string> Call(const std::string& request, absl::Duration wait);
  // One response frame; false when the connection closed or sent garbage.
  bool ReadReply(uint8_t& status, std::string& body);
  int fd_;
};

// Splits "host:port" or "[v6]:port". InvalidArgument naming `flag` otherwise.
absl::Status ParseHostPort(const std::string& address, const std::string& flag, std::string& host,
                           int& port);

}  // namespace parity::kernels
