#include "server/leadership/elector.h"

#include <unistd.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace parity::server {
namespace {

std::chrono::steady_clock::time_point SteadyNow() { return std::chrono::steady_clock::now(); }

std::chrono::steady_clock::duration ToSteady(absl::Duration d) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      absl::ToChronoNanoseconds(d));
}

}  // namespace

std::string DefaultReplicaId() {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  return absl::StrCat(host[0] == '\0' ? "replica" : host, ":", getpid());
}

Elector::Elector(LeaderLeases& leases, ElectorOptions options, LeadershipObserver* observer)
    : leases_(leases), options_(std::move(options)), observer_(observer) {}

Elector::~Elector() { Stop(); }

void Elector::Start() {
  if (started_) return;
  started_ = true;
  const absl::Duration first_wait = Attempt();
  thread_ = std::thread([this, first_wait] {
    absl::Duration wait = first_wait;
    while (true) {
      {
        absl::MutexLock lock(&mu_);
        mu_.AwaitWithTimeout(absl::Condition(this, &Elector::Wakeable), wait);
        if (stop_) return;
        woken_ = false;
      }
      wait = Attempt();
    }
  });
}

void Elector::Stop() {
  if (stopped_) return;
  stopped_ = true;
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
  Change change;
  {
    absl::MutexLock lock(&mu_);
    if (!leading_) return;
    leading_ = false;
    change.lost = LeaderFence{options_.name, epoch_};
  }
  absl::StatusOr<bool> resigned =
      leases_.Resign(options_.name, options_.leader_id, change.lost->epoch);
  change.why = resigned.ok() ? "resigned" : "stopped (resign failed; the lease runs out)";
  if (!resigned.ok()) {
    spdlog::warn("event=leader_resign_failed name={} error=\"{}\"", options_.name,
                 resigned.status().ToString());
  }
  Report(change);
}

void Elector::Wake() {
  absl::MutexLock lock(&mu_);
  woken_ = true;
}

std::optional<LeaderFence> Elector::fence() const {
  absl::MutexLock lock(&mu_);
  if (!leading_ || SteadyNow() >= deadline_) return std::nullopt;
  return LeaderFence{options_.name, epoch_};
}

absl::Duration Elector::Attempt() {
  const absl::Duration ttl = options_.ttl;
  const absl::Duration margin = options_.margin > absl::ZeroDuration() ? options_.margin : ttl / 10;
  const absl::Duration interval = ttl / 3;
  const SteadyTime sent = SteadyNow();
  absl::StatusOr<LeaderLease> lease =
      leases_.AcquireOrRenew(options_.name, options_.leader_id, ttl);
  Change change;
  absl::Duration wait = interval;
  {
    absl::MutexLock lock(&mu_);
    const SteadyTime now = SteadyNow();
    if (!lease.ok()) {
      if (leading_ && now >= deadline_) {
        leading_ = false;
        change.lost = LeaderFence{options_.name, epoch_};
        change.why =
            absl::StrCat("could not renew before its deadline: ", lease.status().message());
      } else if (leading_) {
        // Try again soon, but wake at the deadline to step down if it comes first.
        wait = std::min(interval / 2, absl::FromChrono(deadline_ - now));
      }
    } else if (lease->held) {
      if (leading_ && (lease->epoch != epoch_ || now >= deadline_)) {
        // The old term ran out (even if this replica took the new one): report both.
        change.lost = LeaderFence{options_.name, epoch_};
        change.why = "its term ran out before the renewal";
        leading_ = false;
      }
      if (!leading_) change.gained = LeaderFence{options_.name, lease->epoch};
      leading_ = true;
      epoch_ = lease->epoch;
      deadline_ = sent + ToSteady(ttl - margin);
    } else {
      if (leading_) {
        leading_ = false;
        change.lost = LeaderFence{options_.name, epoch_};
        change.why = absl::StrCat("'", lease->leader_id, "' holds term ", lease->epoch);
      }
      // Try again when the holder's lease runs out, or at the next interval if sooner.
      wait = std::min(interval, lease->remaining + absl::Milliseconds(5));
    }
  }
  if (!lease.ok()) {
    spdlog::warn("event=leader_election_failed name={} error=\"{}\"", options_.name,
                 lease.status().ToString());
  }
  Report(change);
  return std::max(wait, absl::Milliseconds(1));
}

void Elector::Report(const Change& change) {
  if (change.lost.has_value()) {
    spdlog::info("event=leadership_lost name={} replica={} epoch={} why=\"{}\"", options_.name,
                 options_.leader_id, change.lost->epoch, change.why);
    if (observer_ != nullptr) observer_->OnLeadershipLost(*change.lost, change.why);
  }
  if (change.gained.has_value()) {
    spdlog::info("event=leadership_gained name={} replica={} epoch={}", options_.name,
                 options_.leader_id, change.gained->epoch);
    if (observer_ != nullptr) observer_->OnLeadershipGained(*change.gained);
  }
}

}  // namespace parity::server
