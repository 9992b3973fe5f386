// A checkpoint URI a worker reports is where the run's next worker resumes the engine from, so the
// scheduler takes only one inside the run's own prefix of the checkpoint store
// (core/checkpoint_uri.h). The attack of issue #23: a lease holder recorded
// ../../root/.ssh/id_rsa, and the next worker, of another pool, ran the engine on it.
#include "core/checkpoint_uri.h"

#include "core/field_violation.h"
#include "gmock/gmock.h"
#include "tests/scheduler/scheduler_fixture.h"

namespace parity::server::testing {
namespace {

std::vector<std::string> ViolatedFields(const absl::Status& status) {
  std::vector<std::string> fields;
  for (const core::FieldViolation& v : core::FieldViolationsOf(status)) fields.push_back(v.field);
  return fields;
}

TEST_F(SchedulerTest, ACheckpointOutsideTheRunsPrefixIsRefusedAndNothingIsStored) {
  const v1::SubmitSweepResponse submitted = Submit(MakeSweepSpec("confined", 2));
  const std::string worker = Register();
  const absl::StatusOr<v1::LeaseRunResponse> leased = LeaseNow(worker);
  ASSERT_TRUE(leased.ok() && leased->has_lease()) << leased.status();
  const std::string run_id = leased->run().run_id();
  const std::string other_run =
      submitted.run_ids(0) == run_id ? submitted.run_ids(1) : submitted.run_ids(0);
  const std::string before = Sql(database_url_, "SELECT row_to_json(runs)::text FROM runs");

  for (const std::string& uri : std::vector<std::string>{
           std::string("../../root/.ssh/id_rsa"), std::string("/root/.ssh/id_rsa"),
           std::string("/var/lib/parity/checkpoints/") + run_id + "/recorded-1/step-00000010.ckpt",
           other_run + "/recorded-1/step-00000010.ckpt",
           run_id + "/../" + other_run + "/recorded-1/step-00000010.ckpt", run_id}) {
    SCOPED_TRACE(uri);
    v1::HeartbeatRequest heartbeat;
    heartbeat.set_worker_id(worker);
    heartbeat.set_run_id(run_id);
    heartbeat.set_lease_epoch(leased->lease().lease_epoch());
    heartbeat.set_lease_secret(leased->lease_secret());
    heartbeat.set_step(10);
    heartbeat.mutable_checkpoint()->set_step(10);
    heartbeat.mutable_checkpoint()->set_uri(uri);
    const absl::Status beat = scheduler_->Heartbeat(heartbeat).status();
    EXPECT_EQ(beat.code(), absl::StatusCode::kInvalidArgument) << beat;
    EXPECT_THAT(ViolatedFields(beat), ::testing::ElementsAre("checkpoint.uri"));

    v1::CompleteRunRequest complete;
    complete.set_run_id(run_id);
    complete.set_lease_epoch(leased->lease().lease_epoch());
    complete.set_lease_secret(leased->lease_secret());
    complete.mutable_failure()->set_failure_class(v1::FAILURE_CLASS_INFRASTRUCTURE);
    complete.mutable_checkpoint()->set_step(10);
    complete.mutable_checkpoint()->set_uri(uri);
    const absl::Status completed = scheduler_->CompleteRun(complete).status();
    EXPECT_EQ(completed.code(), absl::StatusCode::kInvalidArgument) << completed;
    EXPECT_THAT(ViolatedFields(completed), ::testing::ElementsAre("checkpoint.uri"));
  }
  EXPECT_EQ(Sql(database_url_, "SELECT row_to_json(runs)::text FROM runs"), before)
      << "a refused report must store nothing";

  // The form a worker reports is taken as it is.
  const std::string inside = core::CheckpointUri(run_id, "recorded-1/step-00000010.ckpt");
  v1::HeartbeatRequest heartbeat;
  heartbeat.set_worker_id(worker);
  heartbeat.set_run_id(run_id);
  heartbeat.set_lease_epoch(leased->lease().lease_epoch());
  heartbeat.set_lease_secret(leased->lease_secret());
  heartbeat.set_step(10);
  heartbeat.mutable_checkpoint()->set_step(10);
  heartbeat.mutable_checkpoint()->set_uri(inside);
  ASSERT_TRUE(scheduler_->Heartbeat(heartbeat).ok());
  EXPECT_EQ(Sql(database_url_, "SELECT checkpoint_uri FROM runs WHERE run_id = '" + run_id + "'"),
            inside);
}

}  // namespace
}  // namespace parity::server::testing
