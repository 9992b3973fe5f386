// libFuzzer target: the scheduler's request validation (server/scheduling/scheduler.cc,
// request_validation.h) and what a valid request then does, for every SweepService and
// WorkerService call. An input is one call: its first byte picks the method, the rest is the
// request in protobuf wire format, as gRPC would hand it over. Placeholders in string fields
// ("@sweep", "@run", "@run2", "@pending", "@worker"; tests/fuzz/fuzz_world.h) become the seeded
// objects' ids. Each input starts from the same freshly seeded store, so inputs reproduce alone.
//
// Checked: no crash, leak or undefined behaviour; an INVALID_ARGUMENT answer carries field
// violations (the API's error model, docs/api.md) unless it is the store's (page tokens,
// order_by) or the planner's.
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "core/field_violation.h"
#include "parity/v1/sweep_service.pb.h"
#include "parity/v1/worker_service.pb.h"
#include "tests/fuzz/fuzz_world.h"

namespace {

using parity::fuzz::FuzzWorld;
namespace v1 = parity::v1;

template <typename Request>
bool Parse(const uint8_t* data, size_t size, const FuzzWorld& world, Request& request) {
  if (!request.ParseFromArray(data, static_cast<int>(size))) return false;
  world.ExpandPlaceholders(request);
  return true;
}

// The API's error model (docs/api.md): a request refused as INVALID_ARGUMENT says which fields
// are wrong. The store's two refusals of a value it alone can judge say it in the message.
void CheckStatus(const absl::Status& status) {
  // PARITY_FUZZ_DEBUG=1 with an input file shows what the call answered.
  static const bool debug = getenv("PARITY_FUZZ_DEBUG") != nullptr;
  if (debug) fprintf(stderr, "answer: %s\n", status.ToString().c_str());
  if (status.code() != absl::StatusCode::kInvalidArgument) return;
  if (!parity::core::FieldViolationsOf(status).empty()) return;
  const std::string message(status.message());
  if (message == "page_token is not valid" || message.rfind("order_by '", 0) == 0) return;
  fprintf(stderr, "fuzz check failed: INVALID_ARGUMENT without field violations: %s\n",
          status.ToString().c_str());
  std::abort();
}

template <typename Response>
void Answered(const absl::StatusOr<Response>& response) {
  if (response.ok()) {
    (void)response->ByteSizeLong();
    return;
  }
  CheckStatus(response.status());
}

// Runs one request of type Request through `call`.
template <typename Request, typename Call>
void One(const uint8_t* data, size_t size, FuzzWorld& world, Call call) {
  Request request;
  if (!Parse(data, size, world, request)) return;
  Answered(call(world.scheduler(), request));
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  parity::fuzz::QuietLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t method = data[0];
  ++data;
  --size;
  static FuzzWorld* const shared = new FuzzWorld();
  FuzzWorld& world = *shared;
  world.Reset();
  using Scheduler = parity::server::testing::SchedulerUnderTest;
  const auto watch = [](int budget) {
    auto left = std::make_shared<int>(budget);
    return [left](const auto&) { return --*left > 0; };
  };
  const parity::server::WatchControl stop{[] { return true; }};
  switch (method % 19) {
    case 0:
      One<v1::PlanSweepRequest>(data, size, world,
                                [](Scheduler& s, const auto& r) { return s.PlanSweep(r); });
      break;
    case 1:
      One<v1::SubmitSweepRequest>(data, size, world,
                                  [](Scheduler& s, const auto& r) { return s.SubmitSweep(r); });
      break;
    case 2:
      One<v1::GetSweepRequest>(data, size, world,
                               [](Scheduler& s, const auto& r) { return s.GetSweep(r); });
      break;
    case 3:
      One<v1::ListSweepsRequest>(data, size, world,
                                 [](Scheduler& s, const auto& r) { return s.ListSweeps(r); });
      break;
    case 4:
      One<v1::CancelSweepRequest>(data, size, world,
                                  [](Scheduler& s, const auto& r) { return s.CancelSweep(r); });
      break;
    case 5:
      One<v1::DeleteSweepRequest>(data, size, world,
                                  [](Scheduler& s, const auto& r) { return s.DeleteSweep(r); });
      break;
    case 6:
      One<v1::ListRunsRequest>(data, size, world,
                               [](Scheduler& s, const auto& r) { return s.ListRuns(r); });
      break;
    case 7:
      One<v1::GetRunRequest>(data, size, world,
                             [](Scheduler& s, const auto& r) { return s.GetRun(r); });
      break;
    case 8:
      One<v1::QueryResultsRequest>(data, size, world,
                                   [](Scheduler& s, const auto& r) { return s.QueryResults(r); });
      break;
    case 9:
      One<v1::AnalyzeSweepRequest>(data, size, world,
                                   [](Scheduler& s, const auto& r) { return s.AnalyzeSweep(r); });
      break;
    case 10:
      One<v1::ListWorkersRequest>(data, size, world,
                                  [](Scheduler& s, const auto& r) { return s.ListWorkers(r); });
      break;
    case 11: {
      v1::WatchSweepRequest request;
      if (Parse(data, size, world, request)) {
        CheckStatus(world.scheduler().WatchSweep(request, stop, watch(64)));
      }
      break;
    }
    case 12: {
      v1::WatchRunRequest request;
      if (Parse(data, size, world, request)) {
        CheckStatus(world.scheduler().WatchRun(request, stop, watch(64)));
      }
      break;
    }
    case 13:
      One<v1::RegisterWorkerRequest>(
          data, size, world, [](Scheduler& s, const auto& r) { return s.RegisterWorker(r); });
      break;
    case 14:
      One<v1::LeaseRunRequest>(data, size, world, [&world](Scheduler& s, const auto& r) {
        return s.LeaseRun(r, world.clock().Now() + absl::Hours(1), {});
      });
      break;
    case 15:
      One<v1::HeartbeatRequest>(data, size, world, [&world](Scheduler& s, const auto& r) {
        return s.Heartbeat(world.WithSeededSecret(r));
      });
      break;
    case 16:
      One<v1::ReportMetricsRequest>(data, size, world, [&world](Scheduler& s, const auto& r) {
        return s.ReportMetrics(world.WithSeededSecret(r));
      });
      break;
    case 17:
      One<v1::CompleteRunRequest>(data, size, world, [&world](Scheduler& s, const auto& r) {
        return s.CompleteRun(world.WithSeededSecret(r));
      });
      break;
    case 18:
      One<v1::CheckpointRetentionRequest>(
          data, size, world, [](Scheduler& s, const auto& r) { return s.CheckpointRetention(r); });
      break;
  }
  return 0;
}
