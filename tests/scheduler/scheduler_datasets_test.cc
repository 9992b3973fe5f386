// Every worker trains on the same data (issue #24), on the scheduler over the in-memory store:
// SubmitSweep pins the one digest the live workers hold into the sweep and every run, refuses a
// dataset held in several copies unless one is pinned, warns when no live worker holds it, and
// RegisterWorker checks what a worker says it holds.
#include <memory>
#include <string>
#include <vector>

#include "core/field_violation.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/scheduling/clock.h"
#include "server/scheduling/scheduler.h"
#include "server/store/memory/memory_run_store.h"

namespace parity::server {
namespace {

using ::testing::HasSubstr;

const std::string kDigestA(64, 'a');
const std::string kDigestB(64, 'b');

// Two runs, each with the sweep's data spec, as the real planner copies it.
absl::StatusOr<std::vector<v1::RunSpec>> TwoRuns(const v1::SweepSpec& spec) {
  std::vector<v1::RunSpec> runs(2);
  for (size_t i = 0; i < runs.size(); ++i) {
    runs[i].set_name("run-" + std::to_string(i));
    *runs[i].mutable_data() = spec.data();
    runs[i].mutable_resources()->set_cpu_threads(1);
    runs[i].mutable_training()->set_steps(10);
  }
  return runs;
}

class SchedulerDatasetsTest : public ::testing::Test {
 protected:
  void Register(const std::vector<std::pair<std::string, std::string>>& held) {
    v1::RegisterWorkerRequest request;
    request.set_hostname("host");
    v1::Device* cpu = request.add_devices();
    cpu->set_kind(v1::DEVICE_KIND_CPU);
    cpu->set_threads(4);
    for (const auto& [name, digest] : held) {
      v1::DatasetHolding* d = request.add_datasets();
      d->set_name(name);
      d->set_digest(digest);
      d->set_train_tokens(1000);
      d->set_vocab_size(256);
      d->add_eval_sets("validation");
    }
    absl::StatusOr<v1::RegisterWorkerResponse> registered = scheduler_.RegisterWorker(request);
    ASSERT_TRUE(registered.ok()) << registered.status();
  }

  static v1::SubmitSweepRequest Request(const std::string& corpus, const std::string& digest = "") {
    v1::SubmitSweepRequest request;
    request.mutable_spec()->set_name("pin");
    request.mutable_spec()->mutable_data()->set_corpus(corpus);
    request.mutable_spec()->mutable_data()->set_dataset_digest(digest);
    return request;
  }

  // The digest stored with the sweep's spec and each of its runs' specs.
  std::vector<std::string> StoredDigests(const v1::SubmitSweepResponse& submitted) {
    std::vector<std::string> digests;
    v1::GetSweepRequest get;
    get.set_sweep_id(submitted.sweep().sweep_id());
    absl::StatusOr<v1::GetSweepResponse> sweep = scheduler_.GetSweep(get);
    EXPECT_TRUE(sweep.ok()) << sweep.status();
    if (sweep.ok()) digests.push_back(sweep->sweep().spec().data().dataset_digest());
    v1::ListRunsRequest list;
    list.set_sweep_id(submitted.sweep().sweep_id());
    absl::StatusOr<v1::ListRunsResponse> runs = scheduler_.ListRuns(list);
    EXPECT_TRUE(runs.ok()) << runs.status();
    if (runs.ok()) {
      for (const v1::Run& run : runs->runs()) digests.push_back(run.spec().data().dataset_digest());
    }
    return digests;
  }

  MemoryRunStore store_;
  WorkSignal signal_;
  RealClock clock_;
  Scheduler scheduler_{store_, signal_, clock_, &TwoRuns, SchedulerOptions{}, nullptr};
};

TEST_F(SchedulerDatasetsTest, TheOneDigestLiveWorkersHoldIsPinnedIntoTheSweepAndEveryRun) {
  Register({{"tiny", kDigestA}, {"other", kDigestB}});
  Register({{"tiny", kDigestA}});
  absl::StatusOr<v1::SubmitSweepResponse> submitted = scheduler_.SubmitSweep(Request("tiny"));
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  EXPECT_EQ(submitted->warnings_size(), 0);
  EXPECT_THAT(StoredDigests(*submitted), ::testing::Each(kDigestA));
  EXPECT_EQ(StoredDigests(*submitted).size(), 3u);
}

TEST_F(SchedulerDatasetsTest, WorkersThatDisagreeRefuseAnUnpinnedSweepListingEachDigest) {
  Register({{"tiny", kDigestA}});
  Register({{"tiny", kDigestA}});
  Register({{"tiny", kDigestB}});
  const absl::Status refused = scheduler_.SubmitSweep(Request("tiny")).status();
  ASSERT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
  const std::vector<core::FieldViolation> violations = core::FieldViolationsOf(refused);
  ASSERT_EQ(violations.size(), 1u) << refused;
  EXPECT_EQ(violations[0].field, "data.dataset_digest");
  EXPECT_THAT(violations[0].description, HasSubstr(kDigestA + " (2 workers)"));
  EXPECT_THAT(violations[0].description, HasSubstr(kDigestB + " (1 worker)"));
  EXPECT_THAT(violations[0].description, HasSubstr("pin one with data.dataset_digest"));

  // Pinned, it is accepted as given.
  absl::StatusOr<v1::SubmitSweepResponse> pinned =
      scheduler_.SubmitSweep(Request("tiny", kDigestB));
  ASSERT_TRUE(pinned.ok()) << pinned.status();
  EXPECT_EQ(pinned->warnings_size(), 0);
  EXPECT_THAT(StoredDigests(*pinned), ::testing::Each(kDigestB));
}

TEST_F(SchedulerDatasetsTest, ADatasetNoLiveWorkerHoldsIsAcceptedWithAWarning) {
  Register({{"other", kDigestA}});
  absl::StatusOr<v1::SubmitSweepResponse> submitted = scheduler_.SubmitSweep(Request("tiny"));
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  ASSERT_EQ(submitted->warnings_size(), 1);
  EXPECT_EQ(submitted->warnings(0).field(), "data.corpus");
  EXPECT_THAT(submitted->warnings(0).description(),
              HasSubstr("no live worker holds dataset 'tiny'"));
  EXPECT_THAT(StoredDigests(*submitted), ::testing::Each(std::string()));

  // A pinned digest nobody holds: a warning on the digest.
  absl::StatusOr<v1::SubmitSweepResponse> pinned =
      scheduler_.SubmitSweep(Request("other", kDigestB));
  ASSERT_TRUE(pinned.ok()) << pinned.status();
  ASSERT_EQ(pinned->warnings_size(), 1);
  EXPECT_EQ(pinned->warnings(0).field(), "data.dataset_digest");

  // PlanSweep says the same without storing anything.
  v1::PlanSweepRequest plan;
  *plan.mutable_spec() = Request("tiny").spec();
  absl::StatusOr<v1::PlanSweepResponse> planned = scheduler_.PlanSweep(plan);
  ASSERT_TRUE(planned.ok()) << planned.status();
  ASSERT_EQ(planned->warnings_size(), 1);
  EXPECT_EQ(planned->warnings(0).field(), "data.corpus");
}

TEST_F(SchedulerDatasetsTest, RegistrationRefusesHoldingsThatAreNotNamesAndDigests) {
  v1::RegisterWorkerRequest request;
  request.set_hostname("host");
  v1::DatasetHolding* d = request.add_datasets();
  d->set_name("../etc");
  d->set_digest("ABC");
  const absl::Status refused = scheduler_.RegisterWorker(request).status();
  ASSERT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
  std::vector<std::string> fields;
  for (const core::FieldViolation& v : core::FieldViolationsOf(refused)) fields.push_back(v.field);
  EXPECT_THAT(fields, ::testing::IsSupersetOf({"datasets[0].name", "datasets[0].digest"}));
}

}  // namespace
}  // namespace parity::server
