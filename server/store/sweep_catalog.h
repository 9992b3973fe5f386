// SweepCatalog: what the store knows of sweeps, their runs and the workers, for submitting,
// cancelling and listing them (SweepService, the dashboards). See run_store.h for the errors.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "parity/v1/run.pb.h"
#include "parity/v1/sweep.pb.h"
#include "parity/v1/worker.pb.h"
#include "server/store/paging.h"

namespace parity::server {

// A sweep to store with its planned runs (in grid order).
struct NewSweep {
  v1::SweepSpec spec;
  std::vector<v1::RunSpec> runs;
  std::string owner;
  // Empty = no idempotency. Keys are the owner's: the same key from another owner is another
  // sweep, never the first owner's.
  std::string idempotency_key;
};

struct CreatedSweep {
  v1::Sweep sweep;
  std::vector<std::string> run_ids;  // grid order
  bool deduplicated = false;         // the key matched an existing sweep; nothing written
};

struct CancelResult {
  v1::Sweep sweep;
  uint32_t cancelled_runs = 0;
};

// What one identity has in the system now, for its limits (Scheduler::SubmitSweep).
struct OwnerLoad {
  uint32_t open_sweeps = 0;  // ACTIVE sweeps it owns
  uint64_t queued_runs = 0;  // their runs not yet ended (PENDING, LEASED, RUNNING)
};

struct WorkersQuery {
  absl::Duration seen_within = absl::Seconds(300);  // last lease, heartbeat or registration
  PageRequest page;
};

class SweepCatalog {
 public:
  virtual ~SweepCatalog() = default;

  // Stores the sweep and all its runs (PENDING) with one creation event each, or returns the
  // sweep the same owner already stored under the idempotency key when the spec is identical
  // (ALREADY_EXISTS when it differs). Keys are scoped to the owner: (owner, key) is unique.
  virtual absl::StatusOr<CreatedSweep> CreateSweep(const NewSweep& sweep) = 0;
  virtual absl::StatusOr<v1::Sweep> GetSweep(const std::string& sweep_id) = 0;
  virtual absl::StatusOr<Page<v1::Sweep>> ListSweeps(v1::SweepState state,
                                                     const PageRequest& page) = 0;
  // PENDING runs become CANCELLED; LEASED/RUNNING ones are flagged and end at their next
  // heartbeat. Idempotent.
  virtual absl::StatusOr<CancelResult> CancelSweep(const std::string& sweep_id,
                                                   const std::string& reason) = 0;
  // Deletes an ended sweep with its runs and their events and metrics; returns how many runs
  // went. FAILED_PRECONDITION while a run may still train (cancel the sweep and let its live runs
  // stop first). Workers delete the runs' checkpoints when they next look (CheckpointRetention).
  virtual absl::StatusOr<uint32_t> DeleteSweep(const std::string& sweep_id) = 0;

  // The open sweeps and unended runs of the sweeps `owner` owns.
  virtual absl::StatusOr<OwnerLoad> CountOwnerLoad(const std::string& owner) = 0;

  virtual absl::StatusOr<v1::Run> GetRun(const std::string& run_id) = 0;
  virtual absl::StatusOr<Page<v1::Run>> ListRuns(const std::string& sweep_id,
                                                 const std::vector<v1::RunState>& states,
                                                 const PageRequest& page) = 0;
  // Workers seen within `seen_within`, most recently seen first (keyset paging on
  // (last_seen_at, worker_id); a worker seen again while a client pages may move to an earlier
  // page and be missed by that listing), each with its count of LEASED/RUNNING runs.
  virtual absl::StatusOr<Page<v1::Worker>> ListWorkers(const WorkersQuery& query) = 0;
};

}  // namespace parity::server
