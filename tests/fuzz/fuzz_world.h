// What the scheduler and dashboard fuzz targets run against: a RunStore in memory and a
// Scheduler over it, seeded with one small planned sweep in every state a page can show.
//
// FuzzRunStore is MemoryRunStore (server/store/memory: sweeps, runs, leases, workers) plus the
// read models that store leaves to PostgreSQL, done simply: results from the runs (order_by
// checked against the same columns PostgresRunStore accepts, offset page tokens), the metric
// points it was given (ListMetrics, and SampleMetrics through web::SampleEvenly, the rule the
// SQL follows), no events. Enough for every route and request to reach its real code; not a
// second store contract.
//
// Inputs name the seeded objects with placeholders (ExpandPlaceholders): "@sweep", "@run" (a
// SUCCEEDED run with metrics), "@run2" (a RUNNING run with metrics, lease epoch 1), "@pending"
// (a PENDING run) and "@worker". The ids are random per store, so corpora stay valid across
// processes only through these names.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "google/protobuf/message.h"
#include "server/scheduling/clock.h"
#include "server/scheduling/scheduler.h"
#include "server/scheduling/work_signal.h"
#include "server/store/memory/memory_run_store.h"
#include "server/store/run_store.h"

namespace parity::fuzz {

class FuzzRunStore final : public server::RunStore {
 public:
  explicit FuzzRunStore(const server::Clock& clock);

  // Forgets everything: a new empty memory store. No call may be in flight.
  void Reset();

  // SweepCatalog, RunQueue and TelemetryRetention: the memory store's.
  absl::StatusOr<server::CreatedSweep> CreateSweep(const server::NewSweep& sweep) override;
  absl::StatusOr<v1::Sweep> GetSweep(const std::string& sweep_id) override;
  absl::StatusOr<server::Page<v1::Sweep>> ListSweeps(v1::SweepState state,
                                                     const server::PageRequest& page) override;
  absl::StatusOr<server::CancelResult> CancelSweep(const std::string& sweep_id,
                                                   const std::string& reason) override;
  absl::StatusOr<uint32_t> DeleteSweep(const std::string& sweep_id) override;
  absl::StatusOr<v1::Run> GetRun(const std::string& run_id) override;
  absl::StatusOr<server::Page<v1::Run>> ListRuns(const std::string& sweep_id,
                                                 const std::vector<v1::RunState>& states,
                                                 const server::PageRequest& page) override;
  absl::StatusOr<server::Page<v1::Worker>> ListWorkers(const server::WorkersQuery& query) override;
  absl::StatusOr<v1::Worker> RegisterWorker(const server::WorkerRegistration& worker) override;
  absl::StatusOr<std::string> ClaimWorker(const std::string& worker_id,
                                          const std::string& owner) override;
  absl::StatusOr<std::vector<server::RunHolding>> RunHoldings(
      const std::string& worker_id, const std::vector<std::string>& run_ids) override;
  std::vector<absl::StatusOr<std::optional<server::LeasedRun>>> LeaseNextRuns(
      const std::vector<const server::LeaseRequest*>& requests) override;
  absl::StatusOr<server::HeartbeatResult> Heartbeat(const server::HeartbeatUpdate& update) override;
  absl::StatusOr<server::MetricsAppendResult> AppendMetrics(
      const std::string& run_id, int64_t lease_epoch,
      const std::vector<v1::MetricPoint>& points) override;
  std::vector<absl::StatusOr<server::CompletionResult>> CompleteRuns(
      const std::vector<const server::Completion*>& completions) override;
  absl::StatusOr<server::ReapResult> ReapExpiredLeases(int limit) override;
  absl::StatusOr<server::ServiceLiveness> RecordReaperPass(const server::ReaperPass& pass) override;
  absl::StatusOr<server::RetentionResult> ApplyRetention(
      const server::RetentionPolicy& policy) override;
  absl::StatusOr<server::OwnerLoad> CountOwnerLoad(const std::string& owner) override;
  // AccessTokens: the memory store's.
  absl::StatusOr<server::StoredAccessToken> CreateToken(
      const server::NewAccessToken& token) override;
  absl::StatusOr<std::optional<server::StoredAccessToken>> FindToken(
      const std::string& secret_sha256) override;
  absl::StatusOr<server::Page<server::StoredAccessToken>> ListTokens(
      bool include_inactive, const server::PageRequest& page) override;
  absl::StatusOr<uint32_t> RevokeTokens(const server::TokenRevocation& which) override;
  absl::StatusOr<bool> HasLiveAdmin() override;
  absl::StatusOr<std::string> GetOrCreateServerKey(const std::string& name,
                                                   const std::string& candidate) override;

  // ReadModels, simply.
  absl::StatusOr<server::Page<v1::ResultRow>> QueryResults(
      const server::ResultsQuery& query) override;
  absl::StatusOr<server::SweepEventPage> ListSweepEvents(const std::string& sweep_id,
                                                         uint64_t horizon) override;
  absl::StatusOr<std::vector<server::RunEvent>> ListRunEvents(const std::string& run_id,
                                                              int64_t after_event_id,
                                                              int limit) override;
  absl::StatusOr<server::RunCounts> CountRunsByState(const server::RunCountsQuery& query) override;
  absl::StatusOr<std::vector<v1::MetricPoint>> ListMetrics(const std::string& run_id,
                                                           uint64_t from_step, int limit) override;
  absl::StatusOr<std::vector<v1::MetricPoint>> SampleMetrics(
      const std::vector<std::string>& run_ids, const MetricSampling& sampling) override;

 private:
  const server::Clock& clock_;
  std::unique_ptr<server::MemoryRunStore> memory_;
  absl::Mutex mu_;
  // Every point the memory store accepted, by run and step (the newest lease's wins there too).
  std::map<std::string, std::map<uint64_t, v1::MetricPoint>> metrics_ ABSL_GUARDED_BY(mu_);
};

// A store and a Scheduler (core::PlanSweep as its planner, a FakeClock, LeaseRun never waiting)
// with the seeded sweep. Made once per process (a Scheduler starts threads, which ASan makes
// slow); Reset() gives the next input the same state afresh (the plan is computed once).
class FuzzWorld {
 public:
  FuzzWorld();
  ~FuzzWorld();

  // A new store seeded as at construction; no call may be in flight.
  void Reset();

  server::Scheduler& scheduler() { return *scheduler_; }
  // The lease secret of @run2's lease (epoch 1): a write that leaves lease_secret empty is sent
  // with it, so that inputs reach past the holder check; one that sets another is refused there.
  const std::string& seeded_lease_secret() const { return seeded_lease_secret_; }
  template <typename Request>
  Request WithSeededSecret(const Request& request) const {
    Request copy = request;
    if (copy.lease_secret().empty()) copy.set_lease_secret(seeded_lease_secret_);
    return copy;
  }
  server::RunStore& store() { return *store_; }
  const server::FakeClock& clock() const { return clock_; }

  // Replaces the placeholders above in `text`.
  std::string ExpandPlaceholders(std::string text) const;
  // The same in every string field of `message`, nested messages and repeated fields included.
  void ExpandPlaceholders(google::protobuf::Message& message) const;

 private:
  server::FakeClock clock_;
  server::WorkSignal signal_;
  std::unique_ptr<FuzzRunStore> store_;
  std::unique_ptr<server::Scheduler> scheduler_;
  void Seed();

  std::vector<std::pair<std::string, std::string>> placeholders_;  // longest name first
  std::string seeded_lease_secret_;
};

// Silences protobuf's and spdlog's logging (a refused non-UTF-8 string, a refused success): at
// thousands of inputs a second it is only noise. Called from LLVMFuzzerInitialize.
void QuietLogs();

// The small sweep the world is seeded with (YAML, two MoE points, one dense baseline, 6 runs).
extern const char kSeedSweepYaml[];

}  // namespace parity::fuzz
