// SchedulerCalls: the calls a scheduler test makes over and over (register a worker, submit a
// sweep, lease without waiting, finish runs), on whatever SchedulerUnderTest the fixture wires.
// A mixin, so the logic tests on the memory store (scheduler_logic_fixture.h) and the PostgreSQL
// ones (scheduler_fixture.h) say them the same way; each fixture owns its scheduler and store.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "core/summary_check.h"
#include "gtest/gtest.h"
#include "tests/scheduler/scheduler_specs.h"
#include "tests/scheduler/scheduler_under_test.h"

namespace parity::server::testing {

class SchedulerCalls {
 protected:
  virtual ~SchedulerCalls() = default;
  // The fixture's scheduler; it must exist while a helper below runs.
  virtual SchedulerUnderTest& under_test() = 0;

  // Registers a worker with one CPU device (or the given devices); returns its id.
  std::string Register(std::vector<v1::Device> devices = {CpuDevice()}) {
    v1::RegisterWorkerRequest request;
    request.set_hostname("test-host");
    for (const v1::Device& d : devices) *request.add_devices() = d;
    absl::StatusOr<v1::RegisterWorkerResponse> response = under_test().RegisterWorker(request);
    EXPECT_TRUE(response.ok()) << response.status();
    return response.ok() ? response->worker_id() : "";
  }

  v1::SubmitSweepResponse Submit(const v1::SweepSpec& spec, const std::string& key = "") {
    v1::SubmitSweepRequest request;
    *request.mutable_spec() = spec;
    request.set_idempotency_key(key);
    absl::StatusOr<v1::SubmitSweepResponse> response = under_test().SubmitSweep(request);
    EXPECT_TRUE(response.ok()) << response.status();
    return response.ok() ? *response : v1::SubmitSweepResponse();
  }

  // What an honest engine reports for the run `run_id` (core::PlannedSummary), with this BPC.
  v1::RunSummary PlannedSummaryOf(const std::string& run_id, double bpc) {
    v1::GetRunRequest request;
    request.set_run_id(run_id);
    absl::StatusOr<v1::GetRunResponse> run = under_test().GetRun(request);
    EXPECT_TRUE(run.ok()) << run.status();
    return run.ok() ? core::PlannedSummary(run->run().spec(), bpc, bpc) : v1::RunSummary();
  }

  // Leases up to `count` runs with one worker and completes each with SyntheticBpc().
  void FinishRuns(int count) {
    const std::string worker = Register();
    for (int i = 0; i < count; ++i) {
      absl::StatusOr<v1::LeaseRunResponse> leased = LeaseNow(worker);
      ASSERT_TRUE(leased.ok() && leased->has_lease()) << leased.status();
      v1::CompleteRunRequest complete;
      complete.set_run_id(leased->run().run_id());
      complete.set_lease_epoch(leased->lease().lease_epoch());
      complete.set_lease_secret(leased->lease_secret());
      const double bpc = SyntheticBpc(leased->run().spec());
      *complete.mutable_success() = core::PlannedSummary(leased->run().spec(), bpc, bpc);
      ASSERT_TRUE(under_test().CompleteRun(complete).ok());
    }
  }

  static v1::LeaseRunRequest LeaseRequestFor(const std::string& worker_id,
                                             std::vector<v1::Device> devices = {CpuDevice()}) {
    v1::LeaseRunRequest request;
    request.set_worker_id(worker_id);
    for (const v1::Device& d : devices) *request.add_free_devices() = d;
    return request;
  }

  // One lease attempt without waiting.
  absl::StatusOr<v1::LeaseRunResponse> LeaseNow(const std::string& worker_id,
                                                std::vector<v1::Device> devices = {CpuDevice()}) {
    return under_test().LeaseRun(LeaseRequestFor(worker_id, std::move(devices)),
                                 absl::InfiniteFuture(), {});
  }
};

}  // namespace parity::server::testing
