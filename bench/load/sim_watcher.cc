#include "bench/load/sim_watcher.h"

#include "absl/time/clock.h"
#include "bench/load/grpc_call.h"

namespace parity::load {

// One WatchSweep call. gRPC calls it from its callback threads; it deletes itself in OnDone,
// after telling its watcher (which then forgets it under the watcher's lock).
class WatchStream : public grpc::ClientReadReactor<v1::WatchSweepResponse> {
 public:
  WatchStream(SimWatcher& owner, v1::SweepService::Stub& stub, const std::string& sweep_id)
      : owner_(owner), opened_(absl::Now()) {
    request_.set_sweep_id(sweep_id);
    request_.set_snapshot_pages(true);
    stub.async()->WatchSweep(&context_, &request_, this);
    StartRead(&message_);
    StartCall();
  }
  void Cancel() { context_.TryCancel(); }
  void OnReadDone(bool ok) override {
    if (!ok) return;  // the stream ended: OnDone follows
    owner_.OnMessage(message_, absl::Now());
    StartRead(&message_);
  }
  void OnDone(const grpc::Status& status) override {
    owner_.OnStreamDone(status, opened_);
    delete this;
  }

 private:
  SimWatcher& owner_;
  const absl::Time opened_;
  grpc::ClientContext context_;
  v1::WatchSweepRequest request_;
  v1::WatchSweepResponse message_;
};

void SimWatcher::Start() {
  if (env_.stopping) return;
  absl::MutexLock lock(&mu_);
  auto& stubs = env_.sweep_stubs[address_ % env_.sweep_stubs.size()];
  ++env_.in_flight;
  stream_ = new WatchStream(*this, *stubs[index_ % stubs.size()], sweep_id_);
}

void SimWatcher::Stop() {
  absl::MutexLock lock(&mu_);
  if (stream_ != nullptr) stream_->Cancel();
}

void SimWatcher::OnMessage(const v1::WatchSweepResponse& message, absl::Time received) {
  if (message.has_snapshot()) {
    env_.recorder->Count("watch_snapshot_pages");
    env_.recorder->Count("watch_snapshot_events", message.snapshot().runs_size());
    return;
  }
  if (!message.has_state_change()) {
    env_.recorder->Count(message.has_metric() ? "watch_metric_events" : "watch_sweep_events");
    return;
  }
  const v1::RunStateChange& change = message.state_change();
  if (change.from_state() == v1::RUN_STATE_UNSPECIFIED) {
    env_.recorder->Count("watch_snapshot_events");
    return;
  }
  env_.recorder->Count("watch_state_events");
  absl::Time sent;
  if (change.to_state() == v1::RUN_STATE_SUCCEEDED &&
      env_.ledger->CompletionTime(change.run_id(), sent)) {
    env_.recorder->Sample("watch_delay", absl::ToDoubleMilliseconds(received - sent));
  }
}

void SimWatcher::OnStreamDone(const grpc::Status& status, absl::Time opened) {
  absl::Duration backoff;
  {
    absl::MutexLock lock(&mu_);
    stream_ = nullptr;
    if (status.error_code() == grpc::StatusCode::UNAVAILABLE) ++address_;
    // Backoff doubling per stream that died young, up to 30 s, jittered by the watcher's index.
    failures_ = absl::Now() - opened > absl::Seconds(30) ? 1 : std::min(failures_ + 1, 6);
    backoff = std::min(absl::Seconds(30), absl::Seconds(1 << (failures_ - 1))) *
              (0.5 + static_cast<double>((index_ * 7919 + failures_ * 104729) % 1000) / 1000.0);
  }
  --env_.in_flight;
  if (env_.stopping) return;
  env_.recorder->Error("watch", CodeName(status.error_code()), status.error_message());
  env_.recorder->Sample("watch_stream_lifetime_s", absl::ToDoubleSeconds(absl::Now() - opened));
  env_.timers->After(backoff, [this] { Start(); });
}

}  // namespace parity::load
