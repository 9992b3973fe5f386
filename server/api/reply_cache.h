// ReplyCache: the JSON API's answers kept for a moment (a second by default).
//
// Every open dashboard of a sweep asks for the same few documents every 3 s — the sweep, a
// page of its table, its summary, curves, analysis — and each is a query over thousands of
// runs. Fifty people watching one sweep would cost fifty times one; with the answer kept for a
// second they cost about one a second, each seeing data at most that old. Callers asking for a
// document while it is being computed wait for that computation. Only successful (200) replies
// are kept. The answer of a route does not depend on who asks (DashboardApi takes no caller: the
// access check runs before it), so one kept reply serves every caller let through.
#pragma once

#include <cstddef>
#include <functional>
#include <iterator>
#include <list>
#include <map>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace parity::server {

struct ReplyCacheOptions {
  absl::Duration ttl = absl::Seconds(1);  // zero: nothing is kept
  size_t max_entries = 256;
  size_t max_bytes = 64 << 20;  // of kept bodies, all together
};

// The cache over a reply type with `int status` and `std::string body` (HttpReply).
template <typename Reply>
class ReplyCache {
 public:
  ReplyCache(ReplyCacheOptions options, std::function<absl::Time()> now)
      : options_(options), now_(std::move(now)) {}

  Reply GetOrCompute(const std::string& key, const std::function<Reply()>& compute)
      ABSL_LOCKS_EXCLUDED(mu_) {
    if (options_.ttl <= absl::ZeroDuration()) return compute();
    {
      absl::MutexLock lock(&mu_);
      auto settled = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        auto it = entries_.find(key);
        return it == entries_.end() || !it->second.computing;
      };
      mu_.Await(absl::Condition(&settled));
      auto it = entries_.find(key);
      if (it != entries_.end() && now_() < it->second.expires) return it->second.reply;
      if (it != entries_.end()) Drop(it);
      Entry& entry = entries_[key];
      entry.computing = true;
      order_.push_back(key);
      entry.order = std::prev(order_.end());
    }
    Reply reply = compute();
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(key);
    if (reply.status != 200 || reply.body.size() > options_.max_bytes) {
      Drop(it);  // the next caller computes again
      return reply;
    }
    it->second.computing = false;
    it->second.reply = reply;
    it->second.expires = now_() + options_.ttl;
    bytes_ += reply.body.size();
    Evict();
    return reply;
  }

  size_t size() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return entries_.size();
  }

 private:
  struct Entry {
    Reply reply;
    absl::Time expires = absl::InfinitePast();
    bool computing = false;
    std::list<std::string>::iterator order;  // in order_, oldest first
  };
  using Entries = std::map<std::string, Entry>;

  void Drop(typename Entries::iterator it) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!it->second.computing) bytes_ -= it->second.reply.body.size();
    order_.erase(it->second.order);
    entries_.erase(it);
  }
  // The oldest kept replies go first; one being computed stays (its caller comes back to it).
  void Evict() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (auto key = order_.begin();
         key != order_.end() &&
         (entries_.size() > options_.max_entries || bytes_ > options_.max_bytes);) {
      auto it = entries_.find(*key++);
      if (!it->second.computing) Drop(it);
    }
  }

  const ReplyCacheOptions options_;
  const std::function<absl::Time()> now_;
  mutable absl::Mutex mu_;
  Entries entries_ ABSL_GUARDED_BY(mu_);
  std::list<std::string> order_ ABSL_GUARDED_BY(mu_);
  size_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace parity::server
