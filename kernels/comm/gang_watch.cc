#include "kernels/comm/gang_watch.h"

#include <chrono>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/status_macros.h"

namespace parity::kernels {
namespace {

// The backend's communicator behind the gang's watch: collectives pass through; once the gang
// broke they fail at once, and a failure says which rank left.
class WatchedCommunicator final : public Communicator {
 public:
  WatchedCommunicator(std::unique_ptr<Communicator> inner, std::unique_ptr<GangWatch> watch,
                      std::unique_ptr<KvServer> server,
                      std::function<void(const absl::Status&)> on_wedged, absl::Duration grace)
      : server_(std::move(server)),
        inner_(std::move(inner)),
        watch_(std::move(watch)),
        on_wedged_(std::move(on_wedged)),
        grace_(grace) {}
  ~WatchedCommunicator() override {
    watch_.reset();  // its thread may call inner_->Interrupt: gone before inner_
    inner_.reset();
    server_.reset();  // rank 0: the others' watches hear "finished" or that rank 0 left
  }

  int rank() const override { return inner_->rank(); }
  int world_size() const override { return inner_->world_size(); }
  std::string_view Name() const override { return inner_->Name(); }

  absl::Status AllReduceSum(float* data, int64_t count) override {
    return Guard("all-reduce", [&] { return inner_->AllReduceSum(data, count); });
  }
  absl::Status AllReduceSumHost(double* data, int64_t count) override {
    return Guard("all-reduce", [&] { return inner_->AllReduceSumHost(data, count); });
  }
  absl::Status Broadcast(void* data, size_t bytes, int root) override {
    return Guard("broadcast", [&] { return inner_->Broadcast(data, bytes, root); });
  }
  absl::Status BroadcastHost(void* data, size_t bytes, int root) override {
    return Guard("broadcast", [&] { return inner_->BroadcastHost(data, bytes, root); });
  }
  absl::Status Barrier() override {
    return Guard("barrier", [&] { return inner_->Barrier(); });
  }
  bool QueuesOnDevice() const override { return inner_->QueuesOnDevice(); }
  absl::Status QueueAllReduceSum(float* data, int64_t count) override {
    return Guard("all-reduce", [&] { return inner_->QueueAllReduceSum(data, count); });
  }
  absl::Status WaitQueued() override {
    return Guard("all-reduce", [&] { return inner_->WaitQueued(); });
  }
  // From the watch's thread: the backend's own interrupt, then a grace for the collective in
  // flight (if any) to come back before the process is declared wedged.
  void Interrupt(const std::string& why) override {
    inner_->Interrupt(why);
    const absl::Time deadline = absl::Now() + grace_;
    while (in_flight_.load() > 0 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(10));
    if (in_flight_.load() == 0 || !on_wedged_) return;
    on_wedged_(absl::UnavailableError(
        absl::StrCat(Label(), " still blocked ", absl::FormatDuration(grace_),
                     " after the gang broke (", why, "): ", std::string(Name()),
                     " did not wake; the process ends so that the gang can restart from its "
                     "last checkpoint")));
  }
  void MarkFinished() override { watch_->Finish(); }

 private:
  std::string Label() const {
    return absl::StrCat(std::string(Name()), " collective on rank ", rank(), " of ", world_size());
  }

  template <typename F>
  absl::Status Guard(const char* what, F&& call) {
    if (const std::string why = watch_->broken(); !why.empty()) {
      return absl::UnavailableError(absl::StrCat(
          std::string(Name()), " ", what, " on rank ", rank(), " of ", world_size(),
          " not started: the gang broke (", why, "); it must restart from its last checkpoint"));
    }
    in_flight_.fetch_add(1);
    absl::Status s = call();
    in_flight_.fetch_sub(1);
    if (s.ok()) return s;
    return WithGangWatchWord(s, watch_->AwaitBroken(absl::Seconds(1)));
  }

  std::unique_ptr<KvServer> server_;
  std::unique_ptr<Communicator> inner_;
  std::unique_ptr<GangWatch> watch_;
  const std::function<void(const absl::Status&)> on_wedged_;
  const absl::Duration grace_;
  std::atomic<int> in_flight_{0};  // collectives the engine's thread is inside
};

}  // namespace

absl::StatusOr<std::unique_ptr<GangWatch>> GangWatch::Start(std::unique_ptr<KvClient> client,
                                                            int rank) {
  PARITY_RETURN_IF_ERROR(client->Watch(rank));
  std::unique_ptr<GangWatch> watch(new GangWatch(std::move(client)));
  watch->thread_ = std::thread([w = watch.get()] { w->Loop(); });
  return watch;
}

GangWatch::~GangWatch() {
  quit_.store(true);
  if (thread_.joinable()) thread_.join();
}

void GangWatch::Loop() {
  while (!quit_.load()) {
    // Polls so that the destructor is heard within this interval.
    absl::StatusOr<std::string> end = client_->AwaitWatchEnd(absl::Milliseconds(200));
    if (absl::IsDeadlineExceeded(end.status())) continue;
    Communicator* target = nullptr;
    std::string why;
    {
      std::lock_guard<std::mutex> lock(mu_);
      ended_ = true;
      // OK: this rank's DONE was answered, or rank 0 finished (the gang ended normally).
      if (!end.ok() && !finishing_.load()) {
        broken_ = why = std::string(end.status().message());
        target = target_;
      }
    }
    ended_cv_.notify_all();
    if (target != nullptr) target->Interrupt(why);
    return;
  }
}

void GangWatch::Interrupts(Communicator* target) {
  std::string why;
  {
    std::lock_guard<std::mutex> lock(mu_);
    target_ = target;
    why = broken_;
  }
  if (!why.empty()) target->Interrupt(why);
}

void GangWatch::Finish() {
  if (finishing_.exchange(true)) return;
  if (!client_->SendDone().ok()) return;  // the store is gone: nobody is left to alarm
  std::unique_lock<std::mutex> lock(mu_);
  ended_cv_.wait_for(lock, std::chrono::seconds(5), [&] { return ended_; });
}

std::string GangWatch::broken() const {
  std::lock_guard<std::mutex> lock(mu_);
  return broken_;
}

std::string GangWatch::AwaitBroken(absl::Duration wait) const {
  std::unique_lock<std::mutex> lock(mu_);
  ended_cv_.wait_for(lock, absl::ToChronoMilliseconds(wait), [&] { return ended_; });
  return broken_;
}

absl::Status WithGangWatchWord(const absl::Status& s, const std::string& why) {
  if (s.ok() || why.empty() || absl::StrContains(s.message(), why)) return s;
  return absl::Status(s.code(), absl::StrCat(s.message(), " [the gang's watch: ", why, "]"));
}

std::unique_ptr<Communicator> WatchGang(std::unique_ptr<Communicator> inner,
                                        std::unique_ptr<GangWatch> watch,
                                        std::unique_ptr<KvServer> server,
                                        std::function<void(const absl::Status&)> on_wedged,
                                        absl::Duration grace) {
  if (server != nullptr) server->Seal();
  GangWatch* w = watch.get();
  auto watched = std::make_unique<WatchedCommunicator>(
      std::move(inner), std::move(watch), std::move(server), std::move(on_wedged), grace);
  w->Interrupts(watched.get());
  return watched;
}

}  // namespace parity::kernels
