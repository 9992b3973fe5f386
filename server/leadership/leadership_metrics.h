// LeadershipMetrics: the elector's Prometheus metrics, a LeadershipObserver.
//   parity_scheduler_is_leader                      gauge, 1 while this replica leads the upkeep
//   parity_scheduler_leadership_changes_total{change="gained"|"lost"}   counter
// Kept in its own registry: SchedulerServer appends Render() to the scheduler's /metrics text and
// registers registry() with the --metrics-listen exposer. The gauge is read from the elector at
// scrape time, so a leader past its own deadline shows 0 even while its renewal still hangs.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/registry.h"
#include "server/leadership/elector.h"

namespace parity::server {

class LeadershipMetrics final : public LeadershipObserver {
 public:
  // `is_leader` is asked at every scrape (Elector::is_leader).
  explicit LeadershipMetrics(std::function<bool()> is_leader);
  ~LeadershipMetrics() override;

  void OnLeadershipGained(const LeaderFence& fence) override;
  void OnLeadershipLost(const LeaderFence& fence, absl::string_view why) override;

  std::string Render();
  // What an exposer registers (the counters' registry and the gauge).
  std::vector<std::shared_ptr<prometheus::Collectable>> collectables() const;

 private:
  class Gauge;  // a Collectable asking is_leader at scrape time
  const std::shared_ptr<prometheus::Registry> registry_;
  const std::shared_ptr<Gauge> gauge_;
  prometheus::Family<prometheus::Counter>& changes_;
};

}  // namespace parity::server
