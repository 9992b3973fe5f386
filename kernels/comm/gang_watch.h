// A rank's watch on its gang (internal to comm/; kv_store.h has the protocol). Besides the
// connection it swaps rendezvous keys over, each rank opens a second one to rank 0's store and
// turns it into its watch before the collective mesh forms; when any rank leaves without saying
// it finished — killed, crashed, stopped on an error, its host gone — the store tells every other
// rank at once and each interrupts its collectives, so the gang fails within a second or two
// instead of when the collective timeout (30 minutes by default) runs out. Collective libraries
// do not promise this: Gloo's TCP pairs can miss a dead peer while a send waits (a race seen in
// 1–5 % of runs of a test), and NCCL between the GPUs of one host never notices one.
//
// WatchGang wraps the backend's communicator: every collective goes through, the watch's thread
// calls the backend's Interrupt when the gang breaks, and a collective that fails then (or is
// called after) says which rank left. A collective still blocked a grace period later belongs to
// a library that cannot be woken (Gloo: its failing TCP pair does not wake an unbound buffer's
// queued send); then `on_wedged` ends the process with the reason, as PyTorch's NCCL watchdog
// tears down a process whose collective it cannot recover. MarkFinished is the run's normal end:
// the watch ends without alarming anyone, and rank 0's store closes with "finished" for those still
// watching.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "kernels/comm/communicator.h"
#include "kernels/comm/kv_store.h"

namespace parity::kernels {

class GangWatch {
 public:
  // Sends WATCH for `rank` over `client` (connected and greeted) and starts the watch's thread.
  static absl::StatusOr<std::unique_ptr<GangWatch>> Start(std::unique_ptr<KvClient> client,
                                                          int rank);
  // Without Finish first: closes the connection, which tells the others this rank left.
  ~GangWatch();
  GangWatch(const GangWatch&) = delete;
  GangWatch& operator=(const GangWatch&) = delete;

  // From now on a broken gang interrupts `target` (at once if it broke already); exactly one
  // Interrupt, from the watch's thread or this call. `target` must outlive the watch.
  void Interrupts(Communicator* target);
  // This rank finished: says DONE and waits (at most a few seconds) for the store's answer, so
  // that the connection closes only after the store read it.
  void Finish();
  // Why the gang broke; "" while it holds or after it ended normally.
  std::string broken() const;
  // broken(), after waiting up to `wait` for the watch to end (a collective that just failed on
  // a dead peer: the store's word on who left is milliseconds behind).
  std::string AwaitBroken(absl::Duration wait) const;

 private:
  explicit GangWatch(std::unique_ptr<KvClient> client) : client_(std::move(client)) {}
  void Loop();

  std::unique_ptr<KvClient> client_;
  std::atomic<bool> finishing_{false};
  std::atomic<bool> quit_{false};
  mutable std::mutex mu_;
  mutable std::condition_variable ended_cv_;
  bool ended_ = false;              // the watch's response (or the connection's end) came; mu_
  std::string broken_;              // guarded by mu_
  Communicator* target_ = nullptr;  // guarded by mu_
  std::thread thread_;
};

// `s` with the watch's word on why the gang broke appended, unless empty or already said.
absl::Status WithGangWatchWord(const absl::Status& s, const std::string& why);

// `inner` (the backend's communicator, its mesh up) watched by `watch`; rank 0 passes its store,
// which is sealed here (no new connections) and stopped when the communicator goes.
// When the gang breaks the backend is interrupted; a collective still blocked `grace` later
// gets `on_wedged` (CommOptions).
std::unique_ptr<Communicator> WatchGang(std::unique_ptr<Communicator> inner,
                                        std::unique_ptr<GangWatch> watch,
                                        std::unique_ptr<KvServer> server,
                                        std::function<void(const absl::Status&)> on_wedged,
                                        absl::Duration grace);

}  // namespace parity::kernels
