// `parity status RUN`'s text: a gang's ranks with their hosts and devices, and its rendezvous
// released, waiting before its deadline, or past it; a PENDING gang; a run of one rank; the memory
// line of a finished run.
#include "cli/run_status_format.h"

#include "core/proto_time.h"
#include "gtest/gtest.h"

namespace parity::cli {
namespace {

const absl::Time kPlaced = absl::FromUnixSeconds(1'800'000'000);

parity::v1::GetRunResponse GangRun(parity::v1::RunState state, int checked_in) {
  parity::v1::GetRunResponse response;
  parity::v1::Run& run = *response.mutable_run();
  run.set_run_id("11111111-2222-4333-8444-555555555555");
  run.set_sweep_id("99999999-2222-4333-8444-555555555555");
  run.mutable_spec()->set_name("dense-4r");
  run.mutable_spec()->mutable_resources()->set_ranks(4);
  run.mutable_spec()->mutable_training()->set_steps(100);
  run.set_state(state);
  run.set_attempt(1);
  run.set_max_attempts(3);
  run.set_latest_step(20);
  parity::v1::RunGang& gang = *response.mutable_gang();
  gang.set_world_size(4);
  gang.set_lease_epoch(7);
  *gang.mutable_placed_time() = ToProtoTime(kPlaced);
  *gang.mutable_rendezvous_deadline() = ToProtoTime(kPlaced + absl::Minutes(5));
  const char* hosts[] = {"node-a", "node-a", "node-b", "node-b"};
  for (uint32_t i = 0; i < 4; ++i) {
    parity::v1::RunGangRank& rank = *gang.add_ranks();
    rank.set_rank(i);
    rank.set_worker_id(i < 2 ? "aaaaaaaa-0000-4000-8000-000000000001"
                             : "bbbbbbbb-0000-4000-8000-000000000002");
    rank.set_hostname(hosts[i]);
    rank.add_device_indices(i % 2);
    if (static_cast<int>(i) < checked_in) {
      rank.set_checked_in(true);
      *rank.mutable_check_in_time() = ToProtoTime(kPlaced + absl::Milliseconds(1200 + 100 * i));
    }
  }
  return response;
}

TEST(RunStatusFormat, AReleasedGangListsEveryRankWithHostDevicesAndCheckIn) {
  parity::v1::GetRunResponse response = GangRun(parity::v1::RUN_STATE_RUNNING, 4);
  response.mutable_gang()->set_released(true);
  *response.mutable_gang()->mutable_released_time() = ToProtoTime(kPlaced + absl::Seconds(3.2));
  const std::string text = FormatRunStatus(response, kPlaced + absl::Minutes(1));
  EXPECT_NE(text.find("run 11111111-2222-4333-8444-555555555555 (dense-4r) RUNNING"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("gang: 4 ranks on 2 hosts, epoch 7, placed 2027-01-15 08:00:00 UTC"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("rendezvous: released 3.2 s after placement"), std::string::npos) << text;
  EXPECT_NE(text.find("rank  worker"), std::string::npos) << text;
  EXPECT_NE(text.find("   2  bbbbbbbb-0000-4000-8000-000000000002  node-b  0        yes (+1.4 s)"),
            std::string::npos)
      << text;
}

TEST(RunStatusFormat, AWaitingRendezvousCountsCheckInsAndTheDeadline) {
  const parity::v1::GetRunResponse response = GangRun(parity::v1::RUN_STATE_LEASED, 2);
  EXPECT_EQ(RendezvousText(response.gang(), kPlaced + absl::Seconds(50)),
            "waiting: 2 of 4 checked in, deadline in 4m 10s");
  EXPECT_EQ(RendezvousText(response.gang(), kPlaced + absl::Minutes(5) + absl::Seconds(12)),
            "waiting: 2 of 4 checked in, deadline passed 12.0 s ago (the scheduler fails and "
            "requeues the gang)");
  const std::string text = FormatRunStatus(response, kPlaced + absl::Seconds(50));
  EXPECT_NE(text.find("   3  bbbbbbbb-0000-4000-8000-000000000002  node-b  1        no"),
            std::string::npos)
      << text;
}

TEST(RunStatusFormat, APendingGangWaitsToBePlacedAndARunOfOneRankHasNoGangPart) {
  parity::v1::GetRunResponse pending = GangRun(parity::v1::RUN_STATE_PENDING, 0);
  pending.clear_gang();
  EXPECT_NE(FormatRunStatus(pending, kPlaced).find("gang: 4 ranks, waiting to be placed whole"),
            std::string::npos);
  parity::v1::GetRunResponse single = pending;
  single.mutable_run()->mutable_spec()->mutable_resources()->set_ranks(1);
  EXPECT_EQ(FormatRunStatus(single, kPlaced).find("gang"), std::string::npos);
}

// A finished run's memory: the host's peak, the device's beside the planner's estimate with how far
// apart they are, each only where the summary reports it; a run without a summary prints none.
TEST(RunStatusFormat, MemoryShowsTheDevicePeakBesideTheEstimate) {
  parity::v1::RunSummary summary;
  EXPECT_EQ(MemoryText(summary), "") << "nothing reported, no line";
  summary.set_peak_memory_bytes(3'000'000'000);
  EXPECT_EQ(MemoryText(summary), "memory: host peak 3 GB");
  summary.set_peak_device_memory_bytes(61'200'000'000);
  EXPECT_EQ(MemoryText(summary), "memory: host peak 3 GB; device peak 61.2 GB");
  summary.set_estimated_device_memory_bytes(58'000'000'000);
  EXPECT_EQ(MemoryText(summary),
            "memory: host peak 3 GB; device 61.2 GB of 58 GB estimated (+5.5%)");
  summary.set_peak_device_memory_bytes(29'000'000'000);
  EXPECT_EQ(MemoryText(summary),
            "memory: host peak 3 GB; device 29 GB of 58 GB estimated (-50.0%)");

  parity::v1::GetRunResponse done = GangRun(parity::v1::RUN_STATE_SUCCEEDED, 4);
  done.clear_gang();
  done.mutable_run()->mutable_spec()->mutable_resources()->set_ranks(1);
  *done.mutable_run()->mutable_summary() = summary;
  const std::string text = FormatRunStatus(done, kPlaced);
  EXPECT_NE(text.find("\nmemory: host peak 3 GB; device 29 GB of 58 GB estimated (-50.0%)\n"),
            std::string::npos)
      << text;
  done.mutable_run()->clear_summary();
  EXPECT_EQ(FormatRunStatus(done, kPlaced).find("memory"), std::string::npos);
}

TEST(RunStatusFormat, SpansReadAsSecondsMinutesOrHours) {
  EXPECT_EQ(SpanText(absl::Milliseconds(3200)), "3.2 s");
  EXPECT_EQ(SpanText(absl::Seconds(250)), "4m 10s");
  EXPECT_EQ(SpanText(absl::Minutes(125)), "2h 5m");
  EXPECT_EQ(SpanText(-absl::Seconds(12)), "12.0 s");
}

}  // namespace
}  // namespace parity::cli
