// PostgresRunStore: the RunStore on PostgreSQL (schema in migrations/), through libpqxx 6.4, and
// the GangQueue beside it (postgres_gang_queue.cc).
//
// Each method borrows a connection from a small pool and runs one transaction of prepared
// statements; libpqxx exceptions are caught here and mapped (pg_support.h). Thread-safe: the pool
// is the only shared state. Several scheduler replicas may share one database: all coordination
// is in the transactions (row locks, SKIP LOCKED, fencing tokens).
#pragma once

#include <memory>
#include <string>

#include "server/store/gang_queue.h"
#include "server/store/run_store.h"

namespace parity::server {

class PgConnectionPool;

struct PostgresRunStoreOptions {
  std::string database_url;
  int pool_size = 8;
  // Every statement on the store's connections is cancelled after this (a query that would hold
  // row locks or a connection for longer is a fault, not a workload). The retention pass, which
  // thins many rows in one transaction, allows itself ten minutes.
  absl::Duration statement_timeout = absl::Seconds(60);
};

class PostgresRunStore final : public RunStore, public GangQueue {
 public:
  explicit PostgresRunStore(PostgresRunStoreOptions options);
  ~PostgresRunStore() override;

  absl::StatusOr<CreatedSweep> CreateSweep(const NewSweep& sweep) override;
  absl::StatusOr<v1::Sweep> GetSweep(const std::string& sweep_id) override;
  absl::StatusOr<Page<v1::Sweep>> ListSweeps(v1::SweepState state,
                                             const PageRequest& page) override;
  absl::StatusOr<CancelResult> CancelSweep(const std::string& sweep_id,
                                           const std::string& reason) override;
  absl::StatusOr<uint32_t> DeleteSweep(const std::string& sweep_id) override;
  absl::StatusOr<OwnerLoad> CountOwnerLoad(const std::string& owner) override;
  absl::StatusOr<v1::Run> GetRun(const std::string& run_id) override;
  absl::StatusOr<Page<v1::Run>> ListRuns(const std::string& sweep_id,
                                         const std::vector<v1::RunState>& states,
                                         const PageRequest& page) override;
  absl::StatusOr<Page<v1::ResultRow>> QueryResults(const ResultsQuery& query) override;
  absl::StatusOr<v1::Worker> RegisterWorker(const WorkerRegistration& worker) override;
  absl::StatusOr<std::string> ClaimWorker(const std::string& worker_id,
                                          const std::string& owner) override;
  absl::StatusOr<std::vector<RunHolding>> RunHoldings(
      const std::string& worker_id, const std::vector<std::string>& run_ids) override;
  absl::StatusOr<Page<v1::Worker>> ListWorkers(const WorkersQuery& query) override;
  std::vector<absl::StatusOr<std::optional<LeasedRun>>> LeaseNextRuns(
      const std::vector<const LeaseRequest*>& requests) override;
  absl::StatusOr<HeartbeatResult> Heartbeat(const HeartbeatUpdate& update) override;
  absl::StatusOr<MetricsAppendResult> AppendMetrics(
      const std::string& run_id, int64_t lease_epoch,
      const std::vector<v1::MetricPoint>& points) override;
  std::vector<absl::StatusOr<CompletionResult>> CompleteRuns(
      const std::vector<const Completion*>& completions) override;
  absl::StatusOr<ReapResult> ReapExpiredLeases(int limit) override;
  absl::StatusOr<ServiceLiveness> RecordReaperPass(const ReaperPass& pass) override;
  // Under a leader's term (postgres_fenced_upkeep.cc).
  absl::StatusOr<ReapResult> ReapExpiredLeasesFenced(int limit, const LeaderFence& fence) override;
  absl::StatusOr<ServiceLiveness> RecordReaperPassFenced(const ReaperPass& pass,
                                                         const LeaderFence& fence) override;
  absl::StatusOr<RetentionResult> ApplyRetentionFenced(const RetentionPolicy& policy,
                                                       const LeaderFence& fence) override;

  // TelemetryRetention.
  absl::StatusOr<RetentionResult> ApplyRetention(const RetentionPolicy& policy) override;
  absl::StatusOr<SweepEventPage> ListSweepEvents(const std::string& sweep_id,
                                                 uint64_t horizon) override;
  absl::StatusOr<Page<RunStateRow>> ListRunStates(const std::string& sweep_id,
                                                  const PageRequest& page) override;
  absl::StatusOr<std::vector<RunEvent>> ListRunEvents(const std::string& run_id,
                                                      int64_t after_event_id, int limit) override;
  absl::StatusOr<RunCounts> CountRunsByState(const RunCountsQuery& query) override;
  absl::StatusOr<std::vector<v1::MetricPoint>> ListMetrics(const std::string& run_id,
                                                           uint64_t from_step, int limit) override;
  absl::StatusOr<std::optional<v1::RunGang>> GetRunGang(const std::string& run_id) override;
  // AccessTokens (postgres_access_tokens.cc).
  absl::StatusOr<StoredAccessToken> CreateToken(const NewAccessToken& token) override;
  absl::StatusOr<std::optional<StoredAccessToken>> FindToken(
      const std::string& secret_sha256) override;
  absl::StatusOr<Page<StoredAccessToken>> ListTokens(bool include_inactive,
                                                     const PageRequest& page) override;
  absl::StatusOr<uint32_t> RevokeTokens(const TokenRevocation& which) override;
  absl::StatusOr<bool> HasLiveAdmin() override;
  absl::StatusOr<std::string> GetOrCreateServerKey(const std::string& name,
                                                   const std::string& candidate) override;
  // GangQueue (postgres_gang_queue.cc).
  absl::StatusOr<GangWait> WaitForGang(const GangOffer& offer) override;
  absl::StatusOr<std::optional<GangGrant>> AnswerGangAgain(const std::string& worker_id,
                                                           const std::string& request_id,
                                                           absl::Duration lease_ttl) override;
  absl::Status LeaveGangPool(const std::string& worker_id) override;
  absl::StatusOr<RendezvousState> PostRendezvous(const RendezvousCall& call) override;
  absl::StatusOr<RendezvousState> CheckInRendezvous(const RendezvousCall& call) override;
  absl::StatusOr<HeartbeatResult> HeartbeatFollower(const HeartbeatUpdate& update) override;
  absl::StatusOr<std::vector<LapsedGang>> ListLapsedGangs(int limit) override;
  absl::StatusOr<v1::Run> FailGang(const GangFailure& failure) override;
  absl::StatusOr<GangCounts> CountGangs() override;
  // Web dashboard (postgres_metric_sampling.cc).
  absl::StatusOr<std::vector<v1::MetricPoint>> SampleMetrics(
      const std::vector<std::string>& run_ids, const MetricSampling& sampling) override;

 private:
  absl::StatusOr<CompletionResult> CompleteRunFailed(const Completion& completion);

  const PostgresRunStoreOptions options_;
  // Behind a pointer so that this header, which the server includes, does not pull in libpqxx.
  std::unique_ptr<PgConnectionPool> pool_;
};

}  // namespace parity::server
