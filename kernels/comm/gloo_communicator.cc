#include "kernels/comm/gloo_communicator.h"

#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>

#include <chrono>
#include <exception>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace parity::kernels {
namespace {

// gloo::rendezvous::Store over the gang's TCP key-value store. Gloo's rendezvous throws on
// failure, so this adapter throws gloo::IoException with a message that says what happened and
// records whether it was a timeout (a rank that never arrived).
class GlooStore final : public gloo::rendezvous::Store {
 public:
  GlooStore(KvClient& client, std::string prefix, absl::Duration timeout)
      : client_(client), prefix_(std::move(prefix)), timeout_(timeout) {}

  void set(const std::string& key, const std::vector<char>& data) override {
    const absl::Status s = client_.Set(prefix_ + key, std::string(data.begin(), data.end()));
    if (!s.ok()) throw gloo::IoException(std::string(s.message()));
  }

  std::vector<char> get(const std::string& key) override {
    const std::string value = Get(key, timeout_);
    return std::vector<char>(value.begin(), value.end());
  }

  void wait(const std::vector<std::string>& keys) override { wait(keys, ToChrono(timeout_)); }

  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override {
    const absl::Time deadline = absl::Now() + std::min(absl::FromChrono(timeout), timeout_);
    for (const std::string& key : keys) {
      Get(key, std::max(deadline - absl::Now(), absl::ZeroDuration()));
    }
  }

  bool timed_out() const { return timed_out_; }

 private:
  static std::chrono::milliseconds ToChrono(absl::Duration d) {
    return std::chrono::milliseconds(absl::ToInt64Milliseconds(d));
  }

  std::string Get(const std::string& key, absl::Duration wait) {
    absl::StatusOr<std::string> got = client_.Get(prefix_ + key, wait);
    if (absl::IsDeadlineExceeded(got.status())) {
      timed_out_ = true;
      throw gloo::IoException(
          absl::StrCat("a rank did not arrive: Gloo's rendezvous entry '", key,
                       "' (keyed by rank number) was not posted within --rendezvous-timeout (",
                       absl::FormatDuration(timeout_), ")"));
    }
    if (!got.ok()) throw gloo::IoException(std::string(got.status().message()));
    return *std::move(got);
  }

  KvClient& client_;
  const std::string prefix_;
  const absl::Duration timeout_;
  bool timed_out_ = false;
};

class GlooCommunicator final : public Communicator {
 public:
  explicit GlooCommunicator(std::shared_ptr<gloo::rendezvous::Context> ctx)
      : ctx_(std::move(ctx)) {}

  int rank() const override { return ctx_->rank; }
  int world_size() const override { return ctx_->size; }
  std::string_view Name() const override { return "gloo"; }

  absl::Status AllReduceSum(float* data, int64_t count) override {
    return Run("all-reduce", [&] {
      gloo::AllreduceOptions opts(ctx_);
      opts.setOutput(data, static_cast<size_t>(count));
      opts.setReduceFunction(
          static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
      gloo::allreduce(opts);
    });
  }

  absl::Status AllReduceSumHost(double* data, int64_t count) override {
    return Run("all-reduce", [&] {
      gloo::AllreduceOptions opts(ctx_);
      opts.setOutput(data, static_cast<size_t>(count));
      opts.setReduceFunction(
          static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<double>));
      gloo::allreduce(opts);
    });
  }

  absl::Status Broadcast(void* data, size_t bytes, int root) override {
    return BroadcastHost(data, bytes, root);  // CPU device memory is host memory
  }

  absl::Status BroadcastHost(void* data, size_t bytes, int root) override {
    return Run("broadcast", [&] {
      gloo::BroadcastOptions opts(ctx_);
      opts.setOutput(static_cast<char*>(data), bytes);
      opts.setRoot(root);
      gloo::broadcast(opts);
    });
  }

  absl::Status Barrier() override {
    return Run("barrier", [&] {
      gloo::BarrierOptions opts(ctx_);
      gloo::barrier(opts);
    });
  }

  // No Interrupt: Gloo has no call that wakes a waiting operation. Its TCP pair, failing, wakes
  // the buffers it knows of but not an unbound buffer's send still queued on it, which is how a
  // rank can wait out the collective timeout after its peer died; the gang's watch ends such a
  // process instead (gang_watch.h, CommOptions::on_wedged).

 private:
  template <typename F>
  absl::Status Run(const char* what, F&& f) {
    if (ctx_->size == 1) return absl::OkStatus();
    try {
      f();
      return absl::OkStatus();
    } catch (const std::exception& e) {
      return absl::UnavailableError(absl::StrCat(
          "gloo ", what, " on rank ", ctx_->rank, " of ", ctx_->size,
          " failed (a peer died, was stopped or hung past --collective-timeout; the gang must "
          "restart from its last checkpoint): ",
          e.what()));
    }
  }

  std::shared_ptr<gloo::rendezvous::Context> ctx_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Communicator>> MakeGlooCommunicator(
    const CommOptions& o, KvClient& client, const std::string& transport_host) {
  GlooStore store(client, GangKeyPrefix(o) + "gloo/", o.rendezvous_timeout);
  try {
    gloo::transport::tcp::attr attr(transport_host.c_str());
    std::shared_ptr<gloo::transport::Device> dev = gloo::transport::tcp::CreateDevice(attr);
    auto ctx = std::make_shared<gloo::rendezvous::Context>(o.rank, o.world_size);
    ctx->setTimeout(std::chrono::milliseconds(absl::ToInt64Milliseconds(o.rendezvous_timeout)));
    ctx->connectFullMesh(store, dev);
    gloo::BarrierOptions barrier(ctx);
    gloo::barrier(barrier);  // every rank is connected (and done with the store) past this
    ctx->setTimeout(std::chrono::milliseconds(absl::ToInt64Milliseconds(o.collective_timeout)));
    return std::make_unique<GlooCommunicator>(std::move(ctx));
  } catch (const std::exception& e) {
    const std::string why =
        absl::StrCat("rank ", o.rank, " of ", o.world_size, " could not join its gang (epoch ",
                     o.gang_epoch, ") over Gloo on ", transport_host, ": ", e.what());
    if (store.timed_out())
      return absl::DeadlineExceededError(absl::StrCat("--rendezvous-timeout: ", why));
    return absl::UnavailableError(why);
  }
}

}  // namespace parity::kernels
