// Placing a gang through the real gRPC API in a test: one LeaseRun long poll per worker, all in
// flight at once (a gang is placed only over workers waiting together), each with accepts_gangs.
// Header-only; the caller's `context` makes each call's ClientContext (its credentials).
#pragma once

#include <grpcpp/grpcpp.h>

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "parity/v1/worker_service.grpc.pb.h"

namespace parity::testing {

// The answers by worker, in `worker_ids` order; a failed call or an answer without a gang is a
// test failure naming the worker.
inline std::vector<v1::LeaseRunResponse> LeaseGangSlots(
    v1::WorkerService::Stub& workers, const std::vector<std::string>& worker_ids,
    const v1::Device& device, const std::function<std::unique_ptr<grpc::ClientContext>()>& context,
    int wait_seconds = 15) {
  std::vector<v1::LeaseRunResponse> answers(worker_ids.size());
  std::vector<grpc::Status> statuses(worker_ids.size());
  std::vector<std::thread> polls;
  for (size_t i = 0; i < worker_ids.size(); ++i) {
    polls.emplace_back([&, i] {
      v1::LeaseRunRequest request;
      request.set_worker_id(worker_ids[i]);
      *request.add_free_devices() = device;
      request.mutable_wait_time()->set_seconds(wait_seconds);
      request.set_accepts_gangs(true);
      statuses[i] = workers.LeaseRun(context().get(), request, &answers[i]);
    });
  }
  for (std::thread& poll : polls) poll.join();
  for (size_t i = 0; i < worker_ids.size(); ++i) {
    EXPECT_TRUE(statuses[i].ok()) << "worker " << i << ": " << statuses[i].error_message();
    EXPECT_TRUE(answers[i].has_gang()) << "worker " << i << " got no slot of the gang";
  }
  return answers;
}

}  // namespace parity::testing
