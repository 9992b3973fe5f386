// Every worker trains on the same data (issue #24), on the scheduling units over the memory store
// and the fake clock (scheduler_logic_fixture.h): SubmitSweep pins the one digest the live
// workers hold (workers.datasets, migration 0016) into the sweep and every run, refuses a dataset
// held in several copies unless one is pinned, warns when no live worker holds it;
// RegisterWorker checks what a worker says it holds; a run's result keeps the digest of the
// dataset it trained on. (The holdings' storage is in the store contract, on both stores.)
#include "gmock/gmock.h"
#include "tests/scheduler/scheduler_logic_fixture.h"

namespace parity::server::testing {
namespace {

using ::testing::HasSubstr;

const std::string kDigestA(64, 'a');
const std::string kDigestB(64, 'b');

class SchedulerDatasetsTest : public SchedulerLogicTest {
 protected:
  std::string RegisterHolding(const std::vector<std::pair<std::string, std::string>>& held) {
    v1::RegisterWorkerRequest request;
    request.set_hostname("holder");
    *request.add_devices() = CpuDevice();
    for (const auto& [name, digest] : held) {
      v1::DatasetHolding* d = request.add_datasets();
      d->set_name(name);
      d->set_digest(digest);
      d->set_train_tokens(1000);
      d->set_vocab_size(256);
      d->add_eval_sets("validation");
    }
    absl::StatusOr<v1::RegisterWorkerResponse> registered = scheduler_->RegisterWorker(request);
    EXPECT_TRUE(registered.ok()) << registered.status();
    return registered.ok() ? registered->worker_id() : "";
  }

  static v1::SubmitSweepRequest Request(const std::string& name, const std::string& corpus,
                                        const std::string& digest = "") {
    v1::SubmitSweepRequest request;
    *request.mutable_spec() = MakeSweepSpec(name, 2);
    request.mutable_spec()->set_allow_undertrained(true);  // only the dataset warnings here
    request.mutable_spec()->mutable_data()->set_corpus(corpus);
    request.mutable_spec()->mutable_data()->set_dataset_digest(digest);
    return request;
  }

  // The digest stored with the sweep's spec, then with each of its runs' specs.
  std::vector<std::string> StoredDigests(const v1::SubmitSweepResponse& submitted) {
    std::vector<std::string> digests;
    v1::GetSweepRequest get;
    get.set_sweep_id(submitted.sweep().sweep_id());
    absl::StatusOr<v1::GetSweepResponse> sweep = scheduler_->GetSweep(get);
    EXPECT_TRUE(sweep.ok()) << sweep.status();
    if (sweep.ok()) digests.push_back(sweep->sweep().spec().data().dataset_digest());
    v1::ListRunsRequest list;
    list.set_sweep_id(submitted.sweep().sweep_id());
    absl::StatusOr<v1::ListRunsResponse> runs = scheduler_->ListRuns(list);
    EXPECT_TRUE(runs.ok()) << runs.status();
    if (runs.ok()) {
      for (const v1::Run& run : runs->runs()) digests.push_back(run.spec().data().dataset_digest());
    }
    return digests;
  }
};

TEST_F(SchedulerDatasetsTest, TheOneDigestLiveWorkersHoldIsPinnedIntoTheSweepAndEveryRun) {
  RegisterHolding({{"tiny", kDigestA}, {"other", kDigestB}});
  RegisterHolding({{"tiny", kDigestA}});
  absl::StatusOr<v1::SubmitSweepResponse> submitted =
      scheduler_->SubmitSweep(Request("pinned", "tiny"));
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  EXPECT_EQ(submitted->warnings_size(), 0);
  EXPECT_THAT(StoredDigests(*submitted), ::testing::ElementsAre(kDigestA, kDigestA, kDigestA));
}

TEST_F(SchedulerDatasetsTest, WorkersThatDisagreeRefuseAnUnpinnedSweepListingEachDigest) {
  RegisterHolding({{"tiny", kDigestA}});
  RegisterHolding({{"tiny", kDigestA}});
  RegisterHolding({{"tiny", kDigestB}});
  const absl::Status refused = scheduler_->SubmitSweep(Request("ambiguous", "tiny")).status();
  ASSERT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
  const std::vector<core::FieldViolation> violations = core::FieldViolationsOf(refused);
  ASSERT_EQ(violations.size(), 1u) << refused;
  EXPECT_EQ(violations[0].field, "data.dataset_digest");
  EXPECT_THAT(violations[0].description, HasSubstr(kDigestA + " (2 workers)"));
  EXPECT_THAT(violations[0].description, HasSubstr(kDigestB + " (1 worker)"));
  EXPECT_THAT(violations[0].description, HasSubstr("pin one with data.dataset_digest"));

  // Pinned, it is accepted as given.
  absl::StatusOr<v1::SubmitSweepResponse> pinned =
      scheduler_->SubmitSweep(Request("chosen", "tiny", kDigestB));
  ASSERT_TRUE(pinned.ok()) << pinned.status();
  EXPECT_EQ(pinned->warnings_size(), 0);
  EXPECT_THAT(StoredDigests(*pinned), ::testing::Each(kDigestB));
}

TEST_F(SchedulerDatasetsTest, ADatasetNoLiveWorkerHoldsIsAcceptedWithAWarning) {
  RegisterHolding({{"other", kDigestA}});
  absl::StatusOr<v1::SubmitSweepResponse> submitted =
      scheduler_->SubmitSweep(Request("unheld", "tiny"));
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  ASSERT_EQ(submitted->warnings_size(), 1);
  EXPECT_EQ(submitted->warnings(0).field(), "data.corpus");
  EXPECT_THAT(submitted->warnings(0).description(),
              HasSubstr("no live worker holds dataset 'tiny'"));
  EXPECT_THAT(StoredDigests(*submitted), ::testing::Each(std::string()));

  // A pinned digest nobody holds: a warning on the digest.
  absl::StatusOr<v1::SubmitSweepResponse> pinned =
      scheduler_->SubmitSweep(Request("unheld-pin", "other", kDigestB));
  ASSERT_TRUE(pinned.ok()) << pinned.status();
  ASSERT_EQ(pinned->warnings_size(), 1);
  EXPECT_EQ(pinned->warnings(0).field(), "data.dataset_digest");

  // PlanSweep says the same without storing anything.
  v1::PlanSweepRequest plan;
  *plan.mutable_spec() = Request("plan", "tiny").spec();
  absl::StatusOr<v1::PlanSweepResponse> planned = scheduler_->PlanSweep(plan);
  ASSERT_TRUE(planned.ok()) << planned.status();
  ASSERT_EQ(planned->warnings_size(), 1);
  EXPECT_EQ(planned->warnings(0).field(), "data.corpus");

  // A worker not seen for over 5 minutes is not live: its holdings pin nothing.
  clock_.Advance(absl::Minutes(10));
  absl::StatusOr<v1::SubmitSweepResponse> stale =
      scheduler_->SubmitSweep(Request("stale", "other"));
  ASSERT_TRUE(stale.ok()) << stale.status();
  EXPECT_THAT(StoredDigests(*stale), ::testing::Each(std::string()));
}

TEST_F(SchedulerDatasetsTest, RegistrationRefusesHoldingsThatAreNotNamesAndDigests) {
  v1::RegisterWorkerRequest request;
  request.set_hostname("host");
  *request.add_devices() = CpuDevice();
  v1::DatasetHolding* d = request.add_datasets();
  d->set_name("../etc");
  d->set_digest("ABC");
  const absl::Status refused = scheduler_->RegisterWorker(request).status();
  ASSERT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
  std::vector<std::string> fields;
  for (const core::FieldViolation& v : core::FieldViolationsOf(refused)) fields.push_back(v.field);
  EXPECT_THAT(fields, ::testing::IsSupersetOf({"datasets[0].name", "datasets[0].digest"}));
}

TEST_F(SchedulerDatasetsTest, ARunsResultKeepsTheDigestOfTheDatasetItTrainedOn) {
  const std::string worker = RegisterHolding({{"tiny", kDigestA}});
  const v1::SubmitSweepResponse submitted = Submit(Request("trained", "tiny").spec());
  absl::StatusOr<v1::LeaseRunResponse> leased = LeaseNow(worker);
  ASSERT_TRUE(leased.ok() && leased->has_lease()) << leased.status();
  EXPECT_EQ(leased->run().spec().data().dataset_digest(), kDigestA) << "the run carries the pin";
  v1::CompleteRunRequest complete;
  complete.set_run_id(leased->run().run_id());
  complete.set_lease_epoch(leased->lease().lease_epoch());
  complete.set_lease_secret(leased->lease_secret());
  *complete.mutable_success() = core::PlannedSummary(leased->run().spec(), 1.5, 1.5);
  complete.mutable_success()->set_dataset_digest(kDigestA);
  ASSERT_TRUE(scheduler_->CompleteRun(complete).ok());

  v1::QueryResultsRequest results;
  results.mutable_filter()->set_sweep_id(submitted.sweep().sweep_id());
  results.mutable_filter()->add_states(v1::RUN_STATE_SUCCEEDED);
  absl::StatusOr<v1::QueryResultsResponse> rows = scheduler_->QueryResults(results);
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->rows_size(), 1);
  EXPECT_EQ(rows->rows(0).dataset_digest(), kDigestA);
}

}  // namespace
}  // namespace parity::server::testing
