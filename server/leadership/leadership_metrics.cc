#include "server/leadership/leadership_metrics.h"

#include <utility>
#include <vector>

#include "prometheus/client_metric.h"
#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"
#include "prometheus/text_serializer.h"

namespace parity::server {

class LeadershipMetrics::Gauge final : public prometheus::Collectable {
 public:
  explicit Gauge(std::function<bool()> is_leader) : is_leader_(std::move(is_leader)) {}
  std::vector<prometheus::MetricFamily> Collect() const override {
    prometheus::MetricFamily family;
    family.name = "parity_scheduler_is_leader";
    family.help =
        "1 while this replica is the elected leader that runs the upkeep (reaper, "
        "retention, sweep finalisation), else 0";
    family.type = prometheus::MetricType::Gauge;
    prometheus::ClientMetric metric;
    metric.gauge.value = is_leader_() ? 1.0 : 0.0;
    family.metric.push_back(std::move(metric));
    return {std::move(family)};
  }

 private:
  const std::function<bool()> is_leader_;
};

LeadershipMetrics::LeadershipMetrics(std::function<bool()> is_leader)
    : registry_(std::make_shared<prometheus::Registry>()),
      gauge_(std::make_shared<Gauge>(std::move(is_leader))),
      changes_(prometheus::BuildCounter()
                   .Name("parity_scheduler_leadership_changes_total")
                   .Help("Times this replica gained or lost the upkeep leadership")
                   .Register(*registry_)) {
  changes_.Add({{"change", "gained"}});
  changes_.Add({{"change", "lost"}});
}

LeadershipMetrics::~LeadershipMetrics() = default;

void LeadershipMetrics::OnLeadershipGained(const LeaderFence&) {
  changes_.Add({{"change", "gained"}}).Increment();
}

void LeadershipMetrics::OnLeadershipLost(const LeaderFence&, absl::string_view) {
  changes_.Add({{"change", "lost"}}).Increment();
}

std::string LeadershipMetrics::Render() {
  std::vector<prometheus::MetricFamily> families = registry_->Collect();
  for (prometheus::MetricFamily& family : gauge_->Collect()) families.push_back(std::move(family));
  return prometheus::TextSerializer().Serialize(families);
}

std::vector<std::shared_ptr<prometheus::Collectable>> LeadershipMetrics::collectables() const {
  return {registry_, gauge_};
}

}  // namespace parity::server
