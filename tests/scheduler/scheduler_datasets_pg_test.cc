// Every worker trains on the same data (issue #24), on PostgreSQL: the digest SubmitSweep pins
// from a registered worker's holdings is stored with the sweep and its runs (workers.datasets,
// migration 0016), and a run's result keeps the digest of the dataset it trained on.
#include "tests/scheduler/scheduler_fixture.h"

namespace parity::server::testing {
namespace {

TEST_F(SchedulerTest, TheDigestALiveWorkerHoldsIsPinnedAndTheResultKeepsItsDigest) {
  const std::string digest(64, 'c');
  v1::RegisterWorkerRequest holder;
  holder.set_hostname("holder");
  *holder.add_devices() = CpuDevice();
  v1::DatasetHolding* held = holder.add_datasets();
  held->set_name("tiny");
  held->set_digest(digest);
  absl::StatusOr<v1::RegisterWorkerResponse> registered = scheduler_->RegisterWorker(holder);
  ASSERT_TRUE(registered.ok()) << registered.status();

  v1::SweepSpec spec = MakeSweepSpec("pinned", 1);
  spec.mutable_data()->set_corpus("tiny");
  const v1::SubmitSweepResponse submitted = Submit(spec);
  EXPECT_EQ(submitted.sweep().spec().data().dataset_digest(), digest);
  EXPECT_EQ(submitted.warnings_size(), 0);

  absl::StatusOr<v1::LeaseRunResponse> leased = LeaseNow(registered->worker_id());
  ASSERT_TRUE(leased.ok() && leased->has_lease()) << leased.status();
  EXPECT_EQ(leased->run().spec().data().dataset_digest(), digest) << "the run carries the pin";
  v1::CompleteRunRequest complete;
  complete.set_run_id(leased->run().run_id());
  complete.set_lease_epoch(leased->lease().lease_epoch());
  complete.set_lease_secret(leased->lease_secret());
  *complete.mutable_success() = core::PlannedSummary(leased->run().spec(), 1.5, 1.5);
  complete.mutable_success()->set_dataset_digest(digest);
  ASSERT_TRUE(scheduler_->CompleteRun(complete).ok());

  v1::QueryResultsRequest results;
  results.mutable_filter()->set_sweep_id(submitted.sweep().sweep_id());
  absl::StatusOr<v1::QueryResultsResponse> rows = scheduler_->QueryResults(results);
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->rows_size(), 1);
  EXPECT_EQ(rows->rows(0).dataset_digest(), digest);

  // Another worker with another copy: an unpinned sweep of the dataset is now ambiguous.
  holder.clear_worker_id();
  held->set_digest(std::string(64, 'e'));
  ASSERT_TRUE(scheduler_->RegisterWorker(holder).ok());
  v1::SubmitSweepRequest again;
  *again.mutable_spec() = spec;
  again.mutable_spec()->set_name("ambiguous");
  const absl::Status refused = scheduler_->SubmitSweep(again).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
  ASSERT_EQ(core::FieldViolationsOf(refused).size(), 1u) << refused;
  EXPECT_EQ(core::FieldViolationsOf(refused)[0].field, "data.dataset_digest");
}

}  // namespace
}  // namespace parity::server::testing
